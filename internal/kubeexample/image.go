package kubeexample

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/ociimage"
)

// ImageDirEnv names the output directory of `go run mage.go image`
// (build/image; relative paths are taken from the repository root). When
// it is set, every image digest an example pins must be the digest of an
// image written there.
const ImageDirEnv = "WAFGUARD_IMAGE_DIR"

// pinnedDigest matches the end of an image reference pinned by digest.
var pinnedDigest = regexp.MustCompile(`@sha256:([a-f0-9]{64})$`)

// sha256Hex is the form of a sha256 field: the digest's hex, without
// "sha256:".
var sha256Hex = regexp.MustCompile(`^[a-f0-9]{64}$`)

// PinnedDigest returns the hex digest an image reference pins (the part
// after "@sha256:"), or "" when it pins none.
func PinnedDigest(ref string) string {
	if m := pinnedDigest.FindStringSubmatch(ref); m != nil {
		return m[1]
	}
	return ""
}

// Pin is an image reference by digest in an example: the reference (url)
// and the separate sha256 field that both Istio and Envoy Gateway compare
// with the pulled image's manifest digest.
type Pin struct {
	Doc                 *envoy.Doc
	URLPath, SHA256Path string // field paths in Doc
	URL, SHA256         string
}

// Check checks the pin and returns its digest ("" when it names none):
// when the url pins a digest and sha256 is set, they must be the same;
// sha256 must be 64 hex digits; and with images (ImagesFromEnv), the
// digest must be that of one of them.
func (p Pin) Check(images *Images) (string, error) {
	d := PinnedDigest(p.URL)
	if p.SHA256 != "" {
		if !sha256Hex.MatchString(p.SHA256) {
			return "", fmt.Errorf("%s: got %q, want 64 lowercase hex digits without \"sha256:\"", p.Doc.At(p.SHA256Path), p.SHA256)
		}
		if d != "" && p.SHA256 != d {
			return "", fmt.Errorf("%s: got %s, but url pins the image digest %s: they must be the same (the image's manifest digest that go run mage.go push prints)", p.Doc.At(p.SHA256Path), p.SHA256, d)
		}
		d = p.SHA256
	}
	if d != "" && images != nil {
		if err := images.Check(d); err != nil {
			return "", fmt.Errorf("%s: %w", p.Doc.At(p.SHA256Path), err)
		}
	}
	return d, nil
}

// Required is Check for an example that pins its image by digest: the url
// must pin one and sha256 must repeat it.
func (p Pin) Required(images *Images) (string, error) {
	d := PinnedDigest(p.URL)
	if d == "" {
		return "", fmt.Errorf("%s: got %q, want the image pinned by digest, <registry>/<repository>@sha256:<64 hex digits> (the digest go run mage.go push prints)", p.Doc.At(p.URLPath), p.URL)
	}
	if p.SHA256 == "" {
		return "", fmt.Errorf("%s: missing, want %s, the digest the url pins", p.Doc.At(p.SHA256Path), d)
	}
	return p.Check(images)
}

// Images are the digests of the images `go run mage.go image` wrote.
type Images struct {
	// Summary is the directory's image.json.
	Summary string
	// Default is the digest (hex) of the image push sends by default.
	Default string
	formats map[string]ociimage.Format // digest hex -> format
}

// ImagesFromEnv reads the images of the directory ImageDirEnv names; nil
// when it is not set.
func ImagesFromEnv() (*Images, error) {
	dir := os.Getenv(ImageDirEnv)
	if dir == "" {
		return nil, nil
	}
	if !filepath.IsAbs(dir) {
		root, err := moduleRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, dir)
	}
	return ReadImages(dir)
}

// ReadImages reads image.json of dir, an output directory of `go run
// mage.go image`.
func ReadImages(dir string) (*Images, error) {
	sum, err := ociimage.ReadSummary(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ImageDirEnv, err)
	}
	im := &Images{Summary: filepath.Join(dir, ociimage.SummaryFile), formats: map[string]ociimage.Format{}}
	for _, info := range sum.Images {
		// Istio's fetcher, and Envoy Gateway's, which is derived from
		// it, read the compat image and the artifact, not wasm-to-oci.
		if info.Format == ociimage.WasmToOCI {
			continue
		}
		hex := strings.TrimPrefix(info.Digest, "sha256:")
		im.formats[hex] = info.Format
		if info.Format == sum.Default {
			im.Default = hex
		}
	}
	if im.Default == "" {
		return nil, fmt.Errorf("%s: no %s image", im.Summary, sum.Default)
	}
	return im, nil
}

// Check returns an error when digest is not one of the images.
func (im *Images) Check(digest string) error {
	if _, ok := im.formats[digest]; ok {
		return nil
	}
	return fmt.Errorf("got %s, but %s has the image %s (%s, the one go run mage.go push sends): put that digest in the url and sha256, or build and push the image this digest names", digest, im.Summary, im.Default, ociimage.Default)
}

// moduleRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
