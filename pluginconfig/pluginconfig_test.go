package pluginconfig

import (
	"context"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/admission"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

func TestParse_defaults(t *testing.T) {
	for _, data := range []string{"", "  \n", "{}", `{"admission": null, "memory": {}}`} {
		cfg, err := Parse([]byte(data))
		if err != nil {
			t.Fatalf("Parse(%q): %v", data, err)
		}
		if cfg.Filter.DefaultDirectives != "default" || len(cfg.Filter.DirectivesMap["default"]) == 0 {
			t.Errorf("Parse(%q): rule sets %v, default %q; want the built-in CRS set", data, cfg.Filter.DirectivesMap, cfg.Filter.DefaultDirectives)
		}
		if cfg.Admission.MaxInflight != admission.DefaultMaxInflight {
			t.Errorf("Parse(%q): admission.max_inflight %d, want the default %d", data, cfg.Admission.MaxInflight, admission.DefaultMaxInflight)
		}
		if want, _ := admission.ParseMemoryConfig(nil); cfg.Memory != want {
			t.Errorf("Parse(%q): memory %+v, want the defaults %+v", data, cfg.Memory, want)
		}
	}
}

// TestParse_parts: each object reaches its owner's parser.
func TestParse_parts(t *testing.T) {
	cfg, err := Parse([]byte(`{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a",
		"admission": {"max_inflight": 3}, "memory": {"max_heap_bytes": 33554432}, "json_log": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Filter.DirectivesMap["a"]; len(got) != 1 || got[0] != "SecRuleEngine On" || !cfg.Filter.JSONLog {
		t.Errorf("filter keys: got %+v", cfg.Filter)
	}
	if cfg.Admission.MaxInflight != 3 {
		t.Errorf("admission.max_inflight: got %d, want 3", cfg.Admission.MaxInflight)
	}
	if cfg.Memory.MaxHeapBytes != 32<<20 {
		t.Errorf("memory.max_heap_bytes: got %d, want %d", cfg.Memory.MaxHeapBytes, 32<<20)
	}
}

// TestCheck_dropIn: a coraza-proxy-wasm configuration loads unchanged.
func TestCheck_dropIn(t *testing.T) {
	data := `{
		"directives_map": {
			"rs1": ["Include @demo-conf", "Include @crs-setup-conf", "SecDebugLogLevel 9", "SecRuleEngine On", "Include @owasp_crs/*.conf"],
			"rs2": ["Include @recommended-conf", "SecRuleEngine DetectionOnly"]
		},
		"default_directives": "rs1",
		"per_authority_directives": {"foo.example.com": "rs2", "bar.example.com:8080": "rs2"},
		"metric_labels": {"owner": "coraza", "identifier": "global"}
	}`
	if err := Check([]byte(data)); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// documentErrors are errors in the document itself, and the first error of
// each part, in the words of the plugin's critical log line.
var documentErrors = []struct{ name, config, want string }{
	{
		name:   "unknown key",
		config: `{"directives": {"a": []}}`,
		want:   `plugin configuration: unknown key "directives"; valid keys are directives_map, default_directives, per_authority_directives, per_route_directives, metric_labels, admission, memory, json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection, hold_headers_until_inspected, hold_headers_timeout_ms`,
	},
	{
		name:   "invalid json",
		config: `{"directives_map": {"a": ["SecRuleEngine On"]},}`,
		want:   `plugin configuration: invalid JSON at byte offset 48: invalid character '}' looking for beginning of object key string`,
	},
	{
		name:   "wrong type",
		config: `{"directives_map": {"a": "SecRuleEngine On"}, "default_directives": "a"}`,
		want:   `directives_map: got JSON string, want an object of rule set names to lists of SecLang lines, e.g. {"crs": ["Include @owasp_crs/*.conf"]}: json: cannot unmarshal string into Go struct field Config.directives_map of type []string`,
	},
	{
		name:   "wrong type of a flag",
		config: `{"json_log": "yes"}`,
		want:   `json_log: got JSON string, want true or false: json: cannot unmarshal string into Go struct field Config.json_log of type bool`,
	},
	{
		name:   "not an object",
		config: `[]`,
		want:   `plugin configuration: got JSON array, want an object with the keys directives_map, default_directives, per_authority_directives, per_route_directives, metric_labels, admission, memory, json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection, hold_headers_until_inspected, hold_headers_timeout_ms`,
	},
	{
		name:   "trailing data",
		config: `{} {}`,
		want:   `plugin configuration: unexpected data after the JSON object; give exactly one object`,
	},
	{
		name:   "truncated",
		config: `{"directives_map": `,
		want:   `plugin configuration: truncated JSON (19 bytes): unexpected EOF`,
	},
	{
		name:   "the WAF's keys come before the admission object",
		config: `{"directives_map": {"a": []}, "admission": {"max_inflight": -1}}`,
		want:   `default_directives: missing; want one of "a" (the rule set for authorities not in per_authority_directives)`,
	},
	{
		name:   "admission object",
		config: `{"admission": {"max_inflight": -1}}`,
		want:   `admission.max_inflight: got -1, want 0 (off) or a positive integer`,
	},
	{
		name:   "memory object",
		config: `{"memory": {"max_heap_bytes": 1}}`,
		want:   `memory.max_heap_bytes: got 1, want 0 (off) or at least 16777216 (16 MiB): the rule sets alone take more`,
	},
}

func TestParse_documentErrors(t *testing.T) {
	for _, tc := range documentErrors {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.config))
			if err == nil || err.Error() != tc.want {
				t.Errorf("Parse(%s):\ngot  %v\nwant %s", tc.config, err, tc.want)
			}
			if errs := Errors(Check([]byte(tc.config))); len(errs) == 0 || errs[0].Error() != tc.want {
				t.Errorf("Check(%s): first error %v, want %s", tc.config, errs, tc.want)
			}
		})
	}
}

// TestPlugin_documentErrors: the built plugin refuses each configuration
// at start with the same words, in one critical log line.
func TestPlugin_documentErrors(t *testing.T) {
	m, err := wasmhost.Compile(context.Background(), plugintest.Read(t), wasmhost.Options{Concurrency: 1})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer m.Close(context.Background())
	for _, tc := range documentErrors {
		t.Run(tc.name, func(t *testing.T) {
			var critical []string
			vm, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
				Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(tc.config),
				Host: wasmhost.NewHost(wasmhost.HostOptions{}),
				LogSink: func(e wasmhost.LogEntry) {
					if e.Level == wasmhost.LevelCritical {
						critical = append(critical, e.Message)
					}
				},
			})
			if err == nil {
				vm.Close()
				t.Fatalf("the plugin started; want it refused with %s", tc.want)
			}
			if got := strings.Join(critical, "\n"); got != tc.want {
				t.Errorf("critical log:\ngot  %s\nwant %s", got, tc.want)
			}
		})
	}
}
