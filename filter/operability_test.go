package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// opsRules are small custom rules (no CRS, so the wasm runner stays fast):
// a blocking phase 1 rule, two rules that only log, and the JSON body
// processor for application/json.
var opsRules = []string{
	"SecRuleEngine On",
	"SecRequestBodyAccess On",
	`SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:100,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"`,
	`SecAction "id:101,phase:1,pass,nolog,ctl:forceRequestBodyVariable=On"`,
	`SecRule REQUEST_HEADERS:x-block "@streq yes" "id:5001,phase:1,deny,status:403,log,severity:CRITICAL,msg:'blocked by header',logdata:'%{MATCHED_VAR}'"`,
	`SecRule ARGS:a "@streq 1" "id:5002,phase:1,pass,log,msg:'first match'"`,
	`SecRule ARGS:b "@streq 2" "id:5003,phase:1,pass,log,msg:'second match'"`,
	`SecRule ARGS_POST "@contains attack" "id:5004,phase:2,deny,status:403,log,msg:'attack in args'"`,
}

func opsConfig(rules []string, extra map[string]any) string {
	v := map[string]any{
		"directives_map":     map[string][]string{"rules": rules},
		"default_directives": "rules",
	}
	for k, x := range extra {
		v[k] = x
	}
	return configJSON(v)
}

func detectionRules() []string {
	return append([]string{"SecRuleEngine DetectionOnly"}, opsRules[1:]...)
}

// jsonLogLine returns the one JSON transaction line among the logs.
func jsonLogLine(t *testing.T, logs []string) map[string]any {
	t.Helper()
	var found []string
	for _, l := range logs {
		if msg, ok := strings.CutPrefix(l, "info: "); ok && strings.HasPrefix(msg, `{"transaction_id":`) {
			found = append(found, msg)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got %d JSON log lines, want 1; logs:\n%s", len(found), strings.Join(logs, "\n"))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(found[0]), &m); err != nil {
		t.Fatalf("JSON log line does not parse: %v\n%s", err, found[0])
	}
	return m
}

func TestPlugin_jsonLog(t *testing.T) {
	cfg := opsConfig(opsRules, map[string]any{"json_log": true})
	cases := []struct {
		name   string
		config string // default cfg
		ex     exchange
		want   map[string]any
		// wantRules are the ids of matched_rules, in order.
		wantRules []float64
	}{
		{
			name: "block with x-request-id",
			ex:   exchange{path: "/x?a=1", headers: [][2]string{{"x-request-id", "req-42"}, {"x-block", "yes"}}},
			want: map[string]any{
				"transaction_id": "req-42", "rule_set": "rules", "authority": "localhost", "method": "GET",
				"path": "/x?a=1", "client_ip": "10.1.2.3", "client_port": float64(43210),
				"action": "block", "status": float64(403), "rule_id": float64(5001), "phase": "http_request_headers",
			},
			wantRules: []float64{5001},
		},
		{
			name: "pass with traceparent",
			ex: exchange{path: "/?a=1&b=2", headers: [][2]string{
				{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
				respStatus: 201},
			want: map[string]any{
				"transaction_id": "4bf92f3577b34da6a3ce929d0e0e4736", "action": "pass", "status": float64(201),
			},
			wantRules: []float64{5002, 5003},
		},
		{
			name:   "would block in detection only",
			config: opsConfig(detectionRules(), map[string]any{"json_log": true}),
			ex:     exchange{headers: [][2]string{{"x-block", "yes"}}},
			want: map[string]any{
				"action": "would_block", "status": float64(200), "rule_id": float64(5001), "phase": "http_request_headers",
			},
			wantRules: []float64{5001},
		},
		{
			name: "json too deep",
			ex:   exchange{method: "POST", headers: jsonHeader, body: chunks(nest(70))},
			want: map[string]any{
				"action": "json_too_deep", "status": float64(400), "rule_id": float64(0), "phase": "http_request_body",
			},
		},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				config := cfg
				if tc.config != "" {
					config = tc.config
				}
				p, err := r.load(t, config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				p.do(t, tc.ex)
				logs := p.logs()
				m := jsonLogLine(t, logs)
				for k, v := range tc.want {
					if m[k] != v {
						t.Errorf("%s: got %v, want %v", k, m[k], v)
					}
				}
				if tc.want["action"] == "pass" {
					if _, ok := m["rule_id"]; ok {
						t.Errorf("rule_id present on a pass: %v", m)
					}
				}
				rules, _ := m["matched_rules"].([]any)
				var ids []float64
				for _, r := range rules {
					ids = append(ids, r.(map[string]any)["id"].(float64))
				}
				if len(ids) != len(tc.wantRules) {
					t.Fatalf("matched_rules ids %v, want %v", ids, tc.wantRules)
				}
				for i := range ids {
					if ids[i] != tc.wantRules[i] {
						t.Errorf("matched_rules ids %v, want %v", ids, tc.wantRules)
					}
				}
				if tc.want["action"] == "block" {
					r0 := rules[0].(map[string]any)
					if r0["msg"] != "blocked by header" || r0["data"] != "yes" || r0["severity"] != "critical" || r0["phase"] != float64(1) {
						t.Errorf("matched rule: got %v", r0)
					}
				}
				// The ModSecurity-shape lines stay on.
				if len(tc.wantRules) != 0 && !hasLog(logs, "warn: ", `[id "`) {
					t.Errorf("no ModSecurity-shape warn line; logs:\n%s", strings.Join(logs, "\n"))
				}
			})
		}
	})
}

