package envoy

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalize: the shipped bootstrap with its addresses and module
// moved: those change, the rest (the plugin configuration, the failure
// policy) does not, and the result still passes the schema checks.
func TestLocalize(t *testing.T) {
	for _, file := range []string{"envoy.yaml", "../e2e/envoy.yaml"} {
		b, _, err := LoadBootstrap(file)
		if err != nil {
			t.Fatal(err)
		}
		before, err := JSON(b)
		if err != nil {
			t.Fatal(err)
		}
		// protojson's spacing varies from build to build: compared with
		// runs of spaces made one.
		norm := func(b []byte) string { return strings.Join(strings.Fields(string(b)), " ") }
		l := Local{Listen: "127.0.0.1:18080", Admin: "127.0.0.1:18082", Upstream: "127.0.0.1:18000", Module: "/tmp/x/main.wasm"}
		if err := Localize(b, l); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		js, err := JSON(b)
		if err != nil {
			t.Fatal(err)
		}
		out := norm(js)
		for _, want := range []string{`"portValue": 18080`, `"portValue": 18082`, `"portValue": 18000`, `"filename": "/tmp/x/main.wasm"`, `"failurePolicy": "FAIL_RELOAD"`, `owasp_crs`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: localized bootstrap lacks %s", file, want)
			}
		}
		for _, gone := range []string{`/etc/envoy/main.wasm`, `"portValue": 8080`, `"portValue": 8082`} {
			if !strings.Contains(norm(before), gone) {
				t.Errorf("%s: the shipped file has no %s: the test's premise changed", file, gone)
			}
			if strings.Contains(out, gone) {
				t.Errorf("%s: localized bootstrap still has %s", file, gone)
			}
		}
		// The result is a bootstrap Envoy accepts, by the same checks.
		path := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(path, js, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadBootstrap(path); err != nil {
			t.Fatalf("%s localized: %v", file, err)
		}
	}
}

// TestLocalize_missing: a bootstrap without the part to change is an
// error that names it, not a file run with the shipped value.
func TestLocalize_missing(t *testing.T) {
	b, _, err := LoadBootstrap("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Localize(b, Local{Upstream: "127.0.0.1:1", UpstreamCluster: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("no such cluster: got %v", err)
	}
	if err := Localize(b, Local{Listen: "127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("listen without a port: got %v", err)
	}
	if err := Localize(b, Local{Admin: "127.0.0.1:99999"}); err == nil || !strings.Contains(err.Error(), "99999") {
		t.Errorf("admin port out of range: got %v", err)
	}
	b.StaticResources.Listeners = nil
	if err := Localize(b, Local{Module: "/x.wasm"}); err == nil || !strings.Contains(err.Error(), "no wasm HTTP filter") {
		t.Errorf("no listener: got %v", err)
	}
}

// TestCheckBinary: the release is read from --version; one older than
// 1.39 is refused with the floor and the reason; an unreadable answer is
// an error.
func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, out string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		out, want, err string
	}{
		{"envoy  version: 9e5580933739775e8bce696a57a2e1bc99368f23/1.40.0/Clean/RELEASE/BoringSSL", "1.40.0", ""},
		{"envoy  version: 0123abcd/1.39.2/Clean/RELEASE/BoringSSL", "1.39.2", ""},
		{"envoy  version: 0123abcd/1.41.0-dev/Modified/DEBUG/BoringSSL", "1.41.0", ""},
		{"envoy  version: 0123abcd/1.38.4/Clean/RELEASE/BoringSSL", "1.38.4", "needs 1.39.0 or newer"},
		{"not envoy", "", "no release number"},
	} {
		v, err := CheckBinary(fake("envoy", c.out))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: error %v, want %q", c.out, err, c.err)
		}
		if c.want != "" && v.String() != c.want {
			t.Errorf("%q: version %s, want %s", c.out, v, c.want)
		}
	}
	if _, err := CheckBinary(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing binary: no error")
	}
}

