package pluginconfig

import (
	"strings"
	"testing"
)

// FuzzParse replays its seeds and testdata/fuzz/FuzzParse/ under plain `go
// test`. To fuzz it (at most a minute at a time on a shared machine):
//
//	go test ./pluginconfig -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s -parallel 1
//
// It checks that any configuration either fails with a one-line error, or
// gives a configuration whose cross references hold, without a panic, and
// that the same bytes give the same answer twice.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``, ` `, `null`, `{}`, `[]`, `"x"`, `1`, `{`, `{"directives_map": {}}`,
		`{"directives_map": {"rules": ["SecRuleEngine On"]}, "default_directives": "rules", "metric_labels": {"owner": "team-a"}}`,
		`{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a", "admission": {"max_inflight": 2}}`,
		`{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a", "memory": {"max_heap_bytes": 0}}`,
		`{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a", "per_authority_directives": {"[::1]:80": "a", "::1": "a"}}`,
		`{"directives_map": {"a": ["x"]}, "default_directives": "a", "per_authority_directives": {"A.example:1": "a", "a.example": "a"}}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "metric_labels": {"env": "prod", "ruleid": "x"}}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "rule_metrics_top_n": -1}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "request_json_max_depth": 0, "request_body_no_files_limit": 0}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "raw_body_content_types": ["application/octet-stream", ""]}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"status": 403, "body": "no", "headers": {"x": "y"}}}}`,
		`{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"b": {}}}`,
		`{"directives_map": {"a": []}, "default_directives": "a"} {}`,
		"{\"directives_map\": {\"\xff\": []}, \"default_directives\": \"\xff\"}",
		`{"directives_map": {"a": []}, "default_directives": "a", "json_log": "yes"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			msg := err.Error()
			if msg == "" || strings.ContainsRune(msg, '\n') && !strings.Contains(string(data), "\n") {
				t.Fatalf("config %q: error %q is empty or spans lines", data, msg)
			}
			return
		}
		fc := cfg.Filter
		if _, ok := fc.DirectivesMap[fc.DefaultDirectives]; !ok {
			t.Fatalf("config %q: default_directives %q names no rule set", data, fc.DefaultDirectives)
		}
		for a, name := range fc.PerAuthorityDirectives {
			if _, ok := fc.DirectivesMap[name]; !ok {
				t.Fatalf("config %q: per_authority_directives[%q] = %q names no rule set", data, a, name)
			}
		}
		if _, err := Parse(data); err != nil {
			t.Fatalf("config %q: accepted once, refused the second time: %v", data, err)
		}
	})
}
