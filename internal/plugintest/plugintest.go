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

// Required reports whether a missing plugin is a failure rather than a
// reason to skip: WASM_REQUIRED is set (CI builds the plugin first, so a
// missing plugin there is a failure).
func Required() bool { return os.Getenv("WASM_REQUIRED") != "" }

// Missing ends tb for want of the plugin (or of something built from it):
// it fails under WASM_REQUIRED, and skips otherwise, saying how to build
// it.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format+" (build it with: go run mage.go build)", args...)
}

// Read returns the plugin, read once per test binary (callers must not
// change it), or ends tb through Missing when it cannot be read.
func Read(tb testing.TB) []byte {
	tb.Helper()
	read.Do(func() { read.b, read.err = os.ReadFile(Path()) })
	if read.err != nil {
		Missing(tb, "reading the plugin: %v", read.err)
	}
	return read.b
}
