// Package crsimport brings an OWASP CRS release into the repository as a
// pinned dependency, and checks the releases carried there.
//
// A release lives in filter/rules/crs/v<version>/ with the files the
// plugin and its tests use, byte for byte as tagged upstream:
// rules/*.conf, rules/*.data, crs-setup.conf.example, LICENSE and the
// regression tests (tests/regression/tests/**), plus ManifestFile, which
// Import writes: the tag, the commit, where the files came from and the
// sha256 of each. Verify compares a release folder with its manifest.
// Generate writes the Go files of package filter/rules that embed the
// releases, one build tag per release (see BuildTag).
//
// `go run mage.go crsImport <dir|file.tar.gz>` runs Import and Generate.
package crsimport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const (
	// ManifestFile is the manifest's name in a release folder.
	ManifestFile = "MANIFEST.json"
	// Upstream is the CRS repository releases come from.
	Upstream = "https://github.com/coreruleset/coreruleset"
	// UnknownCommit is the commit of a release imported from a tarball
	// whose commit nobody gave; the tarball's sha256 is then the only
	// link to upstream.
	UnknownCommit = "unknown"
	// CommitEnv names the environment variable that gives the commit of
	// a tarball (the mage target reads it).
	CommitEnv = "CRS_COMMIT"
	// ReleasesDir is where the releases live, relative to the rules
	// package.
	ReleasesDir = "crs"
	// DefaultFile, in ReleasesDir, names the release a build embeds when
	// it names none.
	DefaultFile = "DEFAULT"
	// testsDir is the folder of the regression tests in a release.
	testsDir = "tests/regression/tests"
	// initFile holds the release's version (SecComponentSignature).
	initFile = "rules/REQUEST-901-INITIALIZATION.conf"
	// setupFile is the release's setup template.
	setupFile = "crs-setup.conf.example"
)

// reimport is what every complaint about a carried release ends with.
const reimport = "the files of a CRS release are carried as tagged upstream and never edited: re-import the release with go run mage.go crsImport <git checkout or release tarball of the tag>"

// Manifest describes one imported release. It is written as JSON with
// its keys in a fixed order, so importing the same release twice gives
// the same bytes.
type Manifest struct {
	// Version is the release's version, as its rules sign it
	// (SecComponentSignature "OWASP_CRS/<version>").
	Version string `json:"version"`
	// Tag is the upstream git tag, "v" and the version.
	Tag string `json:"tag"`
	// Commit is the commit the tag points at, or UnknownCommit.
	Commit string `json:"commit"`
	// Source is the upstream repository.
	Source string `json:"source"`
	// ImportedFrom says what the files were read from: "git checkout" or
	// "release tarball".
	ImportedFrom string `json:"imported_from"`
	// TarballSHA256 is the hex sha256 of the tarball, when the release
	// came from one.
	TarballSHA256 string `json:"tarball_sha256,omitempty"`
	// Files maps each carried file, by its path in the release, to its
	// hex sha256.
	Files map[string]string `json:"files"`
}

// Options are what the caller knows of the source beyond its files.
type Options struct {
	// Commit is the commit the source was made from (CRS_COMMIT). A git
	// checkout's HEAD, or a tarball's own record of its commit, must
	// agree with it.
	Commit string
}

// Dir is the folder of release version under the rules package folder.
func Dir(rulesDir, version string) string {
	return filepath.Join(rulesDir, ReleasesDir, "v"+version)
}

// BuildTag is the build tag that selects release version.
func BuildTag(version string) string { return "crs" + version }

// carried reports whether the file at path p of a release is one the
// project carries.
func carried(p string) bool {
	switch {
	case p == "LICENSE" || p == setupFile:
		return true
	case strings.HasPrefix(p, "rules/") && !strings.Contains(p[len("rules/"):], "/"):
		return path.Ext(p) == ".conf" || path.Ext(p) == ".data"
	case strings.HasPrefix(p, testsDir+"/"):
		return true
	}
	return false
}

// release is a source's carried files, by path.
type release struct {
	files   map[string][]byte
	commit  string   // what the source says of its commit, "" if nothing
	tags    []string // a git checkout's tags at HEAD
	from    string   // Manifest.ImportedFrom
	tarball string   // the tarball's sha256
	name    string   // the source, for messages
}

