package ociimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// What Write puts in its directory.
const (
	LayoutDir   = "layout"       // OCI image layout holding every format
	TarballFile = "wafguard.tar" // the default image, for docker load or crane push
	SummaryFile = "image.json"   // digests and the module's sha256 (Summary)
)

// refName is the OCI layout annotation that names an image in index.json.
const refName = "org.opencontainers.image.ref.name"

// Summary is what Write writes to image.json.
type Summary struct {
	Module       string            `json:"module"`        // the module's path, as given
	ModuleSHA256 string            `json:"module_sha256"` // hex sha256 of the module
	ModuleSize   int64             `json:"module_size"`
	Default      Format            `json:"default"`
	Tag          string            `json:"tag"` // the tarball's repository:tag
	Labels       map[string]string `json:"labels"`
	Images       []ImageInfo       `json:"images"`
}

// ImageInfo describes one written image.
type ImageInfo struct {
	Format    Format `json:"format"`
	Digest    string `json:"digest"` // the manifest's digest, sha256:<hex>
	MediaType string `json:"media_type"`
	// Size is what a pull transfers: manifest, config and layers.
	Size int64 `json:"size"`
}

// Image returns the entry of format f.
func (s *Summary) Image(f Format) (ImageInfo, bool) {
	for _, i := range s.Images {
		if i.Format == f {
			return i, true
		}
	}
	return ImageInfo{}, false
}

// ReadModule reads the plugin module, saying how to build it when it is
// missing.
func ReadModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image: %s is missing: run go run mage.go build first", path)
	}
	if err != nil {
		return nil, fmt.Errorf("image: reading the module: %w", err)
	}
	return b, nil
}

var notTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// TagFor is the tag of the tarball's image of md: its version, followed
// by -crs and the CRS release when the module embeds another release than
// the default (wafguard:0.1.0, wafguard:0.1.0-crs4.28.0).
func TagFor(md Metadata) string {
	v := md.Version
	if !md.CRSDefault && md.CRS != "" {
		v += "-crs" + md.CRS
	}
	t := notTagChars.ReplaceAllString(v, "_")
	if t == "" || t[0] == '.' || t[0] == '-' {
		t = "v" + t
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return "wafguard:" + t
}

// Write builds the images of the module at wasmPath in every format and
// writes, under dir (replacing what a previous Write left there): the OCI
// image layout LayoutDir with all of them, each named by its format in
// index.json; the tarball TarballFile of the default image; and the
// Summary, SummaryFile.
func Write(dir, wasmPath string, md Metadata) (*Summary, error) {
	wasm, err := ReadModule(wasmPath)
	if err != nil {
		return nil, err
	}
	tag := TagFor(md)
	sum := &Summary{
		Module: wasmPath, ModuleSHA256: ModuleSHA256(wasm), ModuleSize: int64(len(wasm)),
		Default: Default, Tag: tag, Labels: md.Labels(ModuleSHA256(wasm)),
	}
	imgs := map[Format]v1.Image{}
	for _, f := range Formats {
		img, err := Build(wasm, f, md)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", f, err)
		}
		info, err := describe(f, img)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", f, err)
		}
		imgs[f] = img
		sum.Images = append(sum.Images, info)
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lp := filepath.Join(dir, LayoutDir)
	if err := os.RemoveAll(lp); err != nil {
		return nil, err
	}
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("image: writing the layout: %w", err)
	}
	for _, f := range Formats {
		if err := p.AppendImage(imgs[f], layout.WithAnnotations(map[string]string{refName: string(f)})); err != nil {
			return nil, fmt.Errorf("image: writing %s to the layout: %w", f, err)
		}
	}
	t, err := name.NewTag(tag, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("image: tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(filepath.Join(dir, TarballFile), t, imgs[Default]); err != nil {
		return nil, fmt.Errorf("image: writing the tarball: %w", err)
	}
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	return sum, nil
}

func describe(f Format, img v1.Image) (ImageInfo, error) {
	d, err := img.Digest()
	if err != nil {
		return ImageInfo{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return ImageInfo{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return ImageInfo{}, err
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return ImageInfo{Format: f, Digest: d.String(), MediaType: string(m.MediaType), Size: size}, nil
}

// ReadSummary reads the Summary that Write left in dir.
func ReadSummary(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image: %s is missing: run go run mage.go image first", filepath.Join(dir, SummaryFile))
	}
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("image: %s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return &s, nil
}

// LoadImage returns the image of format f from the layout Write left in
// dir.
func LoadImage(dir string, f Format) (v1.Image, error) {
	lp := filepath.Join(dir, LayoutDir)
	idx, err := layout.ImageIndexFromPath(lp)
	if err != nil {
		return nil, fmt.Errorf("image: no image layout in %s (run go run mage.go image first): %w", lp, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", lp, err)
	}
	var names []string
	for _, d := range im.Manifests {
		if d.Annotations[refName] == string(f) {
			return idx.Image(d.Digest)
		}
		names = append(names, d.Annotations[refName])
	}
	slices.Sort(names)
	return nil, fmt.Errorf("image: the layout in %s has no %s image (it has %v): run go run mage.go image again", lp, f, names)
}
