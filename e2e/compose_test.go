package e2e

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wafguard/wafguard/envoy"
)

// minEnvoyMinor is the oldest Envoy 1.x that runs upstream-Go plugins
// (docs/deployment.md).
const minEnvoyMinor = 39

// compose is the part of docker-compose.yml the test reads. Decoding is
// strict, so a misspelled key of these services fails here before docker
// compose ignores or rejects it.
type compose struct {
	Name     string `yaml:"name"`
	Services struct {
		Envoy struct {
			Image     string   `yaml:"image"`
			Command   []string `yaml:"command"`
			Volumes   []string `yaml:"volumes"`
			Ports     []string `yaml:"ports"`
			DependsOn []string `yaml:"depends_on"`
		} `yaml:"envoy"`
		Upstream struct {
			Build struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Expose []string `yaml:"expose"`
		} `yaml:"upstream"`
	} `yaml:"services"`
}

// envoyImage is an upstream Envoy image pinned by release tag.
var envoyImage = regexp.MustCompile(`^envoyproxy/envoy:v1\.([0-9]+)\.([0-9]+)$`)

// TestCompose_file checks that docker-compose.yml runs a pinned Envoy of a
// version that can run the plugin, with envoy.yaml and the plugin mounted
// where envoy.yaml expects them, and the ports and upstream that envoy.yaml
// and the tests use.
func TestCompose_file(t *testing.T) {
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	e := c.Services.Envoy
	m := envoyImage.FindStringSubmatch(e.Image)
	if m == nil {
		t.Fatalf("services.envoy.image: got %q, want envoyproxy/envoy:v1.<minor>.<patch>, pinned", e.Image)
	}
	if minor, _ := strconv.Atoi(m[1]); minor < minEnvoyMinor {
		t.Fatalf("services.envoy.image: got %q, want Envoy 1.%d or newer (older releases lack WASI calls Go plugins make)", e.Image, minEnvoyMinor)
	}

	b, doc, err := envoy.LoadBootstrap(envoyConfig)
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := envoy.WasmPlugins(doc, b)
	if err != nil || len(plugins) != 1 {
		t.Fatalf("%s: got %d wasm filters (error %v), want 1", envoyConfig, len(plugins), err)
	}
	mounts := map[string]string{} // container path -> host path
	for _, v := range e.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Fatalf("services.envoy.volumes: %q: want host:container[:ro]", v)
		}
		mounts[parts[1]] = parts[0]
	}
	i := slices.Index(e.Command, "--config-path")
	if i < 0 || i+1 >= len(e.Command) {
		t.Fatalf("services.envoy.command: %q: want --config-path <file>", e.Command)
	}
	if got := mounts[e.Command[i+1]]; got != "./"+envoyConfig {
		t.Fatalf("services.envoy: --config-path %s is mounted from %q, want ./%s", e.Command[i+1], got, envoyConfig)
	}
	wasmFile := plugins[0].Config.GetVmConfig().GetCode().GetLocal().GetFilename()
	if got := mounts[wasmFile]; got != "../build/main.wasm" {
		t.Fatalf("services.envoy: %s (vm_config.code.local.filename in %s) is mounted from %q, want ../build/main.wasm", wasmFile, envoyConfig, got)
	}

	listener := b.GetStaticResources().GetListeners()[0].GetAddress().GetSocketAddress().GetPortValue()
	admin := b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue()
	for _, port := range []uint32{listener, admin} {
		want := fmt.Sprintf("127.0.0.1:%d:%d", port, port)
		if !slices.Contains(e.Ports, want) {
			t.Fatalf("services.envoy.ports: %q: want %q (the port in %s, on loopback only)", e.Ports, want, envoyConfig)
		}
	}

	var upstream string
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() == "upstream" {
			sa := cl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			upstream = fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
		}
	}
	u := c.Services.Upstream
	if want := fmt.Sprintf("upstream:%s", strings.Join(u.Expose, "")); upstream != want {
		t.Fatalf("%s: cluster upstream points at %q, want %q (the upstream service and its exposed port)", envoyConfig, upstream, want)
	}
	if _, err := os.Stat(strings.TrimPrefix(u.Build.Dockerfile, "e2e/")); err != nil || u.Build.Context != ".." {
		t.Fatalf("services.upstream.build: context %q, dockerfile %q: want .. and a Dockerfile under e2e/ (%v)", u.Build.Context, u.Build.Dockerfile, err)
	}
}
