// Package plugintest finds the built plugin (build/main.wasm) for the
// tests and benchmarks that run it on the host, from whichever package
// directory they run in.
package plugintest

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Path is $WAFGUARD_WASM when set, else build/main.wasm at the repository
// root. A relative $WAFGUARD_WASM that does not exist from the test's
// directory is taken from the repository root, where the command was
// typed.
func Path() string {
	p := os.Getenv("WAFGUARD_WASM")
	if p == "" {
		return filepath.Join(root(), "build", "main.wasm")
	}
	if _, err := os.Stat(p); err != nil && !filepath.IsAbs(p) {
		return filepath.Join(root(), p)
	}
	return p
}

// root is the repository root: two levels above this file.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var read struct {
	sync.Once
	b   []byte
	err error
}

// Read returns the plugin, read once per test binary (callers must not
// change it), or skips tb when it is missing, failing instead when
// WASM_REQUIRED is set (CI builds it first, so a missing plugin there is a
// failure, not a reason to skip).
func Read(tb testing.TB) []byte {
	tb.Helper()
	read.Do(func() { read.b, read.err = os.ReadFile(Path()) })
	if read.err != nil {
		if os.Getenv("WASM_REQUIRED") != "" {
			tb.Fatalf("reading the plugin: %v", read.err)
		}
		tb.Skipf("reading the plugin: %v (build it with: go run mage.go build)", read.err)
	}
	return read.b
}
