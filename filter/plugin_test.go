package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// ruleConfig returns a plugin configuration with one rule set "rules" made
// of these directives.
func ruleConfig(directives ...string) string {
	return configJSON(map[string]any{
		"directives_map":     map[string][]string{"rules": directives},
		"default_directives": "rules",
	})
}

func configJSON(v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// crsConfig is the production rule set: Coraza's recommended settings,
// blocking, the whole CRS.
var crsConfig = ruleConfig(
	"Include @recommended-conf",
	"SecRuleEngine On",
	"Include @crs-setup-conf",
	"Include @owasp_crs/*.conf",
)

// phaseRules has one blocking rule per phase, each with its own status, and
// one rule that only logs.
var phaseRules = []string{
	"SecRuleEngine On",
	"SecRequestBodyAccess On",
	"SecResponseBodyAccess On",
	"SecResponseBodyMimeType text/plain",
	`SecRule REQUEST_HEADERS:x-phase1 "@streq attack" "id:1001,phase:1,deny,status:401,log,msg:'phase 1 rule'"`,
	`SecRule REQUEST_BODY "@contains phase2-attack" "id:1002,phase:2,deny,status:402,log,msg:'phase 2 rule'"`,
	`SecRule RESPONSE_HEADERS:x-phase3 "@streq attack" "id:1003,phase:3,deny,status:403,log,msg:'phase 3 rule'"`,
	`SecRule RESPONSE_BODY "@contains phase4-attack" "id:1004,phase:4,deny,status:406,log,msg:'phase 4 rule'"`,
	`SecRule ARGS:log "@streq me" "id:1005,phase:1,pass,log,msg:'logged, not blocked',logdata:'%{MATCHED_VAR}'"`,
}

var phaseConfig = ruleConfig(phaseRules...)

var detectionOnlyConfig = ruleConfig(append([]string{"SecRuleEngine DetectionOnly"}, phaseRules[1:]...)...)

var perAuthorityConfig = configJSON(map[string]any{
	"directives_map": map[string][]string{
		"a": {"SecRuleEngine On", `SecRule REQUEST_HEADERS:x-block "@rx ." "id:2001,phase:1,deny,status:421,log"`},
		"b": {"SecRuleEngine On", `SecRule REQUEST_HEADERS:x-block "@rx ." "id:2002,phase:1,deny,status:422,log"`},
	},
	"default_directives":       "b",
	"per_authority_directives": map[string]string{"A.example.com": "a"},
})

func bodyLimitConfig(action string) string {
	return ruleConfig(
		"SecRuleEngine On",
		"SecRequestBodyAccess On",
		"SecRequestBodyLimit 100",
		"SecRequestBodyLimitAction "+action,
		`SecRule REQUEST_BODY "@contains attack" "id:3001,phase:2,deny,status:403,log"`,
	)
}

var labelledConfig = configJSON(map[string]any{
	"directives_map":     map[string][]string{"rules": phaseRules},
	"default_directives": "rules",
	"metric_labels":      map[string]string{"owner": "team-a", "env": "prod"},
})

var auditConfig = ruleConfig(append([]string{
	"SecAuditEngine RelevantOnly",
	"SecAuditLogType proxywasm",
	"SecAuditLogParts ABHZ",
	`SecAuditLogRelevantStatus "^4"`,
}, phaseRules...)...)

func chunks(parts ...string) [][]byte {
	out := make([][]byte, len(parts))
	for i, p := range parts {
		out[i] = []byte(p)
	}
	return out
}

var formHeader = [][2]string{{"content-type", "application/x-www-form-urlencoded"}}
var jsonHeader = [][2]string{{"content-type", "application/json"}}
var textResponse = [][2]string{{"content-type", "text/plain"}}

type exchangeCase struct {
	name   string
	config string
	ex     exchange

	wantStatus     int
	wantLocalReply bool
	wantUpstream   bool
	// wantRuleIDs must each appear as [id "N"] in a warn log line.
	wantRuleIDs []int
	// wantNoBlockLog, when set, asserts no "waf: interrupted" line.
	wantNoBlockLog bool
	// wantMetrics are exact metric values after the exchange.
	wantMetrics map[string]uint64
	// wantLog must appear in some log line.
	wantLog string
	// activeMetric is the open-transactions gauge name (default
	// waf_filter.tx.active); it must be 0 after the exchange.
	activeMetric string
}

var exchangeCases = []exchangeCase{
	{
		name:   "crs benign get passes",
		config: crsConfig,
		ex: exchange{path: "/index.html?page=2", headers: [][2]string{
			{"user-agent", "Mozilla/5.0"}, {"accept", "text/html"},
		}, respHeaders: [][2]string{{"content-type", "text/html"}}, respBody: chunks("<html>hello</html>")},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
		wantMetrics: map[string]uint64{"waf_filter.tx.total": 1},
	},
	{
		name:   "crs xss in query is blocked",
		config: crsConfig,
		ex: exchange{path: "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E", headers: [][2]string{
			{"user-agent", "Mozilla/5.0"}, {"accept", "text/html"},
		}},
		wantStatus: 403, wantLocalReply: true, wantUpstream: false,
		wantRuleIDs: []int{941100, 949110},
		wantMetrics: map[string]uint64{
			"waf_filter.tx.total": 1,
			"waf_filter.tx.interruptions_ruleid=949110_phase=http_request_body": 1,
		},
	},
	{
		name:   "crs sqli in urlencoded body is blocked",
		config: crsConfig,
		ex: exchange{method: "POST", path: "/login", headers: append([][2]string{
			{"user-agent", "Mozilla/5.0"}, {"accept", "*/*"},
		}, formHeader...), body: chunks("user=admin&pass=", "1' UNION SELECT password FROM users --")},
		wantStatus: 403, wantLocalReply: true, wantUpstream: false,
		wantRuleIDs: []int{942100, 949110},
	},
	{
		name:   "crs sqli in json body is blocked",
		config: crsConfig,
		ex: exchange{method: "POST", path: "/api", headers: append([][2]string{
			{"user-agent", "Mozilla/5.0"}, {"accept", "*/*"},
		}, jsonHeader...), body: chunks(`{"user": "admin", "q": "1' UNION SELECT password FROM users --"}`)},
		wantStatus: 403, wantLocalReply: true, wantUpstream: false,
		wantRuleIDs: []int{942100, 949110},
	},
	{
		name:   "crs benign json post passes",
		config: crsConfig,
		ex: exchange{method: "POST", path: "/api", headers: append([][2]string{
			{"user-agent", "Mozilla/5.0"}, {"accept", "*/*"},
		}, jsonHeader...), body: chunks(`{"user": "alice",`, ` "items": [1, 2, 3]}`),
			respHeaders: [][2]string{{"content-type", "application/json"}}, respBody: chunks(`{"ok": true}`)},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
	},
	{
		name:       "phase 1 rule blocks on request headers",
		config:     phaseConfig,
		ex:         exchange{headers: [][2]string{{"x-phase1", "attack"}}},
		wantStatus: 401, wantLocalReply: true, wantRuleIDs: []int{1001},
		wantMetrics: map[string]uint64{"waf_filter.tx.interruptions_ruleid=1001_phase=http_request_headers": 1},
	},
	{
		name:   "phase 2 rule blocks on request body",
		config: phaseConfig,
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks("a=1&b=phase2", "-attack&c=3")},
		wantStatus: 402, wantLocalReply: true, wantRuleIDs: []int{1002},
		wantMetrics: map[string]uint64{"waf_filter.tx.interruptions_ruleid=1002_phase=http_request_body": 1},
	},
	{
		name:   "phase 3 rule blocks on response headers",
		config: phaseConfig,
		ex: exchange{respHeaders: append([][2]string{{"x-phase3", "attack"}}, textResponse...),
			respBody: chunks("hello")},
		wantStatus: 403, wantLocalReply: true, wantUpstream: true, wantRuleIDs: []int{1003},
		wantMetrics: map[string]uint64{"waf_filter.tx.interruptions_ruleid=1003_phase=http_response_headers": 1},
	},
	{
		name:   "phase 4 rule resets the stream on response body",
		config: phaseConfig,
		ex: exchange{respHeaders: textResponse,
			respBody: chunks("some text then phase4", "-attack and more")},
		wantStatus: 0, wantLocalReply: false, wantUpstream: true, wantRuleIDs: []int{1004},
		wantMetrics: map[string]uint64{"waf_filter.tx.interruptions_ruleid=1004_phase=http_response_body": 1},
	},
	{
		name:   "response body of another type is not inspected",
		config: phaseConfig,
		ex: exchange{respHeaders: [][2]string{{"content-type", "application/octet-stream"}},
			respBody: chunks("phase4-attack")},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
	},
	{
		name:       "rule that passes is logged with its id",
		config:     phaseConfig,
		ex:         exchange{path: "/?log=me"},
		wantStatus: 200, wantUpstream: true, wantRuleIDs: []int{1005}, wantNoBlockLog: true,
		wantLog: `[msg "logged, not blocked"] [data "me"]`,
	},
	{
		name:       "detection only logs and never blocks",
		config:     detectionOnlyConfig,
		ex:         exchange{headers: [][2]string{{"x-phase1", "attack"}}},
		wantStatus: 200, wantUpstream: true, wantRuleIDs: []int{1001}, wantNoBlockLog: true,
	},
	{
		name:   "detection only never blocks a response body",
		config: detectionOnlyConfig,
		ex: exchange{respHeaders: textResponse,
			respBody: chunks("phase4-attack")},
		wantStatus: 200, wantUpstream: true, wantRuleIDs: []int{1004}, wantNoBlockLog: true,
	},
	{
		name:       "per authority rule set chosen by host without port",
		config:     perAuthorityConfig,
		ex:         exchange{authority: "a.EXAMPLE.com:8443", headers: [][2]string{{"x-block", "1"}}},
		wantStatus: 421, wantLocalReply: true, wantRuleIDs: []int{2001},
	},
	{
		// A trailing dot names the same host: it must not fall to the
		// default rule set (httpsyntax.AuthorityHost).
		name:       "per authority rule set chosen for the host with a trailing dot",
		config:     perAuthorityConfig,
		ex:         exchange{authority: "a.example.com.:8443", headers: [][2]string{{"x-block", "1"}}},
		wantStatus: 421, wantLocalReply: true, wantRuleIDs: []int{2001},
	},
	{
		name:       "other authorities get the default rule set",
		config:     perAuthorityConfig,
		ex:         exchange{authority: "b.example.com", headers: [][2]string{{"x-block", "1"}}},
		wantStatus: 422, wantLocalReply: true, wantRuleIDs: []int{2002},
	},
	{
		name:   "body above the limit with reject gets 413",
		config: bodyLimitConfig("Reject"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks(strings.Repeat("a", 60), strings.Repeat("b", 60))},
		wantStatus: 413, wantLocalReply: true,
		wantMetrics: map[string]uint64{"waf_filter.tx.interruptions_ruleid=0_phase=http_request_body": 1},
	},
	{
		name:   "body above the limit with process partial passes",
		config: bodyLimitConfig("ProcessPartial"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks(strings.Repeat("a", 60), strings.Repeat("b", 60), "attack", strings.Repeat("c", 60))},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
	},
	{
		name:   "process partial still inspects the first part",
		config: bodyLimitConfig("ProcessPartial"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks("x=attack", strings.Repeat("b", 60), strings.Repeat("c", 60))},
		wantStatus: 403, wantLocalReply: true, wantRuleIDs: []int{3001},
	},
	{
		name:       "engine off passes everything",
		config:     ruleConfig(append([]string{"SecRuleEngine Off"}, phaseRules[1:]...)...),
		ex:         exchange{headers: [][2]string{{"x-phase1", "attack"}}},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
		wantMetrics: map[string]uint64{"waf_filter.tx.total": 1},
	},
	{
		name: "redirect answers with its location",
		config: ruleConfig("SecRuleEngine On",
			`SecRule ARGS:go "@streq away" "id:4001,phase:1,redirect:https://example.com/blocked,log"`),
		ex:         exchange{path: "/?go=away"},
		wantStatus: 302, wantLocalReply: true, wantRuleIDs: []int{4001},
	},
	{
		name:       "request without body evaluates phase 2 on headers",
		config:     phaseConfig,
		ex:         exchange{method: "POST", headers: formHeader},
		wantStatus: 200, wantUpstream: true, wantNoBlockLog: true,
	},
	{
		name:       "reset before the response closes its transaction",
		config:     phaseConfig,
		ex:         exchange{path: "/?log=me", reset: true},
		wantStatus: 0, wantNoBlockLog: true, wantRuleIDs: []int{1005},
	},
	{
		name:   "reset stream closes its transaction",
		config: phaseConfig,
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks("a=1"), reset: true},
		wantStatus: 0, wantNoBlockLog: true,
		wantMetrics: map[string]uint64{"waf_filter.tx.total": 1},
	},
	{
		name:           "metric labels are encoded in sorted order",
		config:         labelledConfig,
		ex:             exchange{headers: [][2]string{{"x-phase1", "attack"}}},
		wantStatus:     401,
		wantLocalReply: true,
		wantMetrics: map[string]uint64{
			"waf_filter.tx.total_env=prod_owner=team-a":                                                1,
			"waf_filter.tx.interruptions_env=prod_owner=team-a_ruleid=1001_phase=http_request_headers": 1,
		},
		activeMetric: "waf_filter.tx.active_env=prod_owner=team-a",
	},
	{
		name:       "audit log goes to the proxy log",
		config:     auditConfig,
		ex:         exchange{headers: [][2]string{{"x-phase1", "attack"}}},
		wantStatus: 401, wantLocalReply: true, wantRuleIDs: []int{1001},
		wantLog: "-B--",
	},
}

