package wasmhost

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNotesResolve: every "notes N.N" in the repository's Go files names a
// section of docs/envoy-host-rules.md, so the host's rationale is read
// inside the repository.
func TestNotesResolve(t *testing.T) {
	doc, err := os.ReadFile("../docs/envoy-host-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`notes (\d+\.\d+)`)
	seen := 0
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "build" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !strings.Contains(string(doc), "\n### "+m[1]+" ") {
				t.Errorf("%s cites notes %s, which docs/envoy-host-rules.md has no section for", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no notes reference found: the pattern or the walk is wrong")
	}
}
