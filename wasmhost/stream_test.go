package wasmhost

import (
	"context"
	"strings"
	"testing"
)

// Header maps are mutable in their own phase and gone once the phase
// continued (Envoy Context::getMap, notes 3.2); pseudo-headers come first.
func TestStream_headers(t *testing.T) {
	m := compilePlugin(t, "headers", Options{})
	vm, rec := newVM(t, m, PluginConfig{})
	up := &echo{}
	h := append(get("/orig"), [2]string{"X-Dup", "a"}, [2]string{"x-dup", "b"}, [2]string{"x-remove", "1"})
	r := vm.Exchange(context.Background(), &Request{Headers: h, Info: StreamInfo{SourceAddress: "10.0.0.1:1234"}}, up)
	if r.Status != 201 || r.LocalReply || !r.Upstream {
		t.Fatalf("result %+v", r)
	}
	got := up.reqs[0].Headers
	if p := hdr(got, ":path"); p != "/rewritten" {
		t.Errorf(":path = %q", p)
	}
	if v := hdr(got, "x-dup-first"); v != "a" {
		t.Errorf("x-dup-first = %q, want first value a", v)
	}
	if hdr(got, "x-remove") != "" || hdr(got, "x-added") != "req" {
		t.Errorf("upstream headers %v", got)
	}
	if hdr(r.Headers, "x-resp") != "1" || hdr(r.Headers, "server") != "" {
		t.Errorf("response headers %v", r.Headers)
	}
	for _, want := range []string{
		"info: source 10.0.0.1:1234 port 1234 protocol HTTP/1.1",
		"info: request header in response phase: error status returned by host: bad argument",
		"info: my_prop kept",
	} {
		if !rec.has(want) {
			t.Errorf("missing log %q in %q", want, rec.all())
		}
	}
}

// A body callback that pauses makes Envoy buffer: the next callback sees
// the total so far (Context::onRequestBody, notes 2.2), and a replacement
// acts on the whole buffer.
func TestStream_bodyBuffering(t *testing.T) {
	m := compilePlugin(t, "body", Options{})
	vm, rec := newVM(t, m, PluginConfig{})
	up := &echo{}
	r := vm.Exchange(context.Background(), &Request{Headers: post("/"), Body: [][]byte{[]byte("abc"), []byte("def")}}, up)
	if r.Status != 200 || string(up.reqs[0].Body) != "ABCDEF" {
		t.Fatalf("upstream body %q, result %+v", up.reqs[0].Body, r)
	}
	if string(r.Body) != "ABCDEF [filtered]" {
		t.Errorf("response body %q", r.Body)
	}
	want := []string{"info: request body callback size=3 eos=false", "info: request body callback size=6 eos=true", "info: stream done"}
	if got := rec.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("logs %q, want %q", got, want)
	}
}

// Over per_connection_buffer_limit_bytes while buffering the request, Envoy
// answers 413 (notes 2.3).
func TestStream_bufferLimit(t *testing.T) {
	m := compilePlugin(t, "body", Options{BufferLimit: 4})
	vm, _ := newVM(t, m, PluginConfig{})
	up := &echo{}
	r := vm.Exchange(context.Background(), &Request{Headers: post("/"), Body: [][]byte{[]byte("abc"), []byte("def")}}, up)
	if r.Status != 413 || !r.LocalReply || up.count() != 0 {
		t.Fatalf("result %+v, upstream calls %d", r, up.count())
	}
}

// A client that goes away mid-body still gets on_log/on_done/on_delete
// (Envoy's doDeferredStreamDestroy), and the upstream is never called.
func TestStream_clientAbort(t *testing.T) {
	m := compilePlugin(t, "body", Options{})
	vm, rec := newVM(t, m, PluginConfig{})
	up := &echo{}
	r := vm.Exchange(context.Background(), &Request{Headers: post("/"), Body: [][]byte{[]byte("abc")}, Reset: true}, up)
	if r.Status != 0 || up.count() != 0 {
		t.Fatalf("result %+v, upstream calls %d", r, up.count())
	}
	if !rec.has("info: stream done") {
		t.Errorf("no on_log: %q", rec.all())
	}
}

// With allow_on_headers_stop_iteration (Envoy 1.35+), a pause on headers
// holds only the headers: body callbacks keep coming, and a body callback
// that continues releases headers and body together.
func TestStream_allowOnHeadersStopIteration(t *testing.T) {
	m := compilePlugin(t, "tick", Options{})
	vm, _ := newVM(t, m, PluginConfig{ManualTicks: true, AllowOnHeadersStopIteration: true})
	s := vm.NewStream(StreamInfo{})
	if a := s.RequestHeaders(post("/"), false); a != ActionPause {
		t.Fatalf("headers action %d", a)
	}
	if a := s.RequestBody([]byte("abc"), true); a != ActionContinue {
		t.Errorf("body action %d, want the callback to run and continue", a)
	}
	if _, body, _, done := s.UpstreamRequest(); !done || string(body) != "abc" {
		t.Errorf("upstream body %q done %v", body, done)
	}
	s.End()
}
