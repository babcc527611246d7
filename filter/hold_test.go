package filter

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/upstreamtest"
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
	forEachHoldCase(t, func(t *testing.T, p loadedPlugin, tc holdCase, want holdWant, hold bool) {
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

// forEachHoldCase runs fn for every hold case with the mode off and on,
// on every runner, with the plugin loaded as the mode asks (the mode on
// with allow_on_headers_stop_iteration) and the expectation of the mode.
func forEachHoldCase(t *testing.T, fn func(t *testing.T, p loadedPlugin, tc holdCase, want holdWant, hold bool)) {
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
					fn(t, p, tc, want, mode.hold)
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
		// A tunnel's headers are never held: its bytes follow only once
		// the upstream has answered the headers, and end with it.
		for _, ex := range []exchange{
			{method: "CONNECT", headers: [][2]string{{"content-type", "application/octet-stream"}}, body: [][]byte{[]byte("tunnel bytes")}},
			{method: "GET", headers: [][2]string{{"upgrade", "websocket"}, {"connection", "upgrade"}}, body: [][]byte{[]byte("frame bytes")}},
		} {
			if got := p.do(t, ex); got.status != 200 || !got.upstream {
				t.Errorf("%s with a body (a tunnel): status %d, upstream %v; want 200, true (not held)", ex.method, got.status, got.upstream)
			}
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

// httpFronted is a loaded plugin served by its host's HTTP server
// (wasmhost.Handler for the wasm runner, the Node front for V8), in front
// of a real upstream.
type httpFronted interface {
	front(t testing.TB, upstream string) string
}

var recorderOnce struct {
	sync.Once
	r *upstreamtest.Recorder
}

// httpRecorder is the recording upstream the HTTP cases share (it lives as
// long as the test binary, like the V8 fronts in front of it).
func httpRecorder() *upstreamtest.Recorder {
	recorderOnce.Do(func() { recorderOnce.r = upstreamtest.New() })
	return recorderOnce.r
}

// TestPlugin_holdHeadersHTTP runs the hold-headers table through the
// hosts' HTTP servers to a recording upstream, and checks what the
// upstream got and when: with the mode off, the request headers of a POST
// whose body the WAF reads arrive before the client has sent its body (the
// client waits for them), and a blocked one is then cut off; with the mode
// on, the headers arrive only after the whole body, and a blocked request
// brings the upstream nothing. A phase-4 block is a reset after the
// response headers (off) or the block reply (on).
func TestPlugin_holdHeadersHTTP(t *testing.T) {
	rec := httpRecorder()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: 20 * time.Second}
	forEachHoldCase(t, func(t *testing.T, p loadedPlugin, tc holdCase, want holdWant, hold bool) {
		f, ok := p.(httpFronted)
		if !ok {
			t.Skip("this runner has no HTTP server")
		}
		base := f.front(t, rec.URL)
		runHoldHTTP(t, client, rec, base, tc, want, !hold)
		deadline := time.Now().Add(time.Second)
		for {
			v, ok := p.metric(metricActive)
			if ok && v == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("metric %s: got %d (defined: %v), want 0: a transaction was left open", metricActive, v, ok)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func runHoldHTTP(t *testing.T, client *http.Client, rec *upstreamtest.Recorder, base string, tc holdCase, want holdWant, streamed bool) {
	ex := tc.ex
	id := rec.NewID(upstreamtest.Reply{Status: ex.upstreamStatus(), Headers: ex.respHeaders, Body: ex.respBody, Gap: 2 * time.Millisecond})
	method, path := ex.method, ex.path
	if method == "" {
		method = "GET"
	}
	if path == "" {
		path = "/"
	}
	var sent []byte
	for _, c := range ex.body {
		sent = append(sent, c...)
	}
	size := int64(-1)
	if len(ex.body) == 1 {
		size = int64(len(sent))
	}
	var body io.Reader = http.NoBody
	// With the mode off, the client sends the body only once the request
	// headers reached the upstream: they must go before it.
	waitUpstream := streamed && want.upstreamHeaders && ex.body != nil
	var lastWrite atomic.Int64
	writeErr := make(chan error, 1)
	if ex.body != nil {
		pr, pw := io.Pipe()
		body = pr
		go func() {
			var err error
			if waitUpstream {
				err = rec.WaitHeaders(id, 5*time.Second)
			}
			for i, c := range ex.body {
				if i > 0 {
					time.Sleep(2 * time.Millisecond)
				}
				lastWrite.Store(time.Now().UnixNano())
				if _, werr := pw.Write(c); werr != nil {
					break
				}
			}
			pw.Close()
			writeErr <- err
		}()
	} else {
		writeErr <- nil
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	if ex.body == nil {
		req.ContentLength = 0
	}
	req.Host = "localhost"
	for _, h := range ex.headers {
		if h[0] == "content-length" {
			req.ContentLength, _ = strconv.ParseInt(h[1], 10, 64)
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	req.Header.Set(upstreamtest.IDHeader, id)
	resp, err := client.Do(req)
	var got []byte
	var readErr error
	if err == nil {
		got, readErr = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if werr := <-writeErr; werr != nil {
		t.Errorf("the request headers did not reach the upstream before the body was sent: %v", werr)
	}
	switch {
	case want.status == 0:
		// A reset after the response headers went out: the client has
		// them, then the response is cut off.
		if err != nil || resp.StatusCode != ex.upstreamStatus() || readErr == nil {
			t.Errorf("client: got %v, read error %v; want status %d and then a cut-off body", respSummary(resp, err), readErr, ex.upstreamStatus())
		}
	case err != nil || readErr != nil:
		t.Fatalf("client: %v, read error %v; want status %d", err, readErr, want.status)
	case resp.StatusCode != want.status || want.body != "" && string(got) != want.body:
		t.Errorf("client: got status %d body %q; want %d %q", resp.StatusCode, got, want.status, want.body)
	}

	if !want.upstreamHeaders {
		// Whatever the host sends upstream goes before the local reply.
		time.Sleep(50 * time.Millisecond)
		if g := rec.Get(id); g != nil {
			t.Errorf("upstream: got a request (%d body bytes, complete %v), want nothing", len(g.Body()), g.Complete)
		}
		return
	}
	g, err := rec.WaitEnd(id, 5*time.Second)
	if err != nil {
		t.Fatalf("upstream: %v", err)
	}
	if want.upstream {
		if !g.Complete || !bytes.Equal(g.Body(), sent) {
			t.Errorf("upstream: complete %v, aborted %v, body %q; want the whole request, body %q", g.Complete, g.Aborted, g.Body(), sent)
		}
	} else if g.Complete || !g.Aborted {
		t.Errorf("upstream: complete %v, aborted %v (%d body bytes); want the headers and then the request cut off", g.Complete, g.Aborted, len(g.Body()))
	}
	if !streamed && ex.body != nil && g.HeadersAt.UnixNano() < lastWrite.Load() {
		t.Errorf("upstream: the request headers arrived %v before the client sent the last of the body; want them held until it was inspected",
			time.Duration(lastWrite.Load()-g.HeadersAt.UnixNano()))
	}
}

func respSummary(resp *http.Response, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	return "status " + strconv.Itoa(resp.StatusCode)
}
