package bench

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
)

// shippedPluginConfigs reads the plugin configuration of every wasm filter
// of the shipped bootstrap after edit ran on it.
func shippedPluginConfigs(t *testing.T, edit func(pc *wasmv3.PluginConfig) error) []map[string]json.RawMessage {
	t.Helper()
	b, _, err := envoy.LoadBootstrap(filepath.Join("..", ShippedBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	n, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error {
		if err := edit(pc); err != nil {
			return err
		}
		var sv wrapperspb.StringValue
		if err := pc.GetConfiguration().UnmarshalTo(&sv); err != nil {
			return err
		}
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal([]byte(sv.GetValue()), &cfg); err != nil {
			return err
		}
		out = append(out, cfg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || len(out) != n {
		t.Fatalf("%d plugins edited, %d configurations read", n, len(out))
	}
	return out
}

// TestWithoutCRS: the envoy-base row keeps every key and every line of the
// shipped configuration except the lines that include the CRS.
func TestWithoutCRS(t *testing.T) {
	shipped := shippedPluginConfigs(t, func(*wasmv3.PluginConfig) error { return nil })
	edited := shippedPluginConfigs(t, withoutCRS)
	for i, cfg := range edited {
		var before, after map[string][]string
		if err := json.Unmarshal(shipped[i]["directives_map"], &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(cfg["directives_map"], &after); err != nil {
			t.Fatal(err)
		}
		for name, lines := range before {
			var want []string
			for _, l := range lines {
				if l != "Include @crs-setup-conf" && l != "Include @owasp_crs/*.conf" {
					want = append(want, l)
				}
			}
			if len(want) == len(lines) {
				t.Errorf("rule set %q of the shipped bootstrap includes no CRS file: %q", name, lines)
			}
			if !slices.Equal(after[name], want) {
				t.Errorf("rule set %q: got %q, want %q", name, after[name], want)
			}
			if !slices.Contains(after[name], "Include @recommended-conf") {
				t.Errorf("rule set %q lost Coraza's recommended settings: %q", name, after[name])
			}
		}
		if len(after) != len(before) {
			t.Errorf("rule sets: got %d, want %d", len(after), len(before))
		}
		for k, v := range shipped[i] {
			if k == "directives_map" {
				continue
			}
			var got, want bytes.Buffer
			if err := json.Compact(&got, cfg[k]); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&want, v); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("key %s: got %s, want %s", k, &got, &want)
			}
		}
		if len(cfg) != len(shipped[i]) {
			t.Errorf("keys: got %d, want %d", len(cfg), len(shipped[i]))
		}
	}
}

// TestWithoutCRS_noCRS: a configuration whose rule sets include no CRS file
// is refused, since the row would not measure what it says.
func TestWithoutCRS_noCRS(t *testing.T) {
	pc := &wasmv3.PluginConfig{}
	if err := envoy.SetConfiguration(pc, `{"directives_map":{"a":["SecRuleEngine On"]},"default_directives":"a"}`); err != nil {
		t.Fatal(err)
	}
	if err := withoutCRS(pc); err == nil {
		t.Fatal("no error for a rule set without the CRS")
	}
}
