package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/upstreamtest"
)

// streamUp is a StreamingUpstream that reports when it was opened and
// reads the body to its end, or to the reset.
type streamUp struct {
	echo
	opened chan struct{}
	body   []byte
	err    error
}

func newStreamUp() *streamUp { return &streamUp{opened: make(chan struct{})} }

func (u *streamUp) Open(ctx context.Context, r *UpstreamRequest, body *UpstreamBody) (*Response, error) {
	close(u.opened)
	u.body, u.err = io.ReadAll(body)
	if u.err != nil {
		return nil, u.err
	}
	return &Response{Status: 200, Body: [][]byte{u.body}}, nil
}

// A StreamingUpstream is opened once the request headers continue, before
// the client has sent the body; the body follows as the filter releases
// it (the "body" plugin buffers it to the end and upper-cases it).
func TestExchange_streamingUpstreamOpensOnHeaders(t *testing.T) {
	m := compilePlugin(t, "body", Options{})
	vm, _ := newVM(t, m, PluginConfig{})
	up := newStreamUp()
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("abc"))
		select {
		case <-up.opened:
		case <-time.After(5 * time.Second):
		}
		_, _ = pw.Write([]byte("def"))
		pw.Close()
	}()
	r := vm.Exchange(context.Background(), &Request{Headers: post("/"), BodyReader: pr, Live: true}, up)
	select {
	case <-up.opened:
	default:
		t.Fatal("the upstream was never opened")
	}
	if r.Status != 200 || string(up.body) != "ABCDEF" || up.err != nil || !r.Upstream {
		t.Errorf("result %d %q (upstream whole: %v), upstream body %q err %v; want 200 and ABCDEF", r.Status, r.Body, r.Upstream, up.body, up.err)
	}
	if up.count() != 0 {
		t.Errorf("RoundTrip called %d times; want Open only", up.count())
	}
}

// A local reply after the headers went upstream (413 past the buffer
// limit) and a client that goes away both reset the upstream request.
func TestExchange_streamingUpstreamReset(t *testing.T) {
	m := compilePlugin(t, "body", Options{BufferLimit: 4})
	vm, _ := newVM(t, m, PluginConfig{})
	for _, tc := range []struct {
		name   string
		req    *Request
		status int
	}{
		{"413", &Request{Headers: post("/"), Body: [][]byte{[]byte("abc"), []byte("def")}}, 413},
		{"client reset", &Request{Headers: post("/"), Body: [][]byte{[]byte("ab")}, Reset: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newStreamUp()
			r := vm.Exchange(context.Background(), tc.req, up)
			select {
			case <-up.opened:
			default:
				t.Fatal("the upstream was never opened")
			}
			if r.Status != tc.status || !errors.Is(up.err, ErrUpstreamReset) || r.Upstream || !r.UpstreamHeaders {
				t.Errorf("status %d, upstream err %v, whole %v, headers %v; want %d, ErrUpstreamReset, false, true",
					r.Status, up.err, r.Upstream, r.UpstreamHeaders, tc.status)
			}
		})
	}
}

// Through Handler and HTTPUpstream: the response headers reach the client
// while the upstream still holds the body back, and a benign request and
// its chunked body reach a recording upstream whole.
func TestHandler_streamsBothWays(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, "late body")
	}))
	defer backend.Close()
	up, err := NewHTTPUpstream(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newServer(t, "passthrough", up)
	resp, err := http.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "late body" || err != nil {
		t.Errorf("got %d %q %v; want 200 \"late body\"", resp.StatusCode, b, err)
	}

	rec := upstreamtest.New()
	defer rec.Close()
	rup, err := NewHTTPUpstream(rec.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv2, _ := newServer(t, "passthrough", rup)
	id := rec.NewID(upstreamtest.Reply{Body: [][]byte{[]byte("ok")}})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("part one,"))
		// The headers and the first part reach the upstream before the
		// client sends the rest.
		_ = rec.WaitHeaders(id, 5*time.Second)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if g := rec.Get(id); g != nil && len(g.Body()) > 0 {
				break
			}
		}
		_, _ = pw.Write([]byte(" part two"))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", srv2.URL+"/post", pr)
	req.Header.Set(upstreamtest.IDHeader, id)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	g, err := rec.WaitEnd(id, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(b) != "ok" || !g.Complete || string(g.Body()) != "part one, part two" || len(g.Chunks) < 2 {
		t.Errorf("client %d %q; upstream complete %v body %q in %d reads; want 200 ok, the whole body in at least 2 reads",
			resp.StatusCode, b, g.Complete, g.Body(), len(g.Chunks))
	}
}

// TestEchoUpstream_streams: the built-in upstream is a streaming one: it
// answers with the body the filter released, chunk by chunk, once the
// request completed, and gives no answer to a request reset before that.
func TestEchoUpstream_streams(t *testing.T) {
	var up Upstream = EchoUpstream{}
	su, ok := up.(StreamingUpstream)
	if !ok {
		t.Fatal("EchoUpstream is not a StreamingUpstream")
	}
	req := &UpstreamRequest{Headers: [][2]string{{":method", "POST"}, {":path", "/anything"}, {"content-type", "text/plain"}}}
	body := newUpstreamBody()
	type answer struct {
		resp *Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := su.Open(context.Background(), req, body)
		got <- answer{resp, err}
	}()
	body.push([]byte("hello "))
	select {
	case a := <-got:
		t.Fatalf("answered before the body ended: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	body.push([]byte("world"))
	body.end(nil)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if b := bytes.Join(a.resp.Body, nil); a.resp.Status != 200 || !bytes.Contains(b, []byte(`"body":"hello world"`)) {
		t.Fatalf("status %d, body %s", a.resp.Status, b)
	}

	body = newUpstreamBody()
	go func() {
		resp, err := su.Open(context.Background(), req, body)
		got <- answer{resp, err}
	}()
	body.push([]byte("part"))
	body.abort()
	if a := <-got; !errors.Is(a.err, ErrUpstreamReset) || a.resp != nil {
		t.Fatalf("after a reset: %+v, want ErrUpstreamReset and no answer", a)
	}
}
