package filter

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wafguard/wafguard/filter/rules"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// shippedConfig is config/default.json, the configuration the plugin is
// shipped with.
func shippedConfig(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../config/default.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withDirectives returns the configuration cfg with each rule set's
// directives rewritten by edit.
func withDirectives(t testing.TB, cfg string, edit func([]string) []string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(cfg), &m); err != nil {
		t.Fatal(err)
	}
	sets := m["directives_map"].(map[string]any)
	for name, v := range sets {
		var lines []string
		for _, l := range v.([]any) {
			lines = append(lines, l.(string))
		}
		sets[name] = edit(lines)
	}
	return configJSON(m)
}

// afterSetup inserts lines right after "Include @crs-setup-conf".
func afterSetup(lines ...string) func([]string) []string {
	return func(in []string) []string {
		var out []string
		for _, l := range in {
			out = append(out, l)
			if l == "Include @crs-setup-conf" {
				out = append(out, lines...)
			}
		}
		return out
	}
}

// xmlPOST and jsonPOST are POSTs of that body with its content type and
// length.
func xmlPOST(body string) exchange {
	return withLength(exchange{method: "POST", path: "/api", headers: [][2]string{{"content-type", "application/xml"}}, body: [][]byte{[]byte(body)}})
}

func jsonPOST(body string) exchange {
	return withLength(exchange{method: "POST", path: "/api", headers: [][2]string{{"content-type", "application/json"}}, body: [][]byte{[]byte(body)}})
}

// The requests of GHSA-6jp8-c2w2-x7wr (attacks in XML attribute values,
// which CRS 4.25.0 did not inspect) and 4RI-250413 (a command in a JSON
// key), which CRS 4.25.0 let through.
var (
	xmlAttrSQLi    = xmlPOST(`<?xml version="1.0"?><root><a probe="1' UNION SELECT password FROM users--"></a></root>`)
	xmlAttrRCE     = xmlPOST(`<?xml version="1.0"?><root><a probe="c99 -wrapper sh,-c,curl google.com ."></a></root>`)
	jsonKeyRCE     = jsonPOST(`{ "aa-disable php-fpm":"foo" }`)
	benignXMLBody  = xmlPOST(`<?xml version="1.0"?><order id="42" currency="EUR"><item sku="A-100" qty="2">Blue mug</item><note lang="en">Leave at the door, please.</note></order>`)
	benignJSONBody = jsonPOST(`{"order": {"id": 42, "items": [{"sku": "A-100", "qty": 2}], "note": "Leave at the door, please."}}`)
)

// attrInspectGated reports whether the embedded CRS release inspects XML
// attribute values only when tx.crs_xml_attr_inspect says so (4.25.1, rule
// 901181); later releases always do.
func attrInspectGated(t testing.TB) bool {
	b, err := rules.FS.ReadFile("@owasp_crs/REQUEST-901-INITIALIZATION.conf")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), "SecRule TX:crs_xml_attr_inspect")
}

// TestFilter_crsPublishedBypasses sends the published CRS bypasses through
// the shipped configuration: each is blocked. With XML attribute
// inspection turned off by the operator (either way docs/configuration.md
// gives), the XML ones pass again on CRS 4.25.1, which is what turning it
// off costs; releases that always inspect attribute values ignore it.
func TestFilter_crsPublishedBypasses(t *testing.T) {
	shipped := shippedConfig(t)
	off := 200
	if !attrInspectGated(t) {
		off = 403
	}
	offByRemoval := withDirectives(t, shipped, afterSetup("SecRuleRemoveById 900510"))
	offBySetting := withDirectives(t, shipped, afterSetup(
		`SecAction "id:1900510,phase:1,pass,nolog,setvar:'tx.crs_xml_attr_inspect=0'"`))
	type request struct {
		name string
		ex   exchange
		want int
	}
	configs := []struct {
		name     string
		config   string
		requests []request
	}{
		{"shipped", shipped, []request{
			{"SQL injection in an XML attribute", xmlAttrSQLi, 403},
			{"command in an XML attribute", xmlAttrRCE, 403},
			{"command in a JSON key", jsonKeyRCE, 403},
			{"benign XML with attributes", benignXMLBody, 200},
			{"benign JSON", benignJSONBody, 200},
		}},
		{"off by SecRuleRemoveById 900510", offByRemoval, []request{
			{"SQL injection in an XML attribute", xmlAttrSQLi, off},
			{"command in an XML attribute", xmlAttrRCE, off},
			{"command in a JSON key", jsonKeyRCE, 403},
		}},
		{"off by tx.crs_xml_attr_inspect=0", offBySetting, []request{
			{"SQL injection in an XML attribute", xmlAttrSQLi, off},
			{"command in an XML attribute", xmlAttrRCE, off},
			{"benign XML with attributes", benignXMLBody, 200},
		}},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, c := range configs {
			t.Run(c.name, func(t *testing.T) {
				p, err := r.load(t, c.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				for _, rq := range c.requests {
					got := p.do(t, rq.ex)
					if got.status != rq.want || got.localReply != (rq.want != 200) {
						t.Errorf("%s: got status %d (local reply %v), want %d\nlogs:\n%s", rq.name, got.status, got.localReply, rq.want, strings.Join(p.logs(), "\n"))
					}
				}
			})
		}
	})
}

// TestPlugin_crsRelease checks that a started plugin says which CRS
// release it embeds: in its start line and in the name of a gauge set to
// 1, after the metric_labels. Natively, and in build/main.wasm on
// wazero (the case runners keep a VM per configuration and show only
// what follows its start).
func TestPlugin_crsRelease(t *testing.T) {
	wantLine := "info: waf: started with OWASP CRS " + rules.CRSVersion + " (commit " + rules.CRSCommit + ") embedded; rule sets: rules; configuration " + ConfigDigest([]byte(labelledConfig))
	gauge := "waf_filter.crs_info_env=prod_owner=team-a_crs=" + rules.CRSVersion
	configGauge := metricConfigInfo + "_env=prod_owner=team-a_config=" + ConfigDigest([]byte(labelledConfig))
	check := func(t *testing.T, lines []string, metric func(string) (uint64, bool)) {
		t.Helper()
		if !slices.Contains(lines, wantLine) {
			t.Errorf("no start line %q in the logs:\n%s", wantLine, strings.Join(lines, "\n"))
		}
		for _, g := range []string{gauge, configGauge} {
			if v, ok := metric(g); !ok || v != 1 {
				t.Errorf("%s: got %d (defined: %v), want 1", g, v, ok)
			}
		}
	}
	t.Run("go", func(t *testing.T) {
		p, err := nativeRunner{}.load(t, labelledConfig)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer p.close()
		check(t, p.logs(), p.metric)
	})
	t.Run("wasm", func(t *testing.T) {
		b, err := os.ReadFile(plugintest.Path())
		if err != nil {
			plugintest.Missing(t, "reading the plugin: %v", err)
		}
		ctx := context.Background()
		m, err := wasmhost.Compile(ctx, b, wasmhost.Options{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		host := wasmhost.NewHost(wasmhost.HostOptions{})
		var mu sync.Mutex
		var lines []string
		vm, err := m.NewVM(ctx, wasmhost.PluginConfig{
			Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(labelledConfig), Host: host,
			LogSink: func(e wasmhost.LogEntry) {
				mu.Lock()
				lines = append(lines, e.Level.String()+": "+e.Message)
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer vm.Close()
		mu.Lock()
		defer mu.Unlock()
		check(t, lines, host.Metric)
	})
}
