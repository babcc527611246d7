package wasmbuild

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func goroot(t *testing.T) string {
	t.Helper()
	root, err := GOROOT()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func hidden(t *testing.T, overlay []byte) map[string]string {
	t.Helper()
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(overlay, &o); err != nil {
		t.Fatal(err)
	}
	return o.Replace
}

// TestNetHTTPStatusOnly: of this toolchain's net/http every non-test Go
// file but status.go is hidden (replaced by nothing), and nothing else.
func TestNetHTTPStatusOnly(t *testing.T) {
	root := goroot(t)
	overlay, err := NetHTTPStatusOnly(root)
	if err != nil {
		t.Fatal(err)
	}
	got := hidden(t, overlay)
	dir := filepath.Join(root, "src", "net", "http")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, f := range files {
		_, isHidden := got[f]
		switch base := filepath.Base(f); {
		case base == "status.go":
			if isHidden {
				t.Errorf("%s is hidden: it declares the status codes Coraza uses", f)
			}
		case strings.HasSuffix(base, "_test.go"):
			if isHidden {
				t.Errorf("%s is hidden: tests are not built", f)
			}
		default:
			want++
			if !isHidden {
				t.Errorf("%s is not hidden", f)
			}
		}
	}
	if len(got) != want {
		t.Errorf("%d files hidden, want the %d non-test files of %s but status.go", len(got), want, dir)
	}
	for f, to := range got {
		if to != "" {
			t.Errorf("%s replaced by %q, want hidden (\"\")", f, to)
		}
	}
}

// TestNetHTTPStatusOnly_missing: a Go tree without net/http, or whose
// net/http has no status.go, is refused with the path.
func TestNetHTTPStatusOnly_missing(t *testing.T) {
	root := t.TempDir()
	if _, err := NetHTTPStatusOnly(root); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "src", "net", "http")) {
		t.Errorf("no net/http: err %v, want one naming the folder", err)
	}
	dir := filepath.Join(root, "src", "net", "http")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.go"), []byte("package http\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NetHTTPStatusOnly(root); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "status.go")) {
		t.Errorf("no status.go: err %v, want one naming it", err)
	}
}

// TestNetHTTPStatusOnly_build: with the overlay, the packages of Coraza
// that import net/http build for wasm, and a program that uses more of
// net/http than status.go does not: the build fails rather than link
// something else.
func TestNetHTTPStatusOnly_build(t *testing.T) {
	if testing.Short() {
		t.Skip("builds for wasm")
	}
	overlay, err := NetHTTPStatusOnly(goroot(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "overlay.json")
	if err := os.WriteFile(path, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"build", "-overlay", path, "-tags", Tags, "-o", os.DevNull}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := build(".", "github.com/corazawaf/coraza/v3/internal/actions", "github.com/corazawaf/coraza/v3/internal/auditlog"); err != nil {
		t.Fatalf("Coraza's importers of net/http with the overlay: %v\n%s", err, out)
	}
	dir := t.TempDir()
	prog := "package main\n\nimport \"net/http\"\n\nfunc main() { _, _ = http.Get(\"http://127.0.0.1/\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := build(dir, ".")
	if err == nil || !strings.Contains(out, "undefined: http.Get") {
		t.Errorf("a program calling http.Get built with the overlay: err %v, output %s; want undefined: http.Get", err, out)
	}
}