func TestPlugin_jsonLogOffByDefault(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, opsConfig(opsRules, nil))
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer p.close()
		p.do(t, exchange{headers: [][2]string{{"x-block", "yes"}}})
		if hasLog(p.logs(), "", `{"transaction_id":`) {
			t.Errorf("JSON log line without json_log")
		}
	})
}

func TestTraceID(t *testing.T) {
	for in, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736":                     "",
		"":                                                        "",
	} {
		if got := traceID(in); got != want {
			t.Errorf("traceID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	in := "a\"b\\c\n\x01\xffé"
	b := appendJSONString(nil, in)
	var got string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s does not parse: %v", b, err)
	}
	if want := "a\"b\\c\n\x01\ufffdé"; got != want {
		t.Errorf("round trip: got %q, want %q", got, want)
	}
}

func TestPlugin_operabilityMetrics(t *testing.T) {
	cases := []struct {
		name        string
		config      string
		ex          exchange
		wantStatus  int
		wantMetrics map[string]uint64
		// wantAbsent are metric names that must not exist.
		wantAbsent []string
	}{
		{
			name:       "detection only counts what blocking would have done",
			config:     opsConfig(detectionRules(), nil),
			ex:         exchange{headers: [][2]string{{"x-block", "yes"}}},
			wantStatus: 200,
			wantMetrics: map[string]uint64{
				"waf_filter.tx.total": 1,
				"waf_filter.tx.would_block_ruleid=5001_phase=http_request_headers": 1,
			},
			wantAbsent: []string{"waf_filter.tx.interruptions_ruleid=5001_phase=http_request_headers"},
		},
		{
			name:       "detection only counts a phase 2 would-block once",
			config:     opsConfig(detectionRules(), nil),
			ex:         exchange{method: "POST", headers: formHeader, body: chunks("x=attack", "&y=attack")},
			wantStatus: 200,
			wantMetrics: map[string]uint64{
				"waf_filter.tx.would_block_ruleid=5004_phase=http_request_body": 1,
			},
		},
		{
			name: "crs in detection only would block with 949110",
			config: ruleConfig("Include @recommended-conf", "SecRuleEngine DetectionOnly",
				"Include @crs-setup-conf", "Include @owasp_crs/*.conf"),
			ex: exchange{path: "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E", headers: [][2]string{
				{"user-agent", "Mozilla/5.0"}, {"accept", "text/html"}}},
			wantStatus: 200,
			wantMetrics: map[string]uint64{
				"waf_filter.tx.would_block_ruleid=949110_phase=http_request_body": 1,
				"waf_filter.rule.matches_ruleid=941100":                           1,
			},
			wantAbsent: []string{"waf_filter.tx.interruptions_ruleid=949110_phase=http_request_body"},
		},
		{
			name:       "rule matches beyond the top n go to other",
			config:     opsConfig(opsRules, map[string]any{"rule_metrics_top_n": 1}),
			ex:         exchange{path: "/?a=1&b=2"},
			wantStatus: 200,
			wantMetrics: map[string]uint64{
				"waf_filter.rule.matches_ruleid=5002":  1,
				"waf_filter.rule.matches_ruleid=other": 1,
			},
			wantAbsent: []string{"waf_filter.rule.matches_ruleid=5003", "waf_filter.rule.matches_ruleid=100"},
		},
		{
			name:       "top n of 0 counts every match as other",
			config:     opsConfig(opsRules, map[string]any{"rule_metrics_top_n": 0}),
			ex:         exchange{path: "/?a=1&b=2"},
			wantStatus: 200,
			wantMetrics: map[string]uint64{
				"waf_filter.rule.matches_ruleid=other": 2,
			},
			wantAbsent: []string{"waf_filter.rule.matches_ruleid=5002"},
		},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				got := p.do(t, tc.ex)
				if got.status != tc.wantStatus {
					t.Errorf("status: got %d, want %d", got.status, tc.wantStatus)
				}
				for name, want := range tc.wantMetrics {
					if v, ok := p.metric(name); !ok || v != want {
						t.Errorf("metric %s: got %d (defined: %v), want %d", name, v, ok, want)
					}
				}
				for _, name := range tc.wantAbsent {
					if v, ok := p.metric(name); ok && v != 0 {
						t.Errorf("metric %s: got %d, want none", name, v)
					}
				}
				if n, ok := histogramCount(p, metricWAFTime); !ok || n == 0 {
					t.Errorf("histogram %s: got %d samples (defined: %v), want at least 1", metricWAFTime, n, ok)
				}
			})
		}
	})
}