func TestPlugin_exchange(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range exchangeCases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				got := p.do(t, tc.ex)
				if got.status != tc.wantStatus || got.localReply != tc.wantLocalReply || got.upstream != tc.wantUpstream {
					t.Errorf("got status %d, local reply %v, upstream %v; want %d, %v, %v",
						got.status, got.localReply, got.upstream, tc.wantStatus, tc.wantLocalReply, tc.wantUpstream)
				}
				logs := p.logs()
				for _, id := range tc.wantRuleIDs {
					if !hasLog(logs, "warn: ", fmt.Sprintf("[id \"%d\"]", id)) {
						t.Errorf("no warn log line with [id \"%d\"]; logs:\n%s", id, strings.Join(logs, "\n"))
					}
				}
				if tc.wantNoBlockLog && hasLog(logs, "", "waf: interrupted") {
					t.Errorf("unexpected interruption; logs:\n%s", strings.Join(logs, "\n"))
				}
				if tc.wantLog != "" && !hasLog(logs, "", tc.wantLog) {
					t.Errorf("no log line with %q; logs:\n%s", tc.wantLog, strings.Join(logs, "\n"))
				}
				for name, want := range tc.wantMetrics {
					if v, ok := p.metric(name); !ok || v != want {
						t.Errorf("metric %s: got %d (defined: %v), want %d", name, v, ok, want)
					}
				}
				active := tc.activeMetric
				if active == "" {
					active = metricActive
				}
				if v, ok := p.metric(active); !ok || v != 0 {
					t.Errorf("metric %s: got %d (defined: %v), want 0: a transaction was left open", active, v, ok)
				}
			})
		}
	})
}

