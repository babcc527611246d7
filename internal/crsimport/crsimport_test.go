package crsimport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testCommit = "0123456789abcdef0123456789abcdef01234567"

// releaseFiles are the files of a small CRS release 4.99.0, plus files a
// release has that the project does not carry.
func releaseFiles(version string) map[string]string {
	num := strings.ReplaceAll(version, ".", "")
	return map[string]string{
		"rules/REQUEST-901-INITIALIZATION.conf":                     "# init\nSecComponentSignature \"OWASP_CRS/" + version + "\"\n",
		"rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf":            "SecRule ARGS \"@rx union\" \"id:942100,phase:2,deny\"\n",
		"rules/sql-errors.data":                                     "error\n",
		"rules/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf.example": "# not carried\n",
		"crs-setup.conf.example":                                    "SecAction \\\n    \"id:900990,\\\n    setvar:tx.crs_setup_version=" + num + "\"\n",
		"LICENSE":                                                   "Apache License\n",
		"README.md":                                                 "not carried\n",
		"util/x.py":                                                 "not carried\n",
		"tests/regression/tests/REQUEST-942-APPLICATION-ATTACK-SQLI/942100.yaml": "meta:\n  author: x\n",
		"tests/regression/tests/base_positive_rules.py":                          "# carried with the tests\n",
		"tests/regression/README.md":                                             "not carried\n",
	}
}

// carriedOf are the paths of files that Import keeps.
var carriedOf = []string{
	"LICENSE", "crs-setup.conf.example", "rules/REQUEST-901-INITIALIZATION.conf",
	"rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf", "rules/sql-errors.data",
	"tests/regression/tests/REQUEST-942-APPLICATION-ATTACK-SQLI/942100.yaml",
	"tests/regression/tests/base_positive_rules.py",
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarball writes files as a gzip-compressed tarball under prefix, with
// git archive's global header recording commit when it is not empty.
func tarball(t *testing.T, files map[string]string, prefix, commit string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	if commit != "" {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": commit}}); err != nil {
			t.Fatal(err)
		}
	}
	if prefix != "" {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix, Mode: 0o755})
	}
	for p, c := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: prefix + p, Mode: 0o644, Size: int64(len(c))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	tw.Close()
	zw.Close()
	f := filepath.Join(t.TempDir(), "coreruleset.tar.gz")
	if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkImported checks the folder Import wrote: the carried files with
// their content, and nothing else but the manifest.
func checkImported(t *testing.T, rulesDir string, m *Manifest, files map[string]string) {
	t.Helper()
	dir := Dir(rulesDir, m.Version)
	if len(m.Files) != len(carriedOf) {
		t.Errorf("manifest lists %d files, want %d: %v", len(m.Files), len(carriedOf), m.Files)
	}
	for _, p := range carriedOf {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || string(b) != files[p] || m.Files[p] != sha256Hex(b) {
			t.Errorf("%s: got %q (%v), sha256 in the manifest %s", p, b, err, m.Files[p])
		}
	}
	if _, err := Verify(dir); err != nil {
		t.Errorf("Verify after Import: %v", err)
	}
}