// TestPlugin_blockFilterState: the block metadata goes to filter state
// (proxy_set_property), for %FILTER_STATE(wasm.waf_rule_id:PLAIN)% in an
// access log.
func TestPlugin_blockFilterState(t *testing.T) {
	cases := []struct {
		name   string
		config string
		ex     exchange
		want   map[string]string
	}{
		{
			name:   "block",
			config: opsConfig(opsRules, nil),
			ex:     exchange{headers: [][2]string{{"x-request-id", "fs-1"}, {"x-block", "yes"}}},
			want: map[string]string{"waf_action": "block", "waf_rule_id": "5001", "waf_phase": "http_request_headers",
				"waf_status": "403", "waf_tx_id": "fs-1"},
		},
		{
			name:   "would block",
			config: opsConfig(detectionRules(), nil),
			ex:     exchange{headers: [][2]string{{"x-request-id", "fs-2"}, {"x-block", "yes"}}},
			want: map[string]string{"waf_action": "would_block", "waf_rule_id": "5001", "waf_phase": "http_request_headers",
				"waf_status": "403", "waf_tx_id": "fs-2"},
		},
		{
			name:   "crs anomaly score",
			config: crsConfig,
			ex: exchange{path: "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E", headers: [][2]string{
				{"user-agent", "Mozilla/5.0"}, {"accept", "text/html"}, {"x-request-id", "fs-3"}}},
			want: map[string]string{"waf_action": "block", "waf_rule_id": "949110", "waf_phase": "http_request_body",
				"waf_status": "403", "waf_anomaly_score": "20", "waf_tx_id": "fs-3"},
		},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				p.do(t, tc.ex)
				for k, want := range tc.want {
					got, err := filterState(p, k)
					if err != nil || got != want {
						t.Errorf("filter state %s: got %q (%v), want %q", k, got, err, want)
					}
				}
			})
		}
	})
}

// filterState reads what the last exchange of p stored with
// proxy_set_property under key.
func filterState(p loadedPlugin, key string) (string, error) {
	switch p := p.(type) {
	case *nativePlugin:
		b, err := p.host.GetProperty([]string{key})
		return string(b), err
	case *wasmPlugin:
		v, ok := p.filterState[key]
		if !ok {
			return "", fmt.Errorf("not set (have %v)", p.filterState)
		}
		return v, nil
	case *v8Plugin:
		v, ok := p.filterState[key]
		if !ok {
			return "", fmt.Errorf("not set (have %v)", p.filterState)
		}
		return v, nil
	}
	return "", fmt.Errorf("unknown runner %T", p)
}

