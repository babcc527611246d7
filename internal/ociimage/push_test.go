package ociimage

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// newRegistry serves an in-memory registry on 127.0.0.1 (plain HTTP, as
// go-containerregistry uses for loopback addresses) and returns its host:port.
// With a user, requests without that user and password get 401.
func newRegistry(t *testing.T, user, password string) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if user != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test registry"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// dockerConfig points authn.DefaultKeychain at a fresh Docker config
// holding the given credentials for host (none when user is empty).
func dockerConfig(t *testing.T, host, user, password string) {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, ".docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"auths":{}}`
	if user != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		cfg = fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("REGISTRY_AUTH_FILE", "")
}

func TestPush(t *testing.T) {
	host := newRegistry(t, "", "")
	dockerConfig(t, host, "", "")
	wasm := fakeModule("pushed")
	for _, f := range Formats {
		img, err := Build(wasm, f, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		ref := host + "/wafguard:" + string(f)
		got, err := Push(context.Background(), ref, img, authn.DefaultKeychain)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want, _ := img.Digest()
		if got.DigestStr() != want.String() || got.Context().Name() != host+"/wafguard" {
			t.Errorf("%s: Push returned %s, want %s/wafguard@%s", f, got, host, want)
		}
		// The registry serves it back under the tag, with the same digest.
		pulled, err := remote.Image(mustRef(t, ref))
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := pulled.Digest(); d != want {
			t.Errorf("%s: the tag resolves to %s, pushed %s", f, d, want)
		}
	}
}

func TestPush_badReference(t *testing.T) {
	img, err := Build(fakeModule("x"), Compat, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{
		"wafguard",                        // no registry, no tag: would go to Docker Hub
		"127.0.0.1:5000/wafguard",         // no tag
		"127.0.0.1:5000/WafGuard:v1",      // upper case repository
		"127.0.0.1:5000/wafguard:bad tag", // space in the tag
		"oci://127.0.0.1:5000/wafguard:v1",
		"",
	} {
		_, err := Push(context.Background(), ref, img, authn.DefaultKeychain)
		if err == nil {
			t.Errorf("%q: pushed", ref)
			continue
		}
		for _, want := range []string{fmt.Sprintf("%q is not a full image reference", ref), "want REGISTRY/REPOSITORY:TAG"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q does not say %q", ref, err, want)
			}
		}
	}
}

func TestPush_credentials(t *testing.T) {
	host := newRegistry(t, "ci", "s3cret")
	img, err := Build(fakeModule("private"), Compat, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/team/wafguard:v1"
	for _, tc := range []struct{ name, user, password string }{
		{"no credentials", "", ""},
		{"wrong password", "ci", "wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dockerConfig(t, host, tc.user, tc.password)
			_, err := Push(context.Background(), ref, img, authn.DefaultKeychain)
			if err == nil {
				t.Fatal("the registry accepted the push")
			}
			for _, want := range []string{host + " refused the credentials (401 Unauthorized)", "docker login " + host} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "s3cret") || (tc.password != "" && strings.Contains(err.Error(), tc.password)) {
				t.Errorf("error %q shows a password", err)
			}
		})
	}
	t.Run("right password", func(t *testing.T) {
		dockerConfig(t, host, "ci", "s3cret")
		if _, err := Push(context.Background(), ref, img, authn.DefaultKeychain); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPush_unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close() // nothing listens there now
	dockerConfig(t, host, "", "")
	img, err := Build(fakeModule("x"), Compat, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Push(context.Background(), host+"/wafguard:v1", img, authn.DefaultKeychain)
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+host+" (http://"+host+")") {
		t.Errorf("push to a closed port: %v", err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
