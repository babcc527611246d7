package pluginconfig

import (
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{name: "valid", config: `{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a", "admission": {"max_inflight": 4}}`},
		{name: "defaults", config: ``},
		{
			name: "every problem is reported",
			config: `{"directives_map": {"good": ["SecRuleEngine On"], "b1": ["SecNoSuchDirective 1"], "b2": ["SecRule ARGS \"@rx (\" \"id:1,phase:1,deny\""]},
				"default_directives": "nope", "admission": {"max_inflight": -1}, "memory": {"max_heap_bytes": 1}}`,
			want: []string{
				`default_directives: "nope" names no entry in directives_map; want one of "b1", "b2", "good"`,
				`directives_map["b1"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: unknown directive "secnosuchdirective"`,
				"directives_map[\"b2\"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: failed to compile the directive \"secrule\": error parsing regexp: missing closing ): `(?sm)(`",
				`admission.max_inflight: got -1, want 0 (off) or a positive integer`,
				`memory.max_heap_bytes: got 1, want 0 (off) or at least 16777216 (16 MiB): the rule sets alone take more`,
			},
		},
		{
			name:   "unknown key still checks the rule sets",
			config: `{"directive_map": {}, "directives_map": {"a": ["Include @owasp_crs/NO-SUCH.conf"]}, "default_directives": "a"}`,
			want: []string{
				`plugin configuration: unknown key "directive_map"; valid keys are directives_map, default_directives, per_authority_directives, per_route_directives, metric_labels, admission, memory, json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection, hold_headers_until_inspected, hold_headers_timeout_ms`,
				`directives_map["a"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: failed to readfile: open @owasp_crs/NO-SUCH.conf: file does not exist`,
			},
		},
		{
			name:   "not JSON",
			config: `{"directives_map": `,
			want:   []string{`plugin configuration: truncated JSON (19 bytes): unexpected EOF`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Errors(Check([]byte(tc.config)))
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors %q, want %d %q", len(got), got, len(tc.want), tc.want)
			}
			for i := range got {
				if got[i].Error() != tc.want[i] {
					t.Errorf("error %d:\ngot  %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
