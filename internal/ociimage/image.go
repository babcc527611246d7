// Package ociimage builds the plugin's OCI images from build/main.wasm
// without a container daemon, writes them as an OCI image layout and a
// tarball, and pushes them to a registry.
//
// Istio's agent (istio.io/istio/pkg/wasm, the code behind a WasmPlugin's
// oci:// url) reads three shapes of image; this package writes them all,
// from the same module bytes:
//
//   - Compat (the default): a Docker image manifest with one gzip tar
//     layer holding plugin.wasm, the image the repository's Dockerfile
//     builds (FROM scratch, COPY build/main.wasm /plugin.wasm). Istio
//     extracts plugin.wasm from the last layer.
//   - Artifact: the OCI artifact Istio reads, an OCI manifest with two
//     layers, the raw module (application/vnd.module.wasm.content.layer.v1+wasm)
//     and a small JSON (application/vnd.module.wasm.config.v1+json).
//   - WasmToOCI: the wasm-to-oci artifact, config
//     application/vnd.wasm.config.v1+json and one layer
//     application/vnd.wasm.content.layer.v1+wasm holding the raw module.
//     Istio's fetcher refuses it (it wants two layers and the
//     vnd.module.wasm media type); it is written for other tools.
//
// Compat is the default: it is what docker build makes of the Dockerfile,
// so both ways of building give the same kind of image; every Istio with
// WasmPlugin and every registry and tool (docker load, crane, skopeo)
// handles it as an ordinary image; and its layer is gzip-compressed (the
// artifacts carry the module uncompressed, about three times larger).
package ociimage

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
	"maps"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Format is one shape of the image.
type Format string

const (
	Compat    Format = "compat"
	Artifact  Format = "artifact"
	WasmToOCI Format = "wasm-to-oci"
)

// Default is the format that Push sends unless told otherwise.
const Default = Compat

// Formats lists every format, the default first.
var Formats = []Format{Compat, Artifact, WasmToOCI}

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("image format %q: want one of %s, %s or %s", s, Compat, Artifact, WasmToOCI)
}

// Media types of the artifacts.
const (
	// Istio's OCI artifact (the solo-io "oci" variant of the Wasm image
	// specification), as read by istio.io/istio/pkg/wasm.
	ModuleLayerMediaType  types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
	ModuleConfigMediaType types.MediaType = "application/vnd.module.wasm.config.v1+json"
	// wasm-to-oci.
	WasmConfigMediaType types.MediaType = "application/vnd.wasm.config.v1+json"
	WasmLayerMediaType  types.MediaType = "application/vnd.wasm.content.layer.v1+wasm"
)

// ModuleFile is the module's name in the compat layer (Istio looks for
// it by this name; the Dockerfile copies the module there).
const ModuleFile = "plugin.wasm"

// Label keys written on every image (config labels of the compat image,
// manifest annotations of the artifacts).
const (
	LabelTitle     = "org.opencontainers.image.title"
	LabelSource    = "org.opencontainers.image.source"
	LabelRevision  = "org.opencontainers.image.revision"
	LabelVersion   = "org.opencontainers.image.version"
	LabelCreated   = "org.opencontainers.image.created"
	LabelCoraza    = "io.wafguard.coraza.version"
	LabelCRS       = "io.wafguard.crs.version"
	LabelCRSCommit = "io.wafguard.crs.commit"
	LabelModule    = "io.wafguard.module.sha256"
)

// Metadata describes the build the images are made from.
type Metadata struct {
	Revision string    // git commit of the sources
	Version  string    // release version (the VERSION file)
	Created  time.Time // commit time; zero leaves the image undated
	Source   string    // repository URL
	Coraza   string    // github.com/corazawaf/coraza/v3 version in the module
	CRS      string    // the CRS release the module embeds (CRSFromModule)
	// CRSCommit is the upstream commit of that release (its manifest in
	// filter/rules/crs).
	CRSCommit string
	// CRSDefault is true when CRS is the release the plugin embeds by
	// default; the tag of an image of another release says which
	// (TagFor).
	CRSDefault bool
}

// Labels returns the labels of an image of the module whose sha256 is
// moduleSHA; empty values are left out.
func (m Metadata) Labels(moduleSHA string) map[string]string {
	l := map[string]string{LabelTitle: "wafguard", LabelModule: moduleSHA}
	set := func(k, v string) {
		if v != "" {
			l[k] = v
		}
	}
	set(LabelSource, m.Source)
	set(LabelRevision, m.Revision)
	set(LabelVersion, m.Version)
	set(LabelCoraza, m.Coraza)
	set(LabelCRS, m.CRS)
	set(LabelCRSCommit, m.CRSCommit)
	if !m.Created.IsZero() {
		l[LabelCreated] = m.Created.UTC().Format(time.RFC3339)
	}
	return l
}