func hasLog(logs []string, prefix, substr string) bool {
	for _, l := range logs {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// badConfigCases map each refused configuration to the exact critical log
// line the plugin start fails with.
// badConfigCase is a configuration the plugin must refuse, with the exact
// error it must refuse it with.
type badConfigCase struct{ name, config, want string }

// badConfigCases are errors in the WAF's keys and rule sets; errors in the
// document itself (JSON syntax, types, unknown keys) are pluginconfig's,
// tested there on both runners.
var badConfigCases = []badConfigCase{
	{
		name:   "default names no entry",
		config: `{"directives_map": {"a": ["SecRuleEngine On"], "b": []}, "default_directives": "c"}`,
		want:   `default_directives: "c" names no entry in directives_map; want one of "a", "b"`,
	},
	{
		name:   "default missing",
		config: `{"directives_map": {"a": ["SecRuleEngine On"]}}`,
		want:   `default_directives: missing; want one of "a" (the rule set for authorities not in per_authority_directives)`,
	},
	{
		name:   "empty rule set name",
		config: `{"directives_map": {"": ["SecRuleEngine On"]}, "default_directives": ""}`,
		want:   `directives_map: empty rule set name ""; name each rule set, e.g. "crs"`,
	},
	{
		name:   "empty directives map",
		config: `{"directives_map": {}, "default_directives": "crs"}`,
		want:   `directives_map: empty; add at least one rule set, e.g. {"crs": ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]}, or remove directives_map, default_directives and per_authority_directives to use that set`,
	},
	{
		name:   "per authority names no entry",
		config: `{"directives_map": {"a": []}, "default_directives": "a", "per_authority_directives": {"example.com": "x"}}`,
		want:   `per_authority_directives["example.com"]: "x" names no entry in directives_map; want one of "a"`,
	},
	{
		name:   "bad metric label value",
		config: `{"directives_map": {"a": []}, "default_directives": "a", "metric_labels": {"owner": "team_a"}}`,
		want:   `metric_labels["owner"]: value "team_a": want 1 to 64 letters, digits, '.' or '-' (no '_', which separates labels)`,
	},
	{
		name:   "unknown directive",
		config: `{"directives_map": {"a": ["SecRuleEngine On"], "b": ["SecRuleEngine On", "SecNoSuchDirective 1"]}, "default_directives": "a"}`,
		want:   `directives_map["b"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: unknown directive "secnosuchdirective"`,
	},
	{
		name:   "invalid rule",
		config: `{"directives_map": {"a": ["SecRule ARGS \"@rx (\" \"id:1,phase:1,deny\""]}, "default_directives": "a"}`,
		want:   "directives_map[\"a\"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: failed to compile the directive \"secrule\": error parsing regexp: missing closing ): `(?sm)(`",
	},
	{
		name:   "missing include",
		config: `{"directives_map": {"a": ["Include @owasp_crs/NO-SUCH-FILE.conf"]}, "default_directives": "a"}`,
		want:   `directives_map["a"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: failed to readfile: open @owasp_crs/NO-SUCH-FILE.conf: file does not exist`,
	},
}

func TestPlugin_badConfig(t *testing.T) {
	testBadConfigs(t, badConfigCases)
}

// testBadConfigs loads each case on both runners and checks the exact error.
func testBadConfigs(t *testing.T, cases []badConfigCase) {
	t.Helper()
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err == nil {
					p.close()
					t.Fatalf("load: got no error, want %q", tc.want)
				}
				if err.Error() != tc.want {
					t.Errorf("load error:\ngot  %s\nwant %s", err, tc.want)
				}
			})
		}
	})
}

// TestPlugin_missingProperties: Envoy answers NotFound for properties it does
// not know (older versions, other hosts); the filter must still inspect.
func TestPlugin_missingProperties(t *testing.T) {
	quietLogs(t)
	opt := proxytest.NewEmulatorOption().WithVMContext(&testVM{}).WithPluginConfiguration([]byte(phaseConfig))
	host, reset := proxytest.NewHostEmulator(opt)
	defer reset()
	if host.StartPlugin() != types.OnPluginStartStatusOK {
		t.Fatalf("plugin start: %v", host.GetCriticalLogs())
	}
	id := host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, [][2]string{
		{":method", "GET"}, {":path", "/"}, {":authority", "localhost"}, {"x-phase1", "attack"},
	}, true)
	lr := host.GetSentLocalResponse(id)
	host.CompleteHttpContext(id)
	if lr == nil || lr.StatusCode != 401 {
		t.Fatalf("got local reply %+v, want status 401", lr)
	}
	if !hasLog(host.GetWarnLogs(), "", `[client ""]`) {
		t.Errorf("want the rule log with an empty client address; warn logs: %v", host.GetWarnLogs())
	}
}
