package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/wafguard/wafguard/filter/rules"
	"github.com/wafguard/wafguard/internal/plugintest"
)

// fakeModule is a small module-shaped input: the wasm header and a body.
func fakeModule(body string) []byte {
	return append([]byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}, body...)
}

var testMeta = Metadata{
	Revision:   "0123456789abcdef0123456789abcdef01234567",
	Version:    "v0.1.0-3-g0123456",
	Created:    time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	Source:     "https://github.com/wafguard/wafguard",
	Coraza:     "v3.8.1",
	CRS:        "4.25.1",
	CRSCommit:  "3b89d5a05322f448b4b74b9cadc5fb05ac6915ad",
	CRSDefault: true,
}

func readAll(t *testing.T, open func() (io.ReadCloser, error)) []byte {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkLabels(t *testing.T, got map[string]string, wasm []byte) {
	t.Helper()
	want := map[string]string{
		LabelTitle: "wafguard", LabelRevision: testMeta.Revision, LabelVersion: testMeta.Version,
		LabelSource: testMeta.Source, LabelCoraza: "v3.8.1", LabelCRS: "4.25.1",
		LabelCRSCommit: testMeta.CRSCommit,
		LabelCreated:   "2026-12-01T10:00:00Z", LabelModule: ModuleSHA256(wasm),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s: got %q, want %q", k, got[k], v)
		}
	}
}

