package ftw

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wafguard/wafguard/internal/plugintest"
)

// smokeTests is the subset go test runs when FTW_INCLUDE is not set: a
// request-header rule, a multipart rule and a response rule through /reflect.
// The whole suite runs with go run ./ftw/cmd/ftwrun.
const smokeTests = `^(920160|922110|951110)-`

func TestMain(m *testing.M) {
	// go-ftw logs through zerolog's global logger, at debug by default.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	os.Exit(m.Run())
}

func testInclude(t *testing.T) *regexp.Regexp {
	s := os.Getenv("FTW_INCLUDE")
	if s == "" {
		s = smokeTests
	}
	re, err := regexp.Compile(s)
	if err != nil {
		t.Fatalf("FTW_INCLUDE: %v", err)
	}
	return re
}

// TestFTW runs the selected CRS tests against the stand-in (go) and against
// build/main.wasm served by cmd/wafhost (wasm), with the same overrides.
func TestFTW(t *testing.T) {
	include := testInclude(t)
	run := func(t *testing.T, target Target) {
		res, err := Run(target, Options{OverridesFile: "ftw.yml", Include: include, Progress: os.Stderr})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res.SummaryLine())
		if res.Passed == 0 {
			t.Errorf("no test passed")
		}
		for _, f := range res.Failures {
			t.Errorf("failed %s (%s): want %v; logged rules %v", f.ID, f.File, f.Want, f.Triggered)
		}
	}
	t.Run("go", func(t *testing.T) { run(t, startStandIn(t, "ftw-config.json")) })
	t.Run("wasm", func(t *testing.T) {
		h := startWasm(t)
		run(t, h.Target)
		if n, last := h.Critical(); n > 0 {
			t.Errorf("the plugin logged %d critical lines, the last: %s", n, last)
		}
	})
}

// startWasm serves the built plugin with ftw-config.json in this process.
// It skips when the binary is missing, unless WASM_REQUIRED is set (CI;
// plugintest.Read).
func startWasm(t *testing.T) *WasmHost {
	wasm := plugintest.Read(t)
	cfg, err := os.ReadFile("ftw-config.json")
	if err != nil {
		t.Fatal(err)
	}
	h, err := StartWasm(context.Background(), WasmOptions{Wasm: wasm, Config: cfg, LogFile: filepath.Join(t.TempDir(), "ftw.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}
