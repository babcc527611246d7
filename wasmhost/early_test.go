package wasmhost

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of the rules for an upstream response that arrives before the
// request has ended (docs/envoy-host-rules.md 2.6), with the "early" test
// plugin, which logs every callback.

// earlyUp answers with r and records what it saw of the request when it
// answered.
type earlyUp struct {
	mu   sync.Mutex
	r    Response
	seen []*UpstreamRequest
}

func (u *earlyUp) RoundTrip(_ context.Context, req *UpstreamRequest) (*Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen = append(u.seen, req)
	r := u.r
	return &r, nil
}

func chunks(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, c := range s {
		out[i] = []byte(c)
	}
	return out
}

// earlyExchange runs one exchange through the early plugin configured with
// words, and returns the result and the plugin's callback lines.
func earlyExchange(t *testing.T, words string, cfg PluginConfig, opts Options, req *Request, up Upstream) (Result, []string) {
	t.Helper()
	m := compilePlugin(t, "early", opts)
	cfg.Configuration = []byte(words)
	vm, rec := newVM(t, m, cfg)
	r := vm.Exchange(context.Background(), req, up)
	var lines []string
	for _, l := range rec.all() {
		lines = append(lines, strings.TrimPrefix(l, "info: "))
	}
	return r, lines
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("callbacks:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A response that arrives after chunk 1 of 3 reaches on_response_headers
// and on_response_body before chunk 2; its end follows the request's end
// (a full-duplex server ends once it has read the request). The upstream
// answered having seen chunk 1 only.
func TestEarly_responseBetweenChunks(t *testing.T) {
	up := &earlyUp{r: Response{Status: 200, Body: chunks("r1", "r2")}}
	req := &Request{Headers: post("/"), Body: chunks("a", "b", "c"), ResponseAfter: 1}
	r, lines := earlyExchange(t, "pass", PluginConfig{}, Options{}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		`response_body 2 "r1" eos=false`,
		`response_body 2 "r2" eos=false`,
		`request_body 1 "b" eos=false`,
		`request_body 1 "c" eos=true`,
		`response_body 0 "" eos=true`,
		"done held=false")
	if r.Status != 200 || string(r.Body) != "r1r2" || !r.Complete || !r.Upstream || string(r.UpstreamBody) != "abc" {
		t.Errorf("result %+v", r)
	}
	if len(up.seen) != 1 || string(up.seen[0].Body) != "a" {
		t.Errorf("the upstream answered having seen %+v, want chunk a", up.seen)
	}
}

// Response headers the filter holds do not stop the request: its body
// callbacks keep coming (buffered here, each with the total so far), and a
// proxy_continue_stream(1) from the last one releases the response after
// the callback; the body held under StopAll reaches the filter in one
// callback. Nothing of the body reached the upstream before the filter
// released it.
func TestEarly_heldResponseResumedFromRequest(t *testing.T) {
	up := &earlyUp{r: Response{Status: 200, Body: chunks("r1", "r2")}}
	req := &Request{Headers: post("/"), Body: chunks("a", "b", "c"), ResponseAfter: 1}
	r, lines := earlyExchange(t, "hold resume", PluginConfig{}, Options{}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		`request_body 2 "ab" eos=false`,
		`request_body 3 "abc" eos=true`,
		"resume",
		`response_body 4 "r1r2" eos=false`,
		`response_body 0 "" eos=true`,
		"done held=false")
	if r.Status != 200 || string(r.Body) != "r1r2" || !r.Complete || !r.Upstream || string(r.UpstreamBody) != "abc" {
		t.Errorf("result %+v", r)
	}
	if len(up.seen) != 1 || len(up.seen[0].Body) != 0 {
		t.Errorf("the upstream answered having seen %+v, want no body", up.seen)
	}
}

// With allow_on_headers_stop_iteration the response body comes to the
// filter while its headers are held, and a body Pause buffers it; from the
// request's last callback the filter reads the whole buffered response
// body (Context::getBuffer). Under StopAll it reads nothing: the body is
// held by Envoy, unseen.
func TestEarly_responseBodyFromRequestCallback(t *testing.T) {
	up := &earlyUp{r: Response{Status: 200, Body: chunks("r1", "r2")}}
	req := &Request{Headers: post("/"), Body: chunks("a", "b"), ResponseAfter: 1}
	r, lines := earlyExchange(t, "hold resume peek", PluginConfig{AllowOnHeadersStopIteration: true}, Options{}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		`response_body 2 "r1" eos=false`,
		`response_body 4 "r1r2" eos=false`,
		`request_body 2 "ab" eos=true`,
		`peek "r1r2" <nil>`,
		"resume",
		`response_body 0 "" eos=true`,
		"done held=false")
	if r.Status != 200 || string(r.Body) != "r1r2" || !r.Complete {
		t.Errorf("result %+v", r)
	}

	_, lines = earlyExchange(t, "hold resume peek", PluginConfig{}, Options{}, req, up)
	if !containsLine(lines, `peek "" error status returned by host: not found`) {
		t.Errorf("under StopAll the filter read the held body: %q", lines)
	}
}

func containsLine(lines []string, l string) bool { return indexLine(lines, l) >= 0 }

func indexLine(lines []string, l string) int {
	for i, x := range lines {
		if x == l {
			return i
		}
	}
	return -1
}

// A local reply from a request callback while the upstream's response
// headers are held is direct: it replaces the held response, no response
// callback runs for it, and the upstream got none of the body.
func TestEarly_localReplyReplacesHeldResponse(t *testing.T) {
	up := &earlyUp{r: Response{Status: 200, Body: chunks("r1")}}
	req := &Request{Headers: post("/"), Body: chunks("a", "<attack>", "c"), ResponseAfter: 1}
	r, lines := earlyExchange(t, "hold reply", PluginConfig{}, Options{}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		`request_body 9 "a<attack>" eos=false`,
		`request_body 10 "a<attack>c" eos=true`,
		"done held=true")
	if r.Status != 403 || !r.LocalReply || string(r.Body) != "blocked" || hdr(r.Headers, "x-early") != "reply" || r.Upstream || len(r.UpstreamBody) != 0 {
		t.Errorf("result %+v, want the direct 403 and nothing of the body upstream", r)
	}
}

// A response that ends before the request stops it: Envoy gives the filter
// no more request data and cannot continue the request, so a filter that
// holds the response until the request ends waits until the stream idle
// timeout, which answers directly (the response headers exist). A
// response the filter lets pass ends the stream when it is complete.
func TestEarly_responseEndsFirst(t *testing.T) {
	up := &earlyUp{r: Response{Status: 200, Body: chunks("r1")}}
	req := &Request{Headers: post("/"), Body: chunks("a", "b", "c"), ResponseAfter: 1, ResponseEndsEarly: true}
	r, lines := earlyExchange(t, "hold resume", PluginConfig{}, Options{StreamIdleTimeout: 200 * time.Millisecond}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		"done held=true")
	if r.Status != 408 || !r.LocalReply || r.Details != "stream_idle_timeout" || len(r.UpstreamBody) != 0 {
		t.Errorf("result %+v, want the 408 of the idle timeout", r)
	}

	r, lines = earlyExchange(t, "pass", PluginConfig{}, Options{}, req, up)
	wantLines(t, lines,
		"request_headers eos=false",
		`request_body 1 "a" eos=false`,
		"response_headers 200 eos=false request_end=false",
		`response_body 2 "r1" eos=true`,
		"done held=false")
	if r.Status != 200 || string(r.Body) != "r1" || !r.Complete || r.Upstream || string(r.UpstreamBody) != "a" {
		t.Errorf("result %+v, want the response whole, chunk a upstream and no more", r)
	}
}

// earlyStreamUp is a StreamingUpstream that answers at once, then reads
// the request body to its end or its reset.
type earlyStreamUp struct {
	body chan []byte
	err  chan error
}

func (u *earlyStreamUp) RoundTrip(context.Context, *UpstreamRequest) (*Response, error) {
	return nil, errors.New("not used")
}

func (u *earlyStreamUp) Open(_ context.Context, _ *UpstreamRequest, body *UpstreamBody) (*Response, error) {
	pr, pw := io.Pipe()
	go func() {
		b, err := io.ReadAll(body)
		u.body <- b
		u.err <- err
		_, _ = pw.Write([]byte("echo:"))
		_, _ = pw.Write(b)
		pw.Close()
	}()
	return &Response{Status: 200, BodyReader: pr}, nil
}

// A StreamingUpstream that answers before reading the body: the filter
// gets the response headers while the body still arrives; a local reply at
// the end replaces the held response and resets the upstream request,
// which read nothing.
func TestEarly_streamingUpstream(t *testing.T) {
	up := &earlyStreamUp{body: make(chan []byte, 1), err: make(chan error, 1)}
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("a"))
		time.Sleep(100 * time.Millisecond)
		_, _ = pw.Write([]byte("<attack>"))
		pw.Close()
	}()
	req := &Request{Headers: post("/"), BodyReader: pr, Live: true}
	r, lines := earlyExchange(t, "hold reply", PluginConfig{}, Options{}, req, up)
	// The answer comes while "a" is read, before or after it.
	if i := indexLine(lines, "response_headers 200 eos=false request_end=false"); i < 0 || i > indexLine(lines, `request_body 9 "a<attack>" eos=false`) {
		t.Errorf("the response did not come before the rest of the body: %q", lines)
	}
	if n := len(lines); n < 2 || lines[n-2] != `request_body 9 "a<attack>" eos=true` || lines[n-1] != "done held=true" {
		t.Errorf("callbacks %q, want the end of the body with the whole, then the end of the stream", lines)
	}
	if r.Status != 403 || !r.LocalReply || len(r.UpstreamBody) != 0 {
		t.Errorf("result %+v", r)
	}
	if b, err := <-up.body, <-up.err; len(b) != 0 || !errors.Is(err, ErrUpstreamReset) {
		t.Errorf("the upstream read %q (%v), want nothing and ErrUpstreamReset", b, err)
	}
}