func TestImport_folder(t *testing.T) {
	src, rulesDir := t.TempDir(), t.TempDir()
	files := releaseFiles("4.99.0")
	writeTree(t, src, files)
	_, err := Import(src, rulesDir, Options{})
	if err == nil || !strings.Contains(err.Error(), "not a git checkout, so its commit is unknown") || !strings.Contains(err.Error(), CommitEnv) {
		t.Errorf("a folder without a commit: %v", err)
	}
	m, err := Import(src, rulesDir, Options{Commit: testCommit})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != "4.99.0" || m.Tag != "v4.99.0" || m.Commit != testCommit || m.ImportedFrom != "folder" || m.Source != Upstream || m.TarballSHA256 != "" {
		t.Errorf("manifest %+v", m)
	}
	checkImported(t, rulesDir, m, files)
	if _, err := Import(src, rulesDir, Options{Commit: "HEAD"}); err == nil || !strings.Contains(err.Error(), `CRS_COMMIT="HEAD": want the 40 hex digits`) {
		t.Errorf("a commit that is not one: %v", err)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestImport_gitCheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src, rulesDir := t.TempDir(), t.TempDir()
	files := releaseFiles("4.99.0")
	writeTree(t, src, files)
	git(t, src, "init", "-q")
	git(t, src, "add", ".")
	git(t, src, "commit", "-q", "-m", "release")
	head := git(t, src, "rev-parse", "HEAD")
	if _, err := Import(src, rulesDir, Options{}); err == nil || !strings.Contains(err.Error(), "is not tagged v4.99.0 (tags at HEAD: none): check out the release tag") {
		t.Errorf("an untagged commit: %v", err)
	}
	git(t, src, "tag", "-a", "v4.99.0", "-m", "v4.99.0")
	m, err := Import(src, rulesDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Commit != head || m.ImportedFrom != "git checkout" {
		t.Errorf("manifest %+v, want commit %s from a git checkout", m, head)
	}
	checkImported(t, rulesDir, m, files)
	if _, err := Import(src, rulesDir, Options{Commit: testCommit}); err == nil || !strings.Contains(err.Error(), "the source was made from commit "+head+", but CRS_COMMIT="+testCommit) {
		t.Errorf("CRS_COMMIT against HEAD: %v", err)
	}
	os.WriteFile(filepath.Join(src, "LICENSE"), []byte("changed\n"), 0o644)
	if _, err := Import(src, rulesDir, Options{}); err == nil || !strings.Contains(err.Error(), "the checkout has changes") {
		t.Errorf("a checkout with changes: %v", err)
	}
}

func TestImport_tarball(t *testing.T) {
	files := releaseFiles("4.99.0")
	for _, tc := range []struct {
		name, prefix, inTar, given, want string
	}{
		{"GitHub release tarball", "coreruleset-4.99.0/", testCommit, "", testCommit},
		{"commit given", "coreruleset-4.99.0/", "", testCommit, testCommit},
		{"commit unknown", "", "", "", UnknownCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rulesDir := t.TempDir()
			f := tarball(t, files, tc.prefix, tc.inTar)
			m, err := Import(f, rulesDir, Options{Commit: tc.given})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(f)
			if m.Commit != tc.want || m.ImportedFrom != "release tarball" || m.TarballSHA256 != sha256Hex(data) {
				t.Errorf("manifest %+v, want commit %s and the tarball's sha256", m, tc.want)
			}
			checkImported(t, rulesDir, m, files)
		})
	}
	f := tarball(t, files, "coreruleset-4.99.0/", testCommit)
	other := strings.Repeat("f", 40)
	if _, err := Import(f, t.TempDir(), Options{Commit: other}); err == nil || !strings.Contains(err.Error(), "made from commit "+testCommit+", but CRS_COMMIT="+other) {
		t.Errorf("CRS_COMMIT against the tarball's commit: %v", err)
	}
	notGzip := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(notGzip, []byte("plain"), 0o644)
	if _, err := Import(notGzip, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "not a gzip-compressed tarball") {
		t.Errorf("not a tarball: %v", err)
	}
}

func TestImport_notARelease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(map[string]string)
		want   string
		commit string
	}{
		{"no rules/", func(f map[string]string) {
			for p := range f {
				if strings.HasPrefix(p, "rules/") {
					delete(f, p)
				}
			}
		}, "is not a CRS release: it has no rules/*.conf, rules/*.data (want a git checkout of a release tag or a release tarball", testCommit},
		{"no LICENSE", func(f map[string]string) { delete(f, "LICENSE") }, "is not a CRS release: it has no LICENSE (", testCommit},
		{"no tests", func(f map[string]string) {
			delete(f, "tests/regression/tests/REQUEST-942-APPLICATION-ATTACK-SQLI/942100.yaml")
		}, "is not a CRS release: it has no tests/regression/tests/**/*.yaml (", testCommit},
		{"no version", func(f map[string]string) { f["rules/REQUEST-901-INITIALIZATION.conf"] = "# no signature\n" },
			`no version: rules/REQUEST-901-INITIALIZATION.conf has no line SecComponentSignature "OWASP_CRS/<version>"`, testCommit},
		{"setup of another release", func(f map[string]string) {
			f["crs-setup.conf.example"] = releaseFiles("4.98.0")["crs-setup.conf.example"]
		}, "crs-setup.conf.example sets tx.crs_setup_version=4980, want 4990 for release 4.99.0", testCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := releaseFiles("4.99.0")
			tc.edit(files)
			src, rulesDir := t.TempDir(), t.TempDir()
			writeTree(t, src, files)
			for _, from := range []string{src, tarball(t, files, "coreruleset-4.99.0/", "")} {
				_, err := Import(from, rulesDir, Options{Commit: tc.commit})
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") != 0 {
					t.Errorf("%s: got %v, want one line with %q", from, err, tc.want)
				}
			}
			if entries, _ := os.ReadDir(rulesDir); len(entries) != 0 {
				t.Errorf("a refused import wrote %v", entries)
			}
		})
	}
}

