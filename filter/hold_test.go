package filter

import (
	"bytes"
	"strings"
	"testing"
)

// holdRules read request and response bodies: a SQL injection in the JSON
// body is blocked in phase 2, a MySQL error page in phase 4, both with a
// deny response of their own.
var holdRules = []string{
	"SecRuleEngine On",
	"SecRequestBodyAccess On",
	"SecResponseBodyAccess On",
	"SecResponseBodyMimeType text/html",
	`SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,pass,nolog,t:none,t:lowercase,ctl:requestBodyProcessor=JSON"`,
	`SecRule ARGS "@detectSQLi" "id:1,phase:2,deny,status:403,log,msg:'SQL injection'"`,
	`SecRule RESPONSE_BODY "@rx You have an error in your SQL syntax" "id:2,phase:4,deny,status:403,log,msg:'SQL error leak'"`,
}

func holdConfig(hold bool, extra map[string]any) string {
	m := map[string]any{
		"directives_map":     map[string][]string{"rules": holdRules},
		"default_directives": "rules",
		"deny_response":      map[string]any{"rules": map[string]any{"body": "blocked by the WAF"}},
	}
	if hold {
		m["hold_headers_until_inspected"] = true
	}
	for k, v := range extra {
		m[k] = v
	}
	return configJSON(m)
}

var (
	jsonHeaders = [][2]string{{"content-type", "application/json"}}
	sqliJSON    = []byte(`{"q": "1' OR '1'='1' --"}`)
	benignJSON  = []byte(`{"item": "wool jacket", "size": "M"}`)
	sqlErrPage  = []byte("<html><body>You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version</body></html>")
	htmlPage    = []byte("<html><body><p>hello</p></body></html>")
	htmlHeaders = [][2]string{{"content-type", "text/html"}}
)

// holdCase is one exchange of the hold-headers table, with what the
// client and the upstream see in each mode.
type holdCase struct {
	name string
	ex   exchange
	// extra keys of the plugin configuration
	extra map[string]any
	// what the client gets (0: a reset), and what the upstream saw, with
	// hold_headers_until_inspected off and on.
	off, on holdWant
}

type holdWant struct {
	status          int
	body            string // "" for any
	upstreamHeaders bool   // the upstream got the request headers
	upstream        bool   // and the whole request
}

var holdCases = []holdCase{
	{
		name: "blocked JSON POST",
		ex:   exchange{method: "POST", headers: jsonHeaders, body: [][]byte{sqliJSON}},
		// Off: the headers went upstream at once; the upstream sees the
		// request reset. On: it sees nothing.
		off: holdWant{status: 403, body: "blocked by the WAF", upstreamHeaders: true},
		on:  holdWant{status: 403, body: "blocked by the WAF"},
	},
	{
		name: "benign JSON POST",
		ex:   exchange{method: "POST", headers: jsonHeaders, body: [][]byte{benignJSON}, respHeaders: htmlHeaders, respBody: [][]byte{htmlPage}},
		off:  holdWant{status: 200, body: string(htmlPage), upstreamHeaders: true, upstream: true},
		on:   holdWant{status: 200, body: string(htmlPage), upstreamHeaders: true, upstream: true},
	},
	{
		name: "chunked benign body",
		ex:   exchange{method: "POST", headers: jsonHeaders, body: [][]byte{benignJSON[:10], benignJSON[10:20], benignJSON[20:]}},
		off:  holdWant{status: 200, upstreamHeaders: true, upstream: true},
		on:   holdWant{status: 200, upstreamHeaders: true, upstream: true},
	},
	{
		name: "chunked blocked body",
		ex:   exchange{method: "POST", headers: jsonHeaders, body: [][]byte{sqliJSON[:8], sqliJSON[8:]}},
		off:  holdWant{status: 403, upstreamHeaders: true},
		on:   holdWant{status: 403},
	},
	{
		name:  "streamed body past the limit",
		ex:    exchange{method: "POST", headers: jsonHeaders, body: [][]byte{bytes.Repeat([]byte(" "), 80), []byte(`{"a": 1}`)}},
		extra: map[string]any{"request_body_no_files_limit": 64},
		off:   holdWant{status: 413, upstreamHeaders: true},
		on:    holdWant{status: 413},
	},
	{
		name:  "declared body past the limit",
		ex:    exchange{method: "POST", headers: [][2]string{{"content-type", "application/json"}, {"content-length", "200"}}, body: [][]byte{bytes.Repeat([]byte(" "), 200)}},
		extra: map[string]any{"request_body_no_files_limit": 64},
		off:   holdWant{status: 413},
		on:    holdWant{status: 413},
	},
	{
		name: "MySQL error page",
		ex:   exchange{respHeaders: htmlHeaders, respBody: [][]byte{sqlErrPage}},
		// Off: the headers went downstream; Envoy can only reset. On:
		// the client gets the block reply.
		off: holdWant{status: 0, upstreamHeaders: true, upstream: true},
		on:  holdWant{status: 403, body: "blocked by the WAF", upstreamHeaders: true, upstream: true},
	},
	{
		name: "MySQL error page in chunks",
		ex:   exchange{respHeaders: htmlHeaders, respBody: [][]byte{sqlErrPage[:30], sqlErrPage[30:]}},
		off:  holdWant{status: 0, upstreamHeaders: true, upstream: true},
		on:   holdWant{status: 403, body: "blocked by the WAF", upstreamHeaders: true, upstream: true},
	},
	{
		name: "benign HTML page",
		ex:   exchange{respHeaders: htmlHeaders, respBody: [][]byte{htmlPage[:7], htmlPage[7:]}},
		off:  holdWant{status: 200, body: string(htmlPage), upstreamHeaders: true, upstream: true},
		on:   holdWant{status: 200, body: string(htmlPage), upstreamHeaders: true, upstream: true},
	},
	{
		name: "response not inspected streams",
		ex:   exchange{respHeaders: [][2]string{{"content-type", "image/png"}}, respBody: [][]byte{sqlErrPage}},
		off:  holdWant{status: 200, body: string(sqlErrPage), upstreamHeaders: true, upstream: true},
		on:   holdWant{status: 200, body: string(sqlErrPage), upstreamHeaders: true, upstream: true},
	},
}