// Import reads the CRS release at src (a git checkout or a folder of the
// release's files, or a .tar.gz/.tgz release tarball) and writes it to
// its folder under rulesDir (the filter/rules package folder), replacing
// what was there, with its manifest. It returns the manifest. It refuses,
// with one message saying what is missing or wrong, a source that does
// not look like a CRS release.
func Import(src, rulesDir string, o Options) (*Manifest, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("crsImport: %w", err)
	}
	var r *release
	if st.IsDir() {
		r, err = readDir(src)
	} else {
		r, err = readTarball(src)
	}
	if err != nil {
		return nil, err
	}
	m, err := r.manifest(o)
	if err != nil {
		return nil, err
	}
	if err := write(r, m, Dir(rulesDir, m.Version)); err != nil {
		return nil, err
	}
	return m, nil
}

// readDir reads the carried files of a folder, and its commit when it is
// the top of a git checkout.
func readDir(dir string) (*release, error) {
	r := &release{files: map[string][]byte{}, from: "git checkout", name: dir}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !carried(rel) {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("crsImport: %s: %s is not a regular file (a link?); a CRS release holds plain files", dir, rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r.files[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.commit, r.tags, err = gitHead(dir); err != nil {
		return nil, err
	}
	if r.commit == "" {
		r.from = "folder"
	}
	return r, nil
}

// gitHead returns the commit of a git checkout whose top is dir and the
// tags that point at it, or "" when dir is not the top of one. A
// checkout with changes is refused: its files are not the commit's.
func gitHead(dir string) (string, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	top, err := exec.Command("git", "-C", abs, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", nil, nil // not a checkout (or no git)
	}
	t, err1 := filepath.EvalSymlinks(strings.TrimSpace(string(top)))
	a, err2 := filepath.EvalSymlinks(abs)
	if err1 != nil || err2 != nil || t != a {
		return "", nil, nil // a folder inside some other checkout
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", abs}, args...)...).Output()
		if err != nil {
			return "", fmt.Errorf("crsImport: %s: git %s: %w", dir, strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", nil, err
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", nil, err
	}
	if status != "" {
		return "", nil, fmt.Errorf("crsImport: %s: the checkout has changes (git status: %s); import a clean checkout of the release tag", dir, strings.SplitN(status, "\n", 2)[0])
	}
	tags, err := git("tag", "--points-at", "HEAD")
	if err != nil {
		return "", nil, err
	}
	return head, strings.Fields(tags), nil
}

// readTarball reads the carried files of a release tarball: either the
// release's files at its top, or under one top folder, as GitHub's
// release tarballs and git archive --prefix have them.
func readTarball(file string) (*release, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("crsImport: %w", err)
	}
	sum := sha256.Sum256(data)
	r := &release{files: map[string][]byte{}, from: "release tarball", tarball: hex.EncodeToString(sum[:]), name: file}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("crsImport: %s: not a gzip-compressed tarball (want a release tarball, .tar.gz, or a folder): %w", file, err)
	}
	type entry struct {
		name string
		data []byte
	}
	var entries []entry
	tops := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("crsImport: %s: reading the tarball: %w", file, err)
		}
		switch h.Typeflag {
		case tar.TypeXGlobalHeader:
			// git archive records the commit of a tree it archives
			// from a commit or tag here; GitHub's tarballs have it too.
			if c := h.PAXRecords["comment"]; commitRx.MatchString(c) {
				r.commit = c
			}
			continue
		case tar.TypeDir:
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		top, _, _ := strings.Cut(name, "/")
		tops[top] = true
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("crsImport: %s: %s: %w", file, h.Name, err)
		}
		entries = append(entries, entry{name, b})
		if h.Typeflag != tar.TypeReg && carried(name) {
			return nil, fmt.Errorf("crsImport: %s: %s is not a regular file (a link?); a CRS release holds plain files", file, h.Name)
		}
	}
	prefix := ""
	if len(tops) == 1 && !tops["rules"] {
		for t := range tops {
			prefix = t + "/"
		}
	}
	for _, e := range entries {
		if rel, ok := strings.CutPrefix(e.name, prefix); ok && carried(rel) {
			r.files[rel] = e.data
		}
	}
	return r, nil
}

var (
	commitRx    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	signatureRx = regexp.MustCompile(`(?m)^SecComponentSignature "OWASP_CRS/([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?)"`)
	setupVerRx  = regexp.MustCompile(`(?m)^\s*setvar:'?tx\.crs_setup_version=([0-9]+)`)
)

// manifest checks that r looks like a CRS release and describes it.
func (r *release) manifest(o Options) (*Manifest, error) {
	var missing []string
	has := func(prefix, ext string) bool {
		for p := range r.files {
			if strings.HasPrefix(p, prefix) && strings.HasSuffix(p, ext) {
				return true
			}
		}
		return false
	}
	if !has("rules/", ".conf") {
		missing = append(missing, "rules/*.conf")
	} else if _, ok := r.files[initFile]; !ok {
		missing = append(missing, initFile)
	}
	if !has("rules/", ".data") {
		missing = append(missing, "rules/*.data")
	}
	for _, f := range []string{setupFile, "LICENSE"} {
		if _, ok := r.files[f]; !ok {
			missing = append(missing, f)
		}
	}
	if !has(testsDir+"/", ".yaml") {
		missing = append(missing, testsDir+"/**/*.yaml")
	}
	if len(missing) != 0 {
		return nil, fmt.Errorf("crsImport: %s is not a CRS release: it has no %s (want a git checkout of a release tag or a release tarball of github.com/coreruleset/coreruleset)", r.name, strings.Join(missing, ", "))
	}
	sig := signatureRx.FindSubmatch(r.files[initFile])
	if sig == nil {
		return nil, fmt.Errorf("crsImport: %s: no version: %s has no line SecComponentSignature \"OWASP_CRS/<version>\"; is it a CRS 4 release?", r.name, initFile)
	}
	version := string(sig[1])
	setup := setupVerRx.FindSubmatch(r.files[setupFile])
	want := strings.ReplaceAll(strings.SplitN(version, "-", 2)[0], ".", "")
	if setup == nil || string(setup[1]) != want {
		got := "none"
		if setup != nil {
			got = string(setup[1])
		}
		return nil, fmt.Errorf("crsImport: %s: %s sets tx.crs_setup_version=%s, want %s for release %s (%s): the files are not of one release", r.name, setupFile, got, want, version, initFile)
	}
	if r.from == "git checkout" && !slices.Contains(r.tags, "v"+version) {
		tags := strings.Join(r.tags, ", ")
		if tags == "" {
			tags = "none"
		}
		return nil, fmt.Errorf("crsImport: %s: HEAD (%s) is not tagged v%s (tags at HEAD: %s): check out the release tag", r.name, r.commit, version, tags)
	}
	commit := r.commit
	switch {
	case o.Commit != "" && !commitRx.MatchString(o.Commit):
		return nil, fmt.Errorf("crsImport: %s=%q: want the 40 hex digits of the commit the tag v%s points at", CommitEnv, o.Commit, version)
	case o.Commit != "" && commit != "" && o.Commit != commit:
		return nil, fmt.Errorf("crsImport: %s: the source was made from commit %s, but %s=%s; give the commit of tag v%s", r.name, commit, CommitEnv, o.Commit, version)
	case commit == "":
		commit = o.Commit
	}
	if commit == "" {
		if r.tarball == "" {
			return nil, fmt.Errorf("crsImport: %s: not a git checkout, so its commit is unknown: import a git checkout of tag v%s, or its release tarball, or give the commit with %s", r.name, version, CommitEnv)
		}
		commit = UnknownCommit
	}
	m := &Manifest{
		Version: version, Tag: "v" + version, Commit: commit, Source: Upstream,
		ImportedFrom: r.from, TarballSHA256: r.tarball, Files: map[string]string{},
	}
	for p, b := range r.files {
		m.Files[p] = sha256Hex(b)
	}
	return m, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// marshal is the manifest's file content.
func (m *Manifest) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// write writes r's files and manifest m to dst: into a new folder beside
// it, which then replaces dst.
func write(r *release, m *Manifest, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for p, b := range r.files {
		f := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
	}
	mb, err := m.marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestFile), mb, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// ReadManifest reads the manifest of the release folder dir.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w; %s", dir, err, reimport)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w; %s", filepath.Join(dir, ManifestFile), err, reimport)
	}
	if m.Version == "" || len(m.Files) == 0 {
		return nil, fmt.Errorf("%s: no version or no files; %s", filepath.Join(dir, ManifestFile), reimport)
	}
	return &m, nil
}

