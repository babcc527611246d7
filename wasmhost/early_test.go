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

	"github.com/wafguard/wafguard/internal/earlycases"
	"github.com/wafguard/wafguard/internal/plugintest"
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

// The cases both hosts run (internal/earlycases): the callbacks the plugin
// sees, and what the client and the upstream get.
func TestEarly_cases(t *testing.T) {
	cases, err := earlycases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			up := &earlyUp{r: Response{Status: 200, Body: earlycases.Chunks(c.RespBody)}}
			req := &Request{Headers: post("/"), Body: earlycases.Chunks(c.Body), ResponseAfter: c.RespAfter, ResponseEndsEarly: c.EndsEarly}
			opts := Options{StreamIdleTimeout: time.Duration(c.IdleMS) * time.Millisecond}
			r, lines := earlyExchange(t, c.Words, PluginConfig{AllowOnHeadersStopIteration: c.StopIteration}, opts, req, up)
			wantLines(t, lines, c.Callbacks...)
			if r.Status != c.Status || r.LocalReply != c.LocalReply || string(r.Body) != c.Resp || string(r.UpstreamBody) != c.UpstreamBody {
				t.Errorf("client got %d (local reply %v) %q, upstream %q; want %d (%v) %q, upstream %q",
					r.Status, r.LocalReply, r.Body, r.UpstreamBody, c.Status, c.LocalReply, c.Resp, c.UpstreamBody)
			}
		})
	}
}

// A plain Upstream that answers early is called with what the filter had
// released then: the first chunk when the filter lets chunks pass, nothing
// when it buffers the body.
func TestEarly_upstreamSeesWhatWasReleased(t *testing.T) {
	for words, want := range map[string]string{"pass": "a", "hold resume": ""} {
		up := &earlyUp{r: Response{Status: 200}}
		req := &Request{Headers: post("/"), Body: chunks("a", "b"), ResponseAfter: 1}
		r, _ := earlyExchange(t, words, PluginConfig{}, Options{}, req, up)
		if len(up.seen) != 1 || string(up.seen[0].Body) != want || r.Status != 200 || string(r.UpstreamBody) != "ab" {
			t.Errorf("%s: the upstream answered having seen %q (called %d times), result %d, whole body %q; want %q, 200, ab",
				words, seenBody(up), len(up.seen), r.Status, r.UpstreamBody, want)
		}
	}
}

func seenBody(u *earlyUp) string {
	if len(u.seen) == 0 {
		return ""
	}
	return string(u.seen[0].Body)
}

func indexLine(lines []string, l string) int {
	for i, x := range lines {
		if x == l {
			return i
		}
	}
	return -1
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

// The plugin itself (build/main.wasm) behind Handler, with an upstream
// that writes its response headers before it reads the body: an attack
// the client sends after the upstream's answer is blocked, and the
// upstream reads none of the body; a benign body reaches it whole.
func TestHandler_earlyResponsePlugin(t *testing.T) {
	wasm := plugintest.Read(t)
	type seen struct {
		body []byte
		err  error
	}
	got := make(chan seen, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		b, err := io.ReadAll(r.Body)
		got <- seen{b, err}
		_, _ = io.WriteString(w, "ok")
	}))
	defer backend.Close()
	up, err := NewHTTPUpstream(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Compile(context.Background(), wasm, Options{CacheDir: testCacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	cfg := `{"directives_map": {"r": ["SecRuleEngine On", "SecRequestBodyAccess On",
	  "SecRule ARGS_POST \"@rx <script\" \"id:1,phase:2,deny,status:403,t:lowercase\""]}, "default_directives": "r"}`
	pool, err := m.NewPool(context.Background(), PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	srv := httptest.NewServer(&Handler{Pool: pool, Upstream: up})
	defer srv.Close()

	for _, tc := range []struct {
		second     string
		status     int
		upstreamed string
	}{
		{"&q=%3Cscript%3Ealert(1)", 403, ""},
		{"&q=hello", 200, "a=1&q=hello"},
	} {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte("a=1"))
			// The upstream answers meanwhile, and the filter holds its
			// response.
			time.Sleep(200 * time.Millisecond)
			_, _ = pw.Write([]byte(tc.second))
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", srv.URL+"/form", pr)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		var s seen
		select {
		case s = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream never answered")
		}
		if resp.StatusCode != tc.status || string(s.body) != tc.upstreamed {
			t.Errorf("second part %q: client got %d, the upstream read %q (%v); want %d and %q", tc.second, resp.StatusCode, s.body, s.err, tc.status, tc.upstreamed)
		}
	}
}
