package kubeexample

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/internal/ociimage"
)

// TestImageDigest tests a directory's examples against the image.json of
// images written here as go run mage.go image writes them
// (ociimage.Write), of a stand-in module. check runs the directory's
// checks on its examples with the placeholder digest they ship with
// replaced by digest, against images. As shipped they must fail, naming
// the image's digest; with the default image's digest, or the artifact's,
// they must pass; with that of wasm-to-oci, which neither Istio's fetcher
// nor Envoy Gateway's reads, they must fail.
func TestImageDigest(t *testing.T, placeholder string, check func(digest string, images *Images) error) {
	t.Helper()
	dir := t.TempDir()
	module := filepath.Join(dir, "module.wasm")
	// The wasm magic and version: a module with no sections.
	if err := os.WriteFile(module, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image")
	sum, err := ociimage.Write(out, module, ociimage.Metadata{Version: "0.0.0-test"})
	if err != nil {
		t.Fatal(err)
	}
	images, err := ReadImages(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "got " + placeholder + ", but " + images.Summary + " has the image " + images.Default + " (compat, the one go run mage.go push sends)"
	if err := check(placeholder, images); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the placeholder digest: got error %v, want one with %q", err, want)
	}
	for _, info := range sum.Images {
		d := strings.TrimPrefix(info.Digest, "sha256:")
		err := check(d, images)
		if info.Format == ociimage.WasmToOCI {
			if err == nil || !strings.Contains(err.Error(), "got "+d+", but ") {
				t.Errorf("the digest of the %s image: got error %v, want one naming it", info.Format, err)
			}
		} else if err != nil {
			t.Errorf("the digest of the %s image: %v", info.Format, err)
		}
	}
}

// BrokenCopy is a broken copy of an example file and the error its checks
// must give.
type BrokenCopy struct {
	Name     string
	File     string
	Old, New string // Old, which must occur once in File, is replaced by New
	// Want is the expected error; %d is replaced by the line of LineOf,
	// or of Old when LineOf is empty, plus LineAdd.
	Want    string
	LineOf  string
	LineAdd int
}

// TestBrokenCopies runs check on each broken copy, as a subtest, and
// asserts the exact error: the file, line and field of the break.
func TestBrokenCopies(t *testing.T, cases []BrokenCopy, check func(file string, data []byte) error) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			orig, err := os.ReadFile(c.File)
			if err != nil {
				t.Fatal(err)
			}
			s := string(orig)
			if n := strings.Count(s, c.Old); n != 1 {
				t.Fatalf("%q occurs %d times in %s, want exactly 1", c.Old, n, c.File)
			}
			lineOf := c.Old
			if c.LineOf != "" {
				lineOf = c.LineOf
			}
			line := strings.Count(s[:strings.Index(s, lineOf)], "\n") + 1 + c.LineAdd
			err = check(c.File, []byte(strings.Replace(s, c.Old, c.New, 1)))
			want := c.Want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, line)
			}
			if err == nil || err.Error() != want {
				t.Fatalf("got error\n\t%v\nwant\n\t%s", err, want)
			}
		})
	}
}