// Verify checks the release folder dir against its manifest: every file
// it lists is there with its sha256, and no other file is. It returns
// one error naming the first file that differs (and how many more do),
// with what to do.
func Verify(dir string) (*Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if want := "v" + m.Version; filepath.Base(dir) != want {
		return nil, fmt.Errorf("%s: the manifest is of release %s, whose folder is %s; %s", dir, m.Version, want, reimport)
	}
	var problems []string
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ManifestFile {
			return nil
		}
		want, ok := m.Files[rel]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: a file the manifest does not list (remove it)", filepath.Join(dir, rel)))
			return nil
		}
		seen[rel] = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got := sha256Hex(b); got != want {
			problems = append(problems, fmt.Sprintf("%s: sha256 %s, the manifest has %s: the file was changed", filepath.Join(dir, rel), got, want))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for p := range m.Files {
		if !seen[p] {
			problems = append(problems, fmt.Sprintf("%s: missing, the manifest lists it", filepath.Join(dir, filepath.FromSlash(p))))
		}
	}
	if len(problems) == 0 {
		return m, nil
	}
	slices.Sort(problems)
	more := ""
	if len(problems) > 1 {
		more = fmt.Sprintf(" (and %d more file(s))", len(problems)-1)
	}
	return nil, errors.New("CRS " + m.Version + ": " + problems[0] + more + "; " + reimport)
}

