package rules

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"

	"github.com/wafguard/wafguard/internal/crsimport"
)

// TestReleases_generated checks that the generated Go files are what
// crsImport writes for the releases carried, and that Releases lists
// them all.
func TestReleases_generated(t *testing.T) {
	want, err := crsimport.GeneratedFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s is not what go run mage.go crsImport generates for the releases in crs/ (run go run mage.go crsDefault %s to regenerate it)", name, DefaultCRS)
		}
	}
	on, _ := filepath.Glob("crs_*.go")
	for _, name := range on {
		if want[name] == nil {
			t.Errorf("%s: generated for a release no longer in crs/; remove it (go run mage.go crsDefault %s regenerates the files)", name, DefaultCRS)
		}
	}
	releases, def, err := crsimport.Releases(".")
	if err != nil {
		t.Fatal(err)
	}
	if def != DefaultCRS || len(Releases) != len(releases) {
		t.Errorf("DefaultCRS %s and %d releases, crs/ has %s and %d", DefaultCRS, len(Releases), def, len(releases))
	}
	found := false
	for _, r := range Releases {
		m := releases[r.Version]
		if m == nil || m.Commit != r.Commit || m.Tag != r.Tag {
			t.Errorf("release %+v: the manifest says %+v", r, m)
		}
		found = found || r.Version == CRSVersion && r.Commit == CRSCommit
	}
	if !found {
		t.Errorf("the embedded release %s (%s) is not in Releases", CRSVersion, CRSCommit)
	}
}

// TestCoraza_provenance checks coraza/ against its provenance and
// against the Coraza module go.mod pins.
func TestCoraza_provenance(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", crsimport.CorazaModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", crsimport.CorazaModule, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err := crsimport.VerifyCoraza(".", dir, version); err != nil {
		t.Error(err)
	}
}

// TestFS_names reads every name the rule sets use.
func TestFS_names(t *testing.T) {
	read := func(name string) string {
		t.Helper()
		b, err := FS.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(b)
	}
	rel := func(p string) string {
		b, err := os.ReadFile(filepath.Join(crsimport.ReleasesDir, "v"+CRSVersion, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	coraza, err := os.ReadFile("coraza/coraza.conf-recommended")
	if err != nil {
		t.Fatal(err)
	}
	if read(Recommended) != string(coraza) || read(CorazaRecommended) != string(coraza) {
		t.Errorf("%s and %s: want coraza/coraza.conf-recommended", Recommended, CorazaRecommended)
	}
	if read(CRSSetupExample) != rel("crs-setup.conf.example") {
		t.Errorf("%s: want the release's crs-setup.conf.example", CRSSetupExample)
	}
	if s := read(CRSSetup); !strings.Contains(s, "\nInclude @crs-setup.conf.example\n") || !strings.Contains(s, "id:900510,") {
		t.Errorf("%s: want wafguard-setup.conf, got:\n%s", CRSSetup, s)
	}
	if read("@owasp_crs/REQUEST-901-INITIALIZATION.conf") != rel("rules/REQUEST-901-INITIALIZATION.conf") ||
		read("some/dir/@owasp_crs/REQUEST-901-INITIALIZATION.conf") != rel("rules/REQUEST-901-INITIALIZATION.conf") {
		t.Error("@owasp_crs/REQUEST-901-INITIALIZATION.conf: want the release's rules/REQUEST-901-INITIALIZATION.conf")
	}
	if !strings.Contains(read("@owasp_crs/REQUEST-901-INITIALIZATION.conf"), `SecComponentSignature "OWASP_CRS/`+CRSVersion+`"`) {
		t.Errorf("the embedded rules do not sign as CRS %s", CRSVersion)
	}
	for _, name := range []string{"@owasp_crs", "@owasp_crs/nope.conf", "@owasp_crs/../LICENSE", "LICENSE", "@demo-conf", "wafguard-setup.conf"} {
		if _, err := FS.ReadFile(name); err == nil {
			t.Errorf("%s: read, want an error", name)
		}
	}

	for _, ext := range []string{"conf", "data"} {
		got, err := fs.Glob(FS, "@owasp_crs/*."+ext)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := filepath.Glob(filepath.Join(crsimport.ReleasesDir, "v"+CRSVersion, "rules", "*."+ext))
		if len(got) != len(want) || len(got) < 10 {
			t.Errorf("@owasp_crs/*.%s: %d files, the release has %d", ext, len(got), len(want))
		}
		for _, g := range got {
			if _, err := fs.ReadFile(FS, g); err != nil {
				t.Errorf("%s: %v", g, err)
			}
		}
	}
	var walked []string
	if err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			walked = append(walked, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	inCRS := 0
	for _, p := range walked {
		if path.Dir(p) == CRSDir {
			inCRS++
		}
	}
	if len(walked) != inCRS+len(files) || inCRS < 40 {
		t.Errorf("walk: %d files, %d of them in %s: %v", len(walked), inCRS, CRSDir, walked)
	}
}

// TestFS_compiles compiles the shipped rule set and the release's own
// setup with Coraza, natively.
func TestFS_compiles(t *testing.T) {
	for _, setup := range []string{CRSSetup, CRSSetupExample} {
		_, err := coraza.NewWAF(coraza.NewWAFConfig().WithRootFS(FS).WithDirectives(
			"Include " + Recommended + "\nSecRuleEngine On\nInclude " + setup + "\nInclude @owasp_crs/*.conf"))
		if err != nil {
			t.Errorf("CRS %s with %s: %v", CRSVersion, setup, err)
		}
	}
}

// TestRegressionTests finds the release's regression tests.
func TestRegressionTests(t *testing.T) {
	tests := RegressionTests()
	n := 0
	if err := fs.WalkDir(tests, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".yaml") {
			n++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(tests, "REQUEST-911-METHOD-ENFORCEMENT/911100.yaml"); err != nil || n < 300 {
		t.Errorf("%d test files (911100.yaml: %v), want the release's 300 and more", n, err)
	}
}