// ModuleSHA256 is the hex sha256 of the module: what Envoy's remote
// data source and a WasmPlugin with an http(s):// url check. (For an
// oci:// url, Istio checks the image's manifest digest instead.)
func ModuleSHA256(wasm []byte) string {
	s := sha256.Sum256(wasm)
	return hex.EncodeToString(s[:])
}

var wasmMagic = []byte{0x00, 'a', 's', 'm'}

// Build returns the image of the module in format f.
func Build(wasm []byte, f Format, md Metadata) (v1.Image, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], wasmMagic) {
		return nil, errors.New("the module is not a WebAssembly binary (no \\0asm header): rebuild it with go run mage.go build")
	}
	labels := md.Labels(ModuleSHA256(wasm))
	switch f {
	case Compat:
		return buildCompat(wasm, md, labels)
	case Artifact:
		cfg, err := json.Marshal(map[string]string{"type": "envoy_proxy"})
		if err != nil {
			return nil, err
		}
		return newArtifact(ModuleConfigMediaType, cfg, labels, []blob{
			{ModuleLayerMediaType, wasm},
			{ModuleConfigMediaType, cfg},
		})
	case WasmToOCI:
		cfg, err := json.Marshal(struct {
			Architecture string `json:"architecture"`
			OS           string `json:"os"`
		}{"wasm", "wasip1"})
		if err != nil {
			return nil, err
		}
		return newArtifact(WasmConfigMediaType, cfg, labels, []blob{{WasmLayerMediaType, wasm}})
	default:
		_, err := ParseFormat(string(f))
		return nil, err
	}
}

// buildCompat is the Dockerfile's image: FROM scratch, the module as
// /plugin.wasm, in one gzip layer of a Docker manifest.
func buildCompat(wasm []byte, md Metadata, labels map[string]string) (v1.Image, error) {
	mtime := md.Created
	if mtime.IsZero() {
		mtime = time.Unix(0, 0)
	}
	var tgz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&tgz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: ModuleFile, Size: int64(len(wasm)), Mode: 0o644,
		ModTime: mtime.UTC(), Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(wasm); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	gz := tgz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: "wasm",
		OS:           "wasip1",
		Created:      v1.Time{Time: md.Created.UTC()},
		Config:       v1.Config{Labels: labels},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.DockerLayer,
		History:   v1.History{Created: cfg.Created, CreatedBy: "COPY build/main.wasm /plugin.wasm"},
	})
}

// blob is one layer of an artifact: stored as is, uncompressed.
type blob struct {
	mt   types.MediaType
	data []byte
}

// artifact is an OCI artifact manifest whose config and layers are given
// bytes.
type artifact struct {
	manifest []byte
	config   []byte
	layers   map[v1.Hash]blob
}

func newArtifact(configMT types.MediaType, config []byte, annotations map[string]string, layers []blob) (v1.Image, error) {
	a := &artifact{config: config, layers: map[v1.Hash]blob{}}
	cd, err := descriptor(configMT, config)
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        cd,
		Annotations:   maps.Clone(annotations),
	}
	for _, l := range layers {
		d, err := descriptor(l.mt, l.data)
		if err != nil {
			return nil, err
		}
		if l.mt == ModuleLayerMediaType || l.mt == WasmLayerMediaType {
			d.Annotations = map[string]string{"org.opencontainers.image.title": ModuleFile}
		}
		m.Layers = append(m.Layers, d)
		a.layers[d.Digest] = l
	}
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(a)
}

func descriptor(mt types.MediaType, b []byte) (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: n, Digest: h}, nil
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.layers[h]; ok {
		return &artifactLayer{blob: l, digest: h}, nil
	}
	// The config blob, which partial asks for by digest when it is pushed.
	var m v1.Manifest
	if err := json.Unmarshal(a.manifest, &m); err != nil {
		return nil, err
	}
	if h == m.Config.Digest {
		return &artifactLayer{blob: blob{m.Config.MediaType, a.config}, digest: h}, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}

type artifactLayer struct {
	blob
	digest v1.Hash
}

func (l *artifactLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *artifactLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}
func (l *artifactLayer) Size() (int64, error)                { return int64(len(l.data)), nil }
func (l *artifactLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
