// Package istiopull pulls the plugin's images the way Istio does: the
// images that go run mage.go image wrote to build/image are pushed to an
// in-process registry on 127.0.0.1 and fetched with istio.io/istio/pkg/wasm,
// the module cache the Istio agent (pilot-agent) runs for every
// WasmPlugin with an oci:// url (pkg/istio-agent/xds_proxy.go creates it,
// pkg/wasm/convert.go calls its Get with the WasmPlugin's url and sha256).
//
// It is a module of its own so that Istio's dependencies (Kubernetes'
// client libraries among them) stay out of the plugin's go.mod.
package istiopull

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"

	"github.com/wafguard/wafguard/internal/ociimage"
	"github.com/wafguard/wafguard/internal/plugintest"
)

// imageDir is where go run mage.go image writes (the repository's
// build/image).
var imageDir = filepath.Join("..", "..", "..", "build", "image")

// setup reads build/main.wasm and what mage image wrote, and starts an
// in-process registry with the images pushed, each under the tag of its
// format. It ends the test through missing when they are missing or
// older than the module.
func setup(t *testing.T) (module []byte, sum *ociimage.Summary, host string) {
	t.Helper()
	module = plugintest.Read(t)
	sum, err := ociimage.ReadSummary(imageDir)
	if err != nil {
		missing(t, "%v", err)
	}
	if got := ociimage.ModuleSHA256(module); got != sum.ModuleSHA256 {
		missing(t, "build/main.wasm has sha256 %s, %s/%s says %s: the images are older than the module, run go run mage.go image",
			got, imageDir, ociimage.SummaryFile, sum.ModuleSHA256)
	}
	// No user's Docker credentials: the registry is open.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("REGISTRY_AUTH_FILE", "")

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	for _, f := range ociimage.Formats {
		img, err := ociimage.LoadImage(imageDir, f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ociimage.Push(context.Background(), host+"/wafguard:"+string(f), img, authn.DefaultKeychain)
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := sum.Image(f); d.DigestStr() != info.Digest {
			t.Fatalf("%s: pushed %s, image.json says %s", f, d.DigestStr(), info.Digest)
		}
	}
	return module, sum, host
}

// missing ends the test for want of up-to-date images: a failure under
// WASM_REQUIRED (go run mage.go test writes them first), else a skip.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if plugintest.Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// agentCache is the agent's module cache, told (as pilot-agent is by
// WASM_INSECURE_REGISTRIES) that the local registry speaks plain HTTP.
func agentCache(t *testing.T, host string) *wasm.LocalFileCache {
	c := wasm.NewLocalFileCache(t.TempDir(), wasm.Options{InsecureRegistries: sets.New(host)})
	t.Cleanup(c.Cleanup)
	return c
}

// get is what the agent does for a WasmPlugin with this url and sha256:
// the path of the module file it hands to Envoy.
func get(c *wasm.LocalFileCache, url, checksum string) (string, error) {
	return c.Get(url, wasm.GetOptions{
		Checksum:        checksum,
		ResourceName:    "istio-ingress.wafguard",
		ResourceVersion: "1",
		RequestTimeout:  time.Minute,
		PullPolicy:      wasm.IfNotPresent,
	})
}

func digestHex(t *testing.T, sum *ociimage.Summary, f ociimage.Format) string {
	t.Helper()
	info, ok := sum.Image(f)
	if !ok {
		t.Fatalf("%s has no %s image", ociimage.SummaryFile, f)
	}
	return strings.TrimPrefix(info.Digest, "sha256:")
}

func checkModule(t *testing.T, path string, module []byte, sum *ociimage.Summary) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, module) {
		t.Fatalf("the module Istio extracted (%d bytes) is not build/main.wasm (%d bytes)", len(got), len(module))
	}
	s := sha256.Sum256(got)
	if h := hex.EncodeToString(s[:]); h != sum.ModuleSHA256 {
		t.Errorf("extracted module sha256 %s, image.json says %s", h, sum.ModuleSHA256)
	}
}

// TestIstioPull pulls each format Istio reads by tag, with the WasmPlugin
// sha256 that image.json gives, and by digest.
func TestIstioPull(t *testing.T) {
	module, sum, host := setup(t)
	for _, f := range []ociimage.Format{ociimage.Compat, ociimage.Artifact} {
		t.Run(string(f), func(t *testing.T) {
			c := agentCache(t, host)
			path, err := get(c, "oci://"+host+"/wafguard:"+string(f), digestHex(t, sum, f))
			if err != nil {
				t.Fatal(err)
			}
			checkModule(t, path, module, sum)

			byDigest, err := get(agentCache(t, host), "oci://"+host+"/wafguard@sha256:"+digestHex(t, sum, f), "")
			if err != nil {
				t.Fatal(err)
			}
			checkModule(t, byDigest, module, sum)
		})
	}
}

// TestIstioPull_sha256IsTheImageDigest: for an oci:// url Istio compares
// the WasmPlugin's sha256 with the image's manifest digest, so the
// module's own sha256 there is refused. (It is the value for an
// http(s):// url of the module.)
func TestIstioPull_sha256IsTheImageDigest(t *testing.T) {
	_, sum, host := setup(t)
	_, err := get(agentCache(t, host), "oci://"+host+"/wafguard:"+string(ociimage.Compat), sum.ModuleSHA256)
	if err == nil || !strings.Contains(err.Error(), "which does not match: "+sum.ModuleSHA256) {
		t.Fatalf("the module's sha256 as the WasmPlugin sha256 of an oci:// url: got %v, want Istio's checksum mismatch", err)
	}
}

// TestIstioPull_wasmToOCI: Istio's fetcher does not read the wasm-to-oci
// artifact (one application/vnd.wasm.content.layer.v1+wasm layer); if a
// later Istio does, this fails, and the package's documentation should
// say so.
func TestIstioPull_wasmToOCI(t *testing.T) {
	_, sum, host := setup(t)
	_, err := get(agentCache(t, host), "oci://"+host+"/wafguard:"+string(ociimage.WasmToOCI), digestHex(t, sum, ociimage.WasmToOCI))
	if err == nil || !strings.Contains(err.Error(), "number of layers must be 2 but got 1") {
		t.Fatalf("wasm-to-oci: got %v, want Istio's refusal of a one-layer artifact", err)
	}
}