// Through Handler (cmd/wafhost's server) and HTTPUpstream: an upstream
// that writes its response headers before it reads the body has them
// reach the filter and the client while the client is still sending; the
// client sends the rest only once it has them. The response closes the
// HTTP/1 connection, as Envoy's does when it starts before the request
// ended.
func TestHandler_earlyResponse(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "early;")
		_ = http.NewResponseController(w).Flush()
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	defer backend.Close()
	up, err := NewHTTPUpstream(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	m := compilePlugin(t, "early", Options{})
	rec := &logRecorder{}
	pool, err := m.NewPool(context.Background(), PluginConfig{Name: "srv", Configuration: []byte("pass"), LogSink: rec.sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &Handler{Pool: pool, Upstream: up}
	srv := httptest.NewServer(h)
	defer srv.Close()

	pr, pw := io.Pipe()
	gotHeaders := make(chan struct{})
	go func() {
		_, _ = pw.Write([]byte("first"))
		select {
		case <-gotHeaders:
		case <-time.After(5 * time.Second):
		}
		_, _ = pw.Write([]byte("second"))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", srv.URL+"/", pr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.has("info: response_headers 200 eos=false request_end=false") {
		t.Errorf("the client got the headers before the filter: %q", rec.all())
	}
	close(gotHeaders)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "early;firstsecond" || err != nil || !resp.Close {
		t.Errorf("got %d %q (%v), connection close %v; want 200 \"early;firstsecond\" and the connection closed", resp.StatusCode, b, err, resp.Close)
	}
}