func TestPlugin_denyResponse(t *testing.T) {
	deny := map[string]any{"rules": map[string]any{
		"status":       451,
		"body":         `{"error":"blocked"}`,
		"content_type": "application/json",
		"headers":      map[string]string{"X-Blocked-By": "wafguard"},
	}}
	cases := []struct {
		name       string
		config     string
		ex         exchange
		wantStatus int
		wantBody   string
		wantHdrs   [][2]string
	}{
		{
			name:       "custom status body and headers",
			config:     opsConfig(opsRules, map[string]any{"deny_response": deny}),
			ex:         exchange{headers: [][2]string{{"x-block", "yes"}}},
			wantStatus: 451, wantBody: `{"error":"blocked"}`,
			wantHdrs: [][2]string{{"content-type", "application/json"}, {"x-blocked-by", "wafguard"}},
		},
		{
			name: "status 0 keeps the rule's status",
			config: opsConfig(opsRules, map[string]any{"deny_response": map[string]any{"rules": map[string]any{
				"body": "no"}}}),
			ex:         exchange{headers: [][2]string{{"x-block", "yes"}}},
			wantStatus: 403, wantBody: "no",
			wantHdrs: [][2]string{{"content-type", "text/plain; charset=utf-8"}},
		},
		{
			name:       "the filter's own limits keep their status",
			config:     opsConfig(opsRules, map[string]any{"deny_response": deny, "request_body_no_files_limit": 4}),
			ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=12345")},
			wantStatus: 413, wantBody: `{"error":"blocked"}`,
			wantHdrs: [][2]string{{"content-type", "application/json"}},
		},
		{
			name:       "without deny_response the body is empty",
			config:     opsConfig(opsRules, nil),
			ex:         exchange{headers: [][2]string{{"x-block", "yes"}}},
			wantStatus: 403, wantBody: "",
		},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				got := p.do(t, tc.ex)
				if got.status != tc.wantStatus || !got.localReply || string(got.body) != tc.wantBody {
					t.Errorf("got status %d, local reply %v, body %q; want %d, true, %q", got.status, got.localReply, got.body, tc.wantStatus, tc.wantBody)
				}
				for _, h := range tc.wantHdrs {
					if !hasHeader(got.headers, h) {
						t.Errorf("no header %s: %s; headers %v", h[0], h[1], got.headers)
					}
				}
			})
		}
	})
}

func hasHeader(headers [][2]string, want [2]string) bool {
	for _, h := range headers {
		if strings.EqualFold(h[0], want[0]) && h[1] == want[1] {
			return true
		}
	}
	return false
}

func nest(depth int) string {
	return strings.Repeat(`{"a":[`, depth/2) + strings.Repeat("{", depth%2) + strings.Repeat("}", depth%2) + strings.Repeat("]}", depth/2)
}

func TestPlugin_bodyChecks(t *testing.T) {
	depth3 := opsConfig(opsRules, map[string]any{"request_json_max_depth": 3})
	noFiles := opsConfig(opsRules, map[string]any{"request_body_no_files_limit": 10})
	multipart := [][2]string{{"content-type", "multipart/form-data; boundary=xyz"}}
	octet := [][2]string{{"content-type", "application/octet-stream"}}
	cases := []struct {
		name         string
		config       string
		ex           exchange
		wantStatus   int
		wantUpstream bool
	}{
		{name: "json at the depth limit passes", config: depth3,
			ex:         exchange{method: "POST", headers: jsonHeader, body: chunks(`{"a":[`, `{"b":"[[[[{{"}]}`)},
			wantStatus: 200, wantUpstream: true},
		{name: "json past the depth limit gets 400", config: depth3,
			ex:         exchange{method: "POST", headers: jsonHeader, body: chunks(`{"a":[`, `{"b":[1]}]}`)},
			wantStatus: 400},
		{name: "default depth limit 64 passes 64", config: opsConfig(opsRules, nil),
			ex:         exchange{method: "POST", headers: jsonHeader, body: chunks(nest(64))},
			wantStatus: 200, wantUpstream: true},
		{name: "default depth limit 64 refuses 65", config: opsConfig(opsRules, nil),
			ex:         exchange{method: "POST", headers: jsonHeader, body: chunks(nest(65))},
			wantStatus: 400},
		{name: "depth of other content types is not checked", config: depth3,
			ex:         exchange{method: "POST", headers: [][2]string{{"content-type", "text/plain"}}, body: chunks("[[[[[[")},
			wantStatus: 200, wantUpstream: true},
		{name: "body at the no-files limit passes", config: noFiles,
			ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=3&", "b=5678")},
			wantStatus: 200, wantUpstream: true},
		{name: "body past the no-files limit gets 413", config: noFiles,
			ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=3&", "b=56789")},
			wantStatus: 413},
		{name: "content-length past the no-files limit gets 413 on headers", config: noFiles,
			ex:         exchange{method: "POST", headers: append([][2]string{{"content-length", "11"}}, formHeader...), body: chunks("a=3&b=56789")},
			wantStatus: 413},
		{name: "multipart is exempt from the no-files limit", config: noFiles,
			ex: exchange{method: "POST", headers: multipart,
				body: chunks("--xyz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\nhello\r\n--xyz--\r\n")},
			wantStatus: 200, wantUpstream: true},
		{name: "octet-stream is parsed into args by default", config: opsConfig(opsRules, nil),
			ex:         exchange{method: "POST", headers: octet, body: chunks("x=attack")},
			wantStatus: 403},
		{name: "octet-stream listed as raw is not parsed into args",
			config:     opsConfig(opsRules, map[string]any{"raw_body_content_types": []string{"Application/Octet-Stream"}}),
			ex:         exchange{method: "POST", headers: octet, body: chunks("x=attack")},
			wantStatus: 200, wantUpstream: true},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				got := p.do(t, tc.ex)
				if got.status != tc.wantStatus || got.upstream != tc.wantUpstream {
					t.Errorf("got status %d, upstream %v; want %d, %v; logs:\n%s", got.status, got.upstream, tc.wantStatus, tc.wantUpstream, strings.Join(p.logs(), "\n"))
				}
			})
		}
	})
}