// TestImport_again imports the same release twice, over a folder with an
// extra file: the same bytes, and nothing else.
func TestImport_again(t *testing.T) {
	files := releaseFiles("4.99.0")
	f := tarball(t, files, "coreruleset-4.99.0/", testCommit)
	rulesDir := t.TempDir()
	read := func() map[string]string {
		out := map[string]string{}
		dir := Dir(rulesDir, "4.99.0")
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(dir, p)
				out[rel] = string(b)
			}
			return err
		})
		return out
	}
	if _, err := Import(f, rulesDir, Options{}); err != nil {
		t.Fatal(err)
	}
	first := read()
	os.WriteFile(filepath.Join(Dir(rulesDir, "4.99.0"), "rules", "extra.conf"), []byte("x"), 0o644)
	if _, err := Import(f, rulesDir, Options{}); err != nil {
		t.Fatal(err)
	}
	second := read()
	if len(first) != len(carriedOf)+1 || len(second) != len(first) {
		t.Fatalf("%d files, then %d; want %d", len(first), len(second), len(carriedOf)+1)
	}
	for p, c := range first {
		if second[p] != c {
			t.Errorf("%s differs after the second import", p)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(rulesDir, ReleasesDir)); len(entries) != 1 {
		t.Errorf("%s holds %d entries after two imports, want the release only", ReleasesDir, len(entries))
	}
}

func TestVerify(t *testing.T) {
	rulesDir := t.TempDir()
	m, err := Import(tarball(t, releaseFiles("4.99.0"), "", testCommit), rulesDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := Dir(rulesDir, m.Version)
	sqli := filepath.Join(dir, "rules", "REQUEST-942-APPLICATION-ATTACK-SQLI.conf")
	for _, tc := range []struct {
		name string
		do   func()
		undo func()
		want string
	}{
		{"changed file", func() { os.WriteFile(sqli, []byte("SecRule ARGS \"@rx unionx\" \"id:942100,phase:2,deny\"\n"), 0o644) },
			func() {
				os.WriteFile(sqli, []byte(releaseFiles("4.99.0")["rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf"]), 0o644)
			},
			"CRS 4.99.0: " + sqli + ": sha256 "},
		{"missing file", func() { os.Remove(sqli) },
			func() {
				os.WriteFile(sqli, []byte(releaseFiles("4.99.0")["rules/REQUEST-942-APPLICATION-ATTACK-SQLI.conf"]), 0o644)
			},
			"CRS 4.99.0: " + sqli + ": missing, the manifest lists it"},
		{"extra file", func() { os.WriteFile(filepath.Join(dir, "rules", "local.conf"), []byte("x"), 0o644) },
			func() { os.Remove(filepath.Join(dir, "rules", "local.conf")) },
			"CRS 4.99.0: " + filepath.Join(dir, "rules", "local.conf") + ": a file the manifest does not list (remove it)"},
	} {
		tc.do()
		_, err := Verify(dir)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), reimport) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line %q...%q", tc.name, err, tc.want, reimport)
		}
		tc.undo()
		if _, err := Verify(dir); err != nil {
			t.Fatalf("%s undone: %v", tc.name, err)
		}
	}
	os.Remove(sqli)
	os.Remove(filepath.Join(dir, "LICENSE"))
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "(and 1 more file(s))") {
		t.Errorf("two missing files: %v", err)
	}
}

func TestGenerate(t *testing.T) {
	rulesDir := t.TempDir()
	for _, v := range []string{"4.99.0", "4.100.1"} {
		if _, err := Import(tarball(t, releaseFiles(v), "", testCommit), rulesDir, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Generate(rulesDir); err == nil || !strings.Contains(err.Error(), "crsDefault") {
		t.Errorf("no default: %v", err)
	}
	if err := SetDefault(rulesDir, "4.1.0"); err == nil || !strings.Contains(err.Error(), `CRS "4.1.0" is not imported (imported: 4.99.0, 4.100.1)`) {
		t.Errorf("an unknown default: %v", err)
	}
	os.WriteFile(filepath.Join(rulesDir, "crs_release_v4_0_0.go"), []byte("package rules\n"), 0o644)
	if err := SetDefault(rulesDir, "4.99.0"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(rulesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string][]string{
		ListFile:                     {`const DefaultCRS = "4.99.0"`, `{Version: "4.99.0", Tag: "v4.99.0", Commit: "` + testCommit + `", BuildTag: "crs4.99.0"},` + "\n\t{Version: \"4.100.1\""},
		"crs_release_v4_99_0.go":     {"//go:build !crs4.100.1\n", `CRSVersion = "4.99.0"`, "//go:embed crs/v4.99.0/rules/*.conf crs/v4.99.0/rules/*.data crs/v4.99.0/crs-setup.conf.example crs/v4.99.0/LICENSE\n"},
		"crs_release_v4_100_1.go":    {"//go:build crs4.100.1\n", `CRSVersion = "4.100.1"`},
		"crs_regression_v4_99_0.go":  {"//go:build !wasm && !crs4.100.1\n", "//go:embed crs/v4.99.0/tests/regression/tests\n"},
		"crs_regression_v4_100_1.go": {"//go:build !wasm && crs4.100.1\n"},
	} {
		got := read(name)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no %q in:\n%s", name, w, got)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(rulesDir, "crs_release_v4_0_0.go")); !os.IsNotExist(err) {
		t.Errorf("the file of a release no longer there was kept: %v", err)
	}
}
