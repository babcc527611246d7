package bench

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"

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
		cfg, err := pluginConfigKeys(pc)
		if err != nil {
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

// sameOtherKeys checks that got has the keys of want, but for the one
// edited, each with the same JSON value.
func sameOtherKeys(t *testing.T, got, want map[string]json.RawMessage, edited string) {
	t.Helper()
	for k, v := range want {
		if k == edited {
			continue
		}
		var g, w bytes.Buffer
		if err := json.Compact(&g, got[k]); err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		if err := json.Compact(&w, v); err != nil {
			t.Fatal(err)
		}
		if g.String() != w.String() {
			t.Errorf("key %s: got %s, want %s", k, &g, &w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != edited {
			t.Errorf("key %s added", k)
		}
	}
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
		sameOtherKeys(t, cfg, shipped[i], "directives_map")
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

// TestWithHold: the envoy-hold row is the shipped configuration with
// hold_headers_until_inspected on, and nothing else changed; without
// allow_on_headers_stop_iteration it is refused.
func TestWithHold(t *testing.T) {
	shipped := shippedPluginConfigs(t, func(*wasmv3.PluginConfig) error { return nil })
	edited := shippedPluginConfigs(t, withHold)
	for i, cfg := range edited {
		if string(cfg["hold_headers_until_inspected"]) != "true" {
			t.Errorf("hold_headers_until_inspected: got %s, want true", cfg["hold_headers_until_inspected"])
		}
		sameOtherKeys(t, cfg, shipped[i], "hold_headers_until_inspected")
	}
	pc := &wasmv3.PluginConfig{}
	if err := envoy.SetConfiguration(pc, `{}`); err != nil {
		t.Fatal(err)
	}
	if err := withHold(pc); err == nil || !strings.Contains(err.Error(), "allow_on_headers_stop_iteration") {
		t.Errorf("without allow_on_headers_stop_iteration: got %v, want an error naming it", err)
	}
}