// Releases returns the manifests of the releases under rulesDir, by
// version, and the default release (DefaultFile). It does not check the
// files (Verify does). When only the default is missing or unknown, the
// releases come with the error.
func Releases(rulesDir string) (map[string]*Manifest, string, error) {
	base := filepath.Join(rulesDir, ReleasesDir)
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, "", err
	}
	out := map[string]*Manifest{}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") {
			continue
		}
		m, err := ReadManifest(filepath.Join(base, e.Name()))
		if err != nil {
			return nil, "", err
		}
		if e.Name() != "v"+m.Version {
			return nil, "", fmt.Errorf("%s: the manifest is of release %s; %s", filepath.Join(base, e.Name()), m.Version, reimport)
		}
		out[m.Version] = m
	}
	b, err := os.ReadFile(filepath.Join(base, DefaultFile))
	if err != nil {
		return out, "", fmt.Errorf("the default CRS release: %w (go run mage.go crsDefault <version> writes it)", err)
	}
	def := strings.TrimSpace(string(b))
	if out[def] == nil {
		return out, "", fmt.Errorf("%s names release %q, which is not imported (imported: %s)", filepath.Join(base, DefaultFile), def, strings.Join(Versions(out), ", "))
	}
	return out, def, nil
}

// Versions lists the versions of releases, in version order.
func Versions(releases map[string]*Manifest) []string {
	var vs []string
	for v := range releases {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, compareVersions)
	return vs
}

// compareVersions orders x.y.z versions numerically.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, nb := numPrefix(pa[i]), numPrefix(pb[i])
		if na != nb {
			return na - nb
		}
		if c := strings.Compare(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	return len(pa) - len(pb)
}

func numPrefix(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// SetDefault makes version, an imported release, the one a build embeds
// when it names none, and regenerates the Go files.
func SetDefault(rulesDir, version string) error {
	releases, _, err := Releases(rulesDir)
	if err != nil && releases == nil {
		return err
	}
	if releases[version] == nil {
		return fmt.Errorf("crsDefault: CRS %q is not imported (imported: %s); import it first with go run mage.go crsImport <git checkout or release tarball>", version, strings.Join(Versions(releases), ", "))
	}
	if err := os.WriteFile(filepath.Join(rulesDir, ReleasesDir, DefaultFile), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	return Generate(rulesDir)
}
