package crsimport

import (
	"path/filepath"
	"testing"
)

// rulesDir is the package that carries the releases. The check lives here,
// not there, so that it names the file even when a missing one keeps that
// package from compiling (its go:embed patterns).
const rulesDir = "../../filter/rules"

// TestCarried_releases checks every release carried in filter/rules
// against its manifest: no file missing, none added, none changed.
func TestCarried_releases(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(rulesDir, ReleasesDir, "v*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no release under %s/%s", rulesDir, ReleasesDir)
	}
	for _, dir := range dirs {
		if _, err := Verify(dir); err != nil {
			t.Error(err)
		}
	}
	if _, def, err := Releases(rulesDir); err != nil || def == "" {
		t.Errorf("the default release: %q, %v", def, err)
	}
}