func TestBuild_compat(t *testing.T) {
	wasm := fakeModule("compat body")
	img, err := Build(wasm, Compat, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.DockerManifestSchema2 || m.Config.MediaType != types.DockerConfigJSON {
		t.Errorf("manifest %s, config %s: want a Docker image manifest and config", m.MediaType, m.Config.MediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != types.DockerLayer {
		t.Fatalf("layers %+v: want one %s", m.Layers, types.DockerLayer)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	// The layer is gzip of a tar with exactly plugin.wasm, as the
	// Dockerfile's COPY makes it.
	zr, err := gzip.NewReader(bytes.NewReader(readAll(t, layers[0].Compressed)))
	if err != nil {
		t.Fatalf("layer is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name != ModuleFile {
			continue
		}
		if h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mode %o uid %d gid %d, want 644 0 0", h.Name, h.Mode, h.Uid, h.Gid)
		}
		b, _ := io.ReadAll(tr)
		if !bytes.Equal(b, wasm) {
			t.Errorf("%s differs from the module", h.Name)
		}
	}
	if len(names) != 1 || names[0] != ModuleFile {
		t.Errorf("layer entries %q, want only %q", names, ModuleFile)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, cf.Config.Labels, wasm)
	if cf.OS != "wasip1" || cf.Architecture != "wasm" {
		t.Errorf("platform %s/%s, want wasip1/wasm", cf.OS, cf.Architecture)
	}
	// The config's diff_id is the uncompressed tar's digest, which
	// docker load checks.
	diff, err := layers[0].DiffID()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.RootFS.DiffIDs) != 1 || cf.RootFS.DiffIDs[0] != diff {
		t.Errorf("rootfs diff_ids %v, want [%s]", cf.RootFS.DiffIDs, diff)
	}
	u := readAll(t, layers[0].Uncompressed)
	if h, _, _ := v1.SHA256(bytes.NewReader(u)); h != diff {
		t.Errorf("diff_id %s, but the tar's sha256 is %s", diff, h)
	}
}

func TestBuild_artifacts(t *testing.T) {
	wasm := fakeModule("artifact body")
	sum := sha256.Sum256(wasm)
	moduleDigest := "sha256:" + hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		f        Format
		configMT types.MediaType
		layerMTs []types.MediaType
	}{
		{Artifact, ModuleConfigMediaType, []types.MediaType{ModuleLayerMediaType, ModuleConfigMediaType}},
		{WasmToOCI, WasmConfigMediaType, []types.MediaType{WasmLayerMediaType}},
	} {
		t.Run(string(tc.f), func(t *testing.T) {
			img, err := Build(wasm, tc.f, testMeta)
			if err != nil {
				t.Fatal(err)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != tc.configMT {
				t.Errorf("manifest %s, config %s: want %s, %s", m.MediaType, m.Config.MediaType, types.OCIManifestSchema1, tc.configMT)
			}
			if len(m.Layers) != len(tc.layerMTs) {
				t.Fatalf("%d layers, want %d", len(m.Layers), len(tc.layerMTs))
			}
			for i, l := range m.Layers {
				if l.MediaType != tc.layerMTs[i] {
					t.Errorf("layer %d: %s, want %s", i, l.MediaType, tc.layerMTs[i])
				}
			}
			// The first layer is the module itself, uncompressed: its
			// digest is the module's sha256.
			if got := m.Layers[0].Digest.String(); got != moduleDigest {
				t.Errorf("module layer digest %s, want %s", got, moduleDigest)
			}
			l, err := img.LayerByDigest(m.Layers[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readAll(t, l.Compressed), wasm) {
				t.Error("module layer differs from the module")
			}
			checkLabels(t, m.Annotations, wasm)
			// Every blob the manifest names can be served (a push needs
			// the config blob too).
			raw, err := img.RawConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if h, n, _ := v1.SHA256(bytes.NewReader(raw)); h != m.Config.Digest || n != m.Config.Size {
				t.Errorf("config blob %s (%d bytes), manifest says %s (%d)", h, n, m.Config.Digest, m.Config.Size)
			}
		})
	}
}

func TestBuild_reproducible(t *testing.T) {
	for _, f := range Formats {
		digest := func(wasm []byte, md Metadata) v1.Hash {
			img, err := Build(wasm, f, md)
			if err != nil {
				t.Fatal(err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		a, b := digest(fakeModule("x"), testMeta), digest(fakeModule("x"), testMeta)
		if a != b {
			t.Errorf("%s: two builds of the same module: %s and %s", f, a, b)
		}
		if c := digest(fakeModule("y"), testMeta); c == a {
			t.Errorf("%s: another module gave the same digest %s", f, c)
		}
		other := testMeta
		other.Revision = "fedcba9876543210fedcba9876543210fedcba98"
		if c := digest(fakeModule("x"), other); c == a {
			t.Errorf("%s: another revision gave the same digest %s", f, c)
		}
	}
}

func TestBuild_badInput(t *testing.T) {
	if _, err := Build([]byte("#!/bin/sh\necho not wasm\n"), Compat, testMeta); err == nil || !strings.Contains(err.Error(), "not a WebAssembly binary") {
		t.Errorf("a non-wasm file: got %v, want an error saying it is not a WebAssembly binary", err)
	}
	if _, err := Build(fakeModule("x"), "docker", testMeta); err == nil || !strings.Contains(err.Error(), "want one of compat, artifact or wasm-to-oci") {
		t.Errorf("an unknown format: got %v, want the list of formats", err)
	}
	if f, err := ParseFormat("artifact"); err != nil || f != Artifact {
		t.Errorf("ParseFormat(artifact) = %q, %v", f, err)
	}
}

func TestWrite_missingModule(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "build", "main.wasm")
	_, err := Write(filepath.Join(dir, "image"), missing, testMeta)
	if err == nil {
		t.Fatal("no error for a missing module")
	}
	for _, want := range []string{missing, "is missing", "run go run mage.go build first"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "image")); !os.IsNotExist(err) {
		t.Errorf("the output directory was created for a missing module (%v)", err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	wasmPath := filepath.Join(dir, "main.wasm")
	wasm := fakeModule(strings.Repeat("module bytes ", 1000))
	if err := os.WriteFile(wasmPath, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image")
	sum, err := Write(out, wasmPath, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ModuleSHA256 != ModuleSHA256(wasm) || sum.ModuleSize != int64(len(wasm)) || sum.Default != Compat {
		t.Errorf("summary %+v: want the module's sha256 and size, default compat", sum)
	}
	read, err := ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Images) != len(Formats) {
		t.Fatalf("image.json lists %d images, want %d", len(read.Images), len(Formats))
	}
	for _, f := range Formats {
		info, ok := read.Image(f)
		if !ok {
			t.Fatalf("image.json has no %s image", f)
		}
		img, err := LoadImage(out, f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d.String() != info.Digest {
			t.Errorf("%s: layout digest %s, image.json says %s", f, d, info.Digest)
		}
		if info.Size < int64(len(wasm))/10 {
			t.Errorf("%s: size %d for a %d-byte module", f, info.Size, len(wasm))
		}
	}
	// The tarball holds the default image: same config and layer.
	tb, err := tarball.ImageFromPath(filepath.Join(out, TarballFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := LoadImage(out, Default)
	tbCfg, _ := tb.ConfigName()
	defCfg, _ := def.ConfigName()
	tbLayers, _ := tb.Layers()
	defLayers, _ := def.Layers()
	if tbCfg != defCfg || len(tbLayers) != 1 || len(defLayers) != 1 {
		t.Fatalf("tarball config %s with %d layers, layout config %s with %d", tbCfg, len(tbLayers), defCfg, len(defLayers))
	}
	if a, b := digestOf(t, tbLayers[0]), digestOf(t, defLayers[0]); a != b {
		t.Errorf("tarball layer %s, layout layer %s", a, b)
	}
	// Writing again replaces the output with the same images.
	again, err := Write(out, wasmPath, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.Images {
		if again.Images[i] != sum.Images[i] {
			t.Errorf("second write: %+v, first: %+v", again.Images[i], sum.Images[i])
		}
	}
	if _, err := LoadImage(out, "nope"); err == nil || !strings.Contains(err.Error(), "has no nope image") {
		t.Errorf("LoadImage of an unknown format: %v", err)
	}
	if _, err := LoadImage(dir, Compat); err == nil || !strings.Contains(err.Error(), "run go run mage.go image first") {
		t.Errorf("LoadImage without a layout: %v", err)
	}
}

func digestOf(t *testing.T, l v1.Layer) v1.Hash {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTagFor(t *testing.T) {
	for in, want := range map[string]string{
		"v0.1.0": "wafguard:v0.1.0", "f540c6f-dirty": "wafguard:f540c6f-dirty",
		"": "wafguard:v", "v1+meta/x": "wafguard:v1_meta_x", "-x": "wafguard:v-x",
	} {
		if got := TagFor(Metadata{Version: in, CRS: "4.25.1", CRSDefault: true}); got != want {
			t.Errorf("TagFor(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := TagFor(Metadata{Version: "0.1.0", CRS: "4.28.0"}), "wafguard:0.1.0-crs4.28.0"; got != want {
		t.Errorf("TagFor of another CRS release = %q, want %q", got, want)
	}
}

func TestReadBuildInfo(t *testing.T) {
	text := "path\tgithub.com/wafguard/wafguard\nmod\tgithub.com/wafguard/wafguard\t(devel)\t\n" +
		"dep\t" + CorazaModule + "\tv3.8.1\th1:x=\n"
	wasm := append(fakeModule("code"), infoStart...)
	wasm = append(append(wasm, text...), infoEnd...)
	sig := "\nSecComponentSignature \"OWASP_CRS/4.25.1\"\n"
	var md Metadata
	if err := VersionsFromModule(&md, append(wasm, sig+"data"+sig...)); err != nil {
		t.Fatal(err)
	}
	if md.Coraza != "v3.8.1" || md.CRS != "4.25.1" {
		t.Errorf("versions %q, %q: want v3.8.1 and 4.25.1", md.Coraza, md.CRS)
	}
	if err := VersionsFromModule(&md, wasm); err == nil || !strings.Contains(err.Error(), "no CRS release in the module") {
		t.Errorf("a module without CRS: %v", err)
	}
	two := append(wasm, sig+strings.ReplaceAll(sig, "4.25.1", "4.28.0")...)
	if err := VersionsFromModule(&md, two); err == nil || !strings.Contains(err.Error(), "two CRS releases, 4.25.1 and 4.28.0") {
		t.Errorf("a module with two CRS releases: %v", err)
	}
	if _, err := ReadBuildInfo(fakeModule("no info")); err == nil || !strings.Contains(err.Error(), "no Go build information") {
		t.Errorf("a module without build information: %v", err)
	}
	if _, err := ReadBuildInfo(append(fakeModule("x"), infoStart...)); err == nil || !strings.Contains(err.Error(), "no end marker") {
		t.Errorf("a truncated build information: %v", err)
	}
	noDeps := append(append(append(fakeModule("x"), infoStart...), "path\tx\n"...), infoEnd...)
	if err := VersionsFromModule(&md, noDeps); err == nil || !strings.Contains(err.Error(), "is it the plugin?") {
		t.Errorf("a module without Coraza: %v", err)
	}
}

// TestReadBuildInfo_plugin reads the versions from build/main.wasm and
// compares them with go.mod's Coraza and the CRS release this build of
// the tests embeds (filter/rules).
func TestReadBuildInfo_plugin(t *testing.T) {
	wasm := plugintest.Read(t)
	var md Metadata
	if err := VersionsFromModule(&md, wasm); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(CorazaModule) + ` (\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("go.mod does not require %s", CorazaModule)
	}
	if md.Coraza != string(m[1]) {
		t.Errorf("%s: the module has %s, go.mod requires %s (rebuild with go run mage.go build)", CorazaModule, md.Coraza, m[1])
	}
	if md.CRS != rules.CRSVersion {
		t.Errorf("the module embeds CRS %s, the tests CRS %s (build and test with the same CRS=)", md.CRS, rules.CRSVersion)
	}
}
