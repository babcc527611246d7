package filter

import (
	"strings"
	"testing"
)

// TestPlugin_configDigest: the plugin names the configuration it runs by
// ConfigDigest of its JSON text, in its start line and in the
// waf_filter.config_info gauge (1 while it runs, 0 once Envoy is done
// with it), so that a dashboard shows which configuration each Envoy
// enforces; another configuration has another digest. (On the .wasm,
// TestPlugin_crsRelease checks the start line and the gauge.)
func TestPlugin_configDigest(t *testing.T) {
	config := configJSON(map[string]any{
		"directives_map":     map[string][]string{"rules": {"SecRuleEngine On"}},
		"default_directives": "rules",
		"metric_labels":      map[string]string{"env": "digest"},
	})
	other := strings.Replace(config, "SecRuleEngine On", "SecRuleEngine DetectionOnly", 1)
	digest := ConfigDigest([]byte(config))
	if len(digest) != 12 || digest == ConfigDigest([]byte(other)) {
		t.Fatalf("ConfigDigest: %q for one configuration, %q for another", digest, ConfigDigest([]byte(other)))
	}
	gauge := metricConfigInfo + "_env=digest_config=" + digest
	p, err := nativeRunner{}.load(t, config)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	found := false
	for _, l := range p.logs() {
		found = found || strings.HasPrefix(l, "info: waf: started with") && strings.HasSuffix(l, "; configuration "+digest)
	}
	if !found {
		t.Errorf("no start line ending in %q; logs:\n%s", "; configuration "+digest, strings.Join(p.logs(), "\n"))
	}
	if v, ok := p.metric(gauge); !ok || v != 1 {
		t.Errorf("%s = %d (defined %v), want 1", gauge, v, ok)
	}
	p.(*nativePlugin).host.FinishVM()
	if v, _ := p.metric(gauge); v != 0 {
		t.Errorf("after the plugin is done: %s = %d, want 0", gauge, v)
	}
}
