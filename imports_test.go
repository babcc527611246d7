package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wafguard/wafguard/internal/plugintest"
)

const (
	wasmPath        = "build/main.wasm" // in messages; the file is plugintest.Path()
	envoyImportsTxt = "testdata/envoy-imports.txt"
)

// compiledWasm compiles the plugin once per test binary.
var compiledWasm = sync.OnceValues(func() ([]api.FunctionDefinition, error) {
	bin, err := os.ReadFile(plugintest.Path())
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	// The interpreter only decodes and validates, which is all an import
	// listing needs; the compiler would spend seconds generating code.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	mod, err := rt.CompileModule(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", wasmPath, err)
	}
	return mod.ImportedFunctions(), nil
})

// loadImports returns the wasm module's imported functions, skipping the test
// when the binary is missing unless WASM_REQUIRED is set (plugintest.Read).
func loadImports(t *testing.T) []api.FunctionDefinition {
	t.Helper()
	plugintest.Read(t)
	defs, err := compiledWasm()
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

// envoyImports reads testdata/envoy-imports.txt: each import Envoy provides,
// mapped to "" when every Envoy since 1.33 has it, or to the first Envoy
// version that has it.
func envoyImports(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(envoyImportsTxt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		since := ""
		if len(fields) > 1 {
			since = fields[1]
		}
		out[fields[0]] = since
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWasm_envoyImports fails when build/main.wasm imports a function that
// Envoy's proxy-wasm host does not provide: Envoy would refuse to load it.
// It logs the imports that only Envoy 1.39+ provides.
func TestWasm_envoyImports(t *testing.T) {
	defs := loadImports(t)
	allowed := envoyImports(t)
	var missing, newer []string
	seen := map[string]bool{}
	for _, d := range defs {
		module, name, _ := d.Import()
		if module == "wasi_unstable" {
			module = "wasi_snapshot_preview1"
		}
		key := module + "." + name
		if seen[key] {
			// Go's linker may import one function more than once.
			continue
		}
		seen[key] = true
		since, ok := allowed[key]
		switch {
		case !ok:
			missing = append(missing, key)
		case since != "":
			newer = append(newer, key+" (Envoy "+since+"+)")
		}
	}
	sort.Strings(newer)
	for _, n := range newer {
		t.Logf("import beyond the Envoy 1.33 set: %s", n)
	}
	if len(missing) != 0 {
		sort.Strings(missing)
		t.Errorf("%s imports functions Envoy does not provide, so Envoy would refuse to load it: %s",
			wasmPath, strings.Join(missing, ", "))
	}
}