// TestPlugin_holdHeaders runs every case with hold_headers_until_inspected
// off (Envoy as it is by default) and on (with
// allow_on_headers_stop_iteration, as the mode asks), on every runner.
func TestPlugin_holdHeaders(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, mode := range []struct {
			name string
			hold bool
		}{{"off", false}, {"on", true}} {
			for _, tc := range holdCases {
				t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
					p, err := r.loadEnvoy(t, holdConfig(mode.hold, tc.extra), envoyConfig{stopIteration: mode.hold})
					if err != nil {
						t.Fatalf("load: %v", err)
					}
					defer p.close()
					want := tc.off
					if mode.hold {
						want = tc.on
					}
					got := p.do(t, tc.ex)
					if got.status != want.status || (want.body != "" && string(got.body) != want.body) ||
						got.upstreamHeaders != want.upstreamHeaders || got.upstream != want.upstream {
						t.Errorf("got status %d body %q, upstream saw headers %v, whole request %v; want %d %q, %v, %v",
							got.status, got.body, got.upstreamHeaders, got.upstream, want.status, want.body, want.upstreamHeaders, want.upstream)
					}
					if v, ok := p.metric(metricActive); !ok || v != 0 {
						t.Errorf("metric %s: got %d (defined: %v), want 0: a transaction was left open", metricActive, v, ok)
					}
				})
			}
		}
	})
}

// TestPlugin_holdHeadersWithoutFlag: with the mode on in an Envoy without
// allow_on_headers_stop_iteration, a held request gets no body callback;
// the plugin answers it 500 from its tick after hold_headers_timeout_ms,
// with a log line that names the flag, instead of leaving it hung. A
// request without a body is not held and passes. The native emulator does
// not honour proxy_set_effective_context, through which the tick answers
// the stream, so this runs on the built plugin only.
func TestPlugin_holdHeadersWithoutFlag(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		if _, native := r.(nativeRunner); native {
			t.Skip("the emulator answers a local reply only in the active context, not one made effective from a tick")
		}
		p, err := r.loadEnvoy(t, holdConfig(true, map[string]any{"hold_headers_timeout_ms": 100}), envoyConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		if got := p.do(t, exchange{}); got.status != 200 || !got.upstream {
			t.Errorf("GET: status %d, upstream %v; want 200, true", got.status, got.upstream)
		}
		got := p.do(t, exchange{method: "POST", headers: jsonHeaders, body: [][]byte{benignJSON}})
		if got.status != 500 || !got.localReply || got.upstreamHeaders {
			t.Errorf("held POST: status %d, local reply %v, upstream saw headers %v; want 500, true, false", got.status, got.localReply, got.upstreamHeaders)
		}
		logs := p.logs()
		if !hasLog(logs, "error: ", "allow_on_headers_stop_iteration") {
			t.Errorf("no error log line naming allow_on_headers_stop_iteration; logs:\n%s", strings.Join(logs, "\n"))
		}
		if v, ok := p.metric(metricHoldTimeouts); !ok || v != 1 {
			t.Errorf("metric %s: got %d (defined: %v), want 1", metricHoldTimeouts, v, ok)
		}
	})
}

// TestConfig_holdHeadersTimeout: the bounds of hold_headers_timeout_ms, at
// the limit and one past it.
func TestConfig_holdHeadersTimeout(t *testing.T) {
	for n, ok := range map[int]bool{100: true, 99: false, 600000: true, 600001: false} {
		_, err := parseConfig([]byte(holdConfig(true, map[string]any{"hold_headers_timeout_ms": n})))
		if ok != (err == nil) {
			t.Errorf("hold_headers_timeout_ms %d: %v, want accepted %v", n, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "hold_headers_timeout_ms: got") {
			t.Errorf("hold_headers_timeout_ms %d: error %q does not name the key", n, err)
		}
	}
}