func TestJSONDepth_feed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want bool
	}{
		{`[[1]]`, 2, false},
		{`[[[1]]]`, 2, true},
		{`{"a":"[[[[["}`, 1, false},
		{`{"a":"\"[[["}`, 1, false},
		{`[1],[2],[3]`, 1, false},
	} {
		var j jsonDepth
		if got := j.feed([]byte(tc.in), tc.max); got != tc.want {
			t.Errorf("feed(%s, %d) = %v, want %v", tc.in, tc.max, got, tc.want)
		}
	}
}

// badOpsConfigCases map each refused operability setting to the exact
// critical log line.
var badOpsConfigCases = []badConfigCase{
	{"top n negative", `{"directives_map": {"a": []}, "default_directives": "a", "rule_metrics_top_n": -1}`,
		`rule_metrics_top_n: got -1, want 0 (only the "other" counter) to 1000`},
	{"depth too large", `{"directives_map": {"a": []}, "default_directives": "a", "request_json_max_depth": 100001}`,
		`request_json_max_depth: got 100001, want 0 (off) or 1 to 100000`},
	{"no files limit negative", `{"directives_map": {"a": []}, "default_directives": "a", "request_body_no_files_limit": -5}`,
		`request_body_no_files_limit: got -5, want 0 (off) or 1 to 1099511627776 bytes`},
	{"raw type with parameters", `{"directives_map": {"a": []}, "default_directives": "a", "raw_body_content_types": ["application/octet-stream; q=1"]}`,
		`raw_body_content_types[0]: got "application/octet-stream; q=1", want a media type without parameters, e.g. "application/octet-stream"`},
	{"deny for unknown rule set", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"b": {}}}`,
		`deny_response["b"]: names no entry in directives_map; want one of "a"`},
	{"deny unknown key", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"code": 403}}}`,
		`deny_response["a"]: unknown key "code"; valid keys are status, body, content_type, headers`},
	{"deny bad status", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"status": 99}}}`,
		`deny_response["a"].status: got 99, want 0 (the rule's status) or 200 to 599`},
	{"deny status wrong type", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"status": "403"}}}`,
		`deny_response["a"].status: got JSON string, want an integer status code`},
	{"deny content type header", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"headers": {"Content-Type": "x/y"}}}}`,
		`deny_response["a"].headers["Content-Type"]: set the content type with content_type instead`},
	{"deny bad header name", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"headers": {"x y": "1"}}}}`,
		"deny_response[\"a\"].headers: name \"x y\": want a header name of letters, digits and !#$%&'*+-.^_`|~"},
	{"deny header value with newline", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": {"a": {"headers": {"x-a": "1\r\nx-b: 2"}}}}`,
		`deny_response["a"].headers["x-a"]: value "1\r\nx-b: 2": want printable characters without CR or LF`},
	{"deny not an object", `{"directives_map": {"a": []}, "default_directives": "a", "deny_response": []}`,
		`deny_response: got [], want an object of rule set names to {status, body, content_type, headers}`},
}

func TestPlugin_badOperabilityConfig(t *testing.T) {
	testBadConfigs(t, badOpsConfigCases)
}