// TestEditPlugins: a plugin configuration and flag set on every wasm
// filter of the shipped bootstrap reach the packed filter (read back from
// the JSON Envoy gets); a configuration that is not a JSON object is
// refused, naming why, and leaves the filter as it was.
func TestEditPlugins(t *testing.T) {
	b, _, err := LoadBootstrap("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const cfg = `{"directives_map":{"x":["SecRuleEngine On"]},"default_directives":"x"}`
	n, err := EditPlugins(b, func(pc *wasmv3.PluginConfig) error {
		pc.AllowOnHeadersStopIteration = wrapperspb.Bool(false)
		return SetConfiguration(pc, cfg)
	})
	if err != nil || n != 1 {
		t.Fatalf("EditPlugins: %d filters, %v; want 1, nil", n, err)
	}
	js, err := JSON(b)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	back, doc, err := LoadBootstrap(path)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := WasmPlugins(doc, back)
	if err != nil || len(ps) != 1 {
		t.Fatalf("WasmPlugins: %d, %v", len(ps), err)
	}
	if ps[0].Configuration != cfg {
		t.Errorf("configuration %q, want %q", ps[0].Configuration, cfg)
	}
	if v := ps[0].Config.GetAllowOnHeadersStopIteration(); v == nil || v.GetValue() {
		t.Errorf("allow_on_headers_stop_iteration %v, want false", v)
	}
	_, err = EditPlugins(back, func(pc *wasmv3.PluginConfig) error { return SetConfiguration(pc, `["not", "an object"]`) })
	if err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("a JSON array: got %v", err)
	}
	if ps, _ := WasmPlugins(doc, back); ps[0].Configuration != cfg {
		t.Errorf("after a refused edit the configuration is %q, want it unchanged", ps[0].Configuration)
	}
}

// TestDropWasmFilters: the shipped bootstrap without its wasm filter keeps
// the router, and nothing of the plugin is left in what Envoy gets.
func TestDropWasmFilters(t *testing.T) {
	b, _, err := LoadBootstrap("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := DropWasmFilters(b); err != nil || n != 1 {
		t.Fatalf("DropWasmFilters: %d, %v; want 1, nil", n, err)
	}
	js, err := JSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "envoy.filters.http.wasm") || !strings.Contains(string(js), "envoy.filters.http.router") {
		t.Errorf("after DropWasmFilters: wasm filter present or router gone:\n%s", js)
	}
	if n, _ := DropWasmFilters(b); n != 0 {
		t.Errorf("a second DropWasmFilters removed %d", n)
	}
}

// TestLocalize_extensionConfig: Launch's staging of envoy-ecds.yaml: the
// bootstrap's path_config_source and watched directory move to a folder
// of the run's own, the filter's file is copied there with its module
// moved and nothing else changed, and both still pass the schema checks.
func TestLocalize_extensionConfig(t *testing.T) {
	const file = "envoy-ecds.yaml"
	b, _, err := LoadBootstrap(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, ecds, err := writeLocalized(Setup{Bootstrap: file}, b, dir, Local{Listen: "127.0.0.1:18080", Admin: "127.0.0.1:18082", Upstream: "127.0.0.1:18000", Module: "/tmp/x/main.wasm"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "ecds"); ecds != want {
		t.Fatalf("watched directory %q, want %q", ecds, want)
	}
	lb, _, err := LoadBootstrap(cfg)
	if err != nil {
		t.Fatalf("localized bootstrap: %v", err)
	}
	paths, err := discoveryPaths(lb)
	if err != nil || len(paths) != 1 || paths[0] != filepath.Join(ecds, "wafguard.yaml") {
		t.Fatalf("localized path_config_source paths %v (%v), want [%s]", paths, err, filepath.Join(ecds, "wafguard.yaml"))
	}
	if _, err := EditDiscoveredFilters(lb, func(_ string, src *corev3.ExtensionConfigSource) error {
		if got := src.GetConfigSource().GetPathConfigSource().GetWatchedDirectory().GetPath(); got != ecds {
			t.Errorf("watched_directory %q, want %q", got, ecds)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	shipped, err := LoadExtensionConfig(filepath.Join("ecds", "wafguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	staged, err := LoadExtensionConfig(filepath.Join(ecds, "wafguard.yaml"))
	if err != nil {
		t.Fatalf("staged file: %v", err)
	}
	var module string
	if err := staged.EditPlugin(func(pc *wasmv3.PluginConfig) error {
		module = pc.GetVmConfig().GetCode().GetLocal().GetFilename()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if module != "/tmp/x/main.wasm" {
		t.Errorf("staged module %q, want /tmp/x/main.wasm", module)
	}
	if err := staged.SetModule("/etc/envoy/main.wasm"); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(staged.Config, shipped.Config) || staged.Version != shipped.Version {
		t.Errorf("the staged file differs from the shipped one in more than the module")
	}
}

// TestReplaceFile: the new content is in place and no temporary file is
// left beside it.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.yaml")
	for _, s := range []string{"one", "two"} {
		if err := ReplaceFile(path, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != s {
			t.Errorf("content %q, want %q", got, s)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want 1", len(ents))
	}
}
