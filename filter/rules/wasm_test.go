package rules

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/wafguard/wafguard/internal/crsimport"
	"github.com/wafguard/wafguard/internal/ociimage"
	"github.com/wafguard/wafguard/internal/plugintest"
)

// TestWasm_release checks what build/main.wasm holds of the carried
// files: every rule file of the release the tests embed, and none of its
// regression tests.
func TestWasm_release(t *testing.T) {
	wasm := plugintest.Read(t)
	if got, err := ociimage.CRSFromModule(wasm); err != nil || got != CRSVersion {
		t.Fatalf("build/main.wasm holds CRS %q (%v), the tests CRS %s: build and test with the same CRS= (go run mage.go build)", got, err, CRSVersion)
	}
	dir := filepath.Join(crsimport.ReleasesDir, "v"+CRSVersion)
	m, err := crsimport.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	rules, tests := 0, 0
	for p := range m.Files {
		b, err := fs.ReadFile(os.DirFS("."), filepath.ToSlash(filepath.Join(dir, p)))
		if err != nil {
			t.Fatal(err)
		}
		isTest := filepath.Dir(p) != "rules" && p != "LICENSE" && p != "crs-setup.conf.example"
		// Test files shorter than this may share their text with a
		// rule file; none of the release's tests is.
		if len(b) < 64 {
			continue
		}
		switch in := bytes.Contains(wasm, b); {
		case isTest && in:
			t.Errorf("build/main.wasm holds the regression test %s", p)
		case isTest:
			tests++
		case !in:
			t.Errorf("build/main.wasm lacks %s of CRS %s", p, CRSVersion)
		default:
			rules++
		}
	}
	if rules < 40 || tests < 300 {
		t.Errorf("checked %d rule files in and %d tests out of the module, want 40 and 300 or more", rules, tests)
	}
}
