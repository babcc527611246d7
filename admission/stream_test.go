package admission

import (
	"reflect"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func TestGuard_Wrap_off(t *testing.T) {
	for _, cfg := range []string{"", `{"max_inflight": 0}`} {
		g := newTestGuard(t, cfg, newFakeProcess().store(""), newFakeMetrics(), &fakeHost{}, newFakeClock())
		inner := &innerFactory{}
		c := g.Wrap(7, inner.new)
		if c != types.HttpContext(inner.last) || inner.last.id != 7 {
			t.Errorf("config %q: Wrap returned %T, want the inner context itself", cfg, c)
		}
	}
}

func TestGuard_Wrap_cap(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	h := &fakeHost{headers: [][2]string{{":authority", "x.example"}}}
	g := newTestGuard(t, `{"max_inflight": 1, "retry_after_seconds": 3}`, p.store(""), m, h, clk)
	inner := &innerFactory{}

	a := g.Wrap(2, inner.new)
	if act := a.OnHttpRequestHeaders(4, true); act != types.ActionContinue || inner.created != 1 {
		t.Fatalf("first stream: action %v, inner created %d", act, inner.created)
	}
	b := g.Wrap(3, inner.new)
	if act := b.OnHttpRequestHeaders(4, true); act != types.ActionPause {
		t.Fatalf("second stream: action %v, want pause", act)
	}
	if inner.created != 1 {
		t.Fatalf("inner created %d for a rejected stream", inner.created)
	}
	if len(h.replies) != 1 {
		t.Fatalf("replies %+v", h.replies)
	}
	r := h.replies[0]
	ra := r.headers[0]
	if r.status != 429 || ra[0] != "retry-after" || (ra[1] != "3" && ra[1] != "4" && ra[1] != "5") || string(r.body) != string(body429) {
		t.Errorf("reply %d %q %q, want 429 with Retry-After 3..5", r.status, r.headers, r.body)
	}
	// The local reply comes back through this filter's response callbacks.
	if b.OnHttpResponseHeaders(3, false) != types.ActionContinue || b.OnHttpResponseBody(10, true) != types.ActionContinue {
		t.Error("the 429 must pass the response callbacks")
	}
	b.OnHttpStreamDone()
	a.OnHttpResponseHeaders(2, true)
	a.OnHttpStreamDone()
	a.OnHttpStreamDone() // a second call must not release twice
	if g.local != 0 || m.get(MetricInflight) != 0 {
		t.Errorf("local %d gauge %d after done, want 0", g.local, m.get(MetricInflight))
	}
	if want := []string{"request_headers", "response_headers", "done", "done"}; !reflect.DeepEqual(inner.last.calls, want) {
		t.Errorf("inner calls %q, want %q", inner.last.calls, want)
	}
	c := g.Wrap(4, inner.new)
	if c.OnHttpRequestHeaders(4, true) != types.ActionContinue {
		t.Error("slot not back after the first stream ended")
	}
	if m.get(MetricRejectedCap) != 1 || m.get(MetricAdmitted) != 2 {
		t.Errorf("rejected %d admitted %d, want 1 and 2", m.get(MetricRejectedCap), m.get(MetricAdmitted))
	}
}

// A stream that an earlier filter rejected gets no HTTP callbacks, only
// OnHttpStreamDone: nothing to release, no inner context.
func TestGuard_Wrap_doneWithoutHeaders(t *testing.T) {
	g := newTestGuard(t, `{"max_inflight": 1}`, newFakeProcess().store(""), newFakeMetrics(), &fakeHost{}, newFakeClock())
	inner := &innerFactory{}
	g.Wrap(2, inner.new).OnHttpStreamDone()
	if inner.created != 0 || g.local != 0 {
		t.Errorf("inner %d local %d", inner.created, g.local)
	}
}

func TestGuard_Wrap_bodySize(t *testing.T) {
	type chunk struct {
		size int // bodySize as Envoy reports it
		eos  bool
	}
	tests := []struct {
		name          string
		contentLength string
		bodyAction    types.Action // what the inner filter returns on body
		chunks        []chunk
		wantStatus    uint32 // 0: no local reply
		wantInner     bool
	}{
		{name: "length at the limit", contentLength: "100", wantInner: true},
		{name: "length past the limit", contentLength: "101", wantStatus: 413},
		{name: "huge length", contentLength: "999999999999999999999999", wantStatus: 413},
		{name: "length not a number is the codec's business", contentLength: "abc", wantInner: true},
		{name: "streamed to the limit", chunks: []chunk{{60, false}, {40, true}}, wantInner: true},
		{name: "streamed past the limit", chunks: []chunk{{60, false}, {41, true}}, wantStatus: 413, wantInner: true},
		// When the inner filter buffers, Envoy reports the total buffered so far.
		{name: "buffered to the limit", bodyAction: types.ActionPause, chunks: []chunk{{60, false}, {100, true}}, wantInner: true},
		{name: "buffered past the limit", bodyAction: types.ActionPause, chunks: []chunk{{60, false}, {101, true}}, wantStatus: 413, wantInner: true},
		{name: "lying length", contentLength: "10", chunks: []chunk{{101, true}}, wantStatus: 413, wantInner: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newFakeMetrics()
			h := &fakeHost{}
			if tc.contentLength != "" {
				h.headers = [][2]string{{"content-length", tc.contentLength}}
			}
			g := newTestGuard(t, `{"max_inflight": 5, "max_request_body_bytes": 100}`, newFakeProcess().store(""), m, h, newFakeClock())
			inner := &innerFactory{bodyAction: tc.bodyAction}
			s := g.Wrap(2, inner.new)
			s.OnHttpRequestHeaders(3, tc.chunks == nil)
			for i, c := range tc.chunks {
				act := s.OnHttpRequestBody(c.size, c.eos)
				if i == len(tc.chunks)-1 && tc.wantStatus != 0 && act != types.ActionPause {
					t.Errorf("last chunk: action %v, want pause", act)
				}
			}
			var status uint32
			if len(h.replies) > 0 {
				status = h.replies[0].status
			}
			if status != tc.wantStatus || len(h.replies) > 1 {
				t.Errorf("replies %+v, want status %d", h.replies, tc.wantStatus)
			}
			if (inner.created == 1) != tc.wantInner {
				t.Errorf("inner created %d, want %v", inner.created, tc.wantInner)
			}
			if tc.wantStatus != 0 && len(tc.chunks) > 0 {
				// The inner filter never sees the chunk past the limit.
				if n := len(inner.last.calls); n != len(tc.chunks) {
					t.Errorf("inner calls %q", inner.last.calls)
				}
			}
			s.OnHttpStreamDone()
			if g.local != 0 {
				t.Errorf("local %d after done", g.local)
			}
			wantRejected := int64(0)
			if tc.wantStatus == 413 {
				wantRejected = 1
			}
			if got := m.get(MetricRejectedBodySize); got != wantRejected {
				t.Errorf("rejected body_size %d, want %d", got, wantRejected)
			}
		})
	}
}

// With only a body limit there is no shared state and no tick.
func TestGuard_Wrap_bodyLimitOnly(t *testing.T) {
	p := newFakeProcess()
	h := &fakeHost{headers: [][2]string{{"content-length", "5"}}}
	g := newTestGuard(t, `{"max_request_body_bytes": 4}`, p.store(""), newFakeMetrics(), h, newFakeClock())
	inner := &innerFactory{}
	g.Wrap(2, inner.new).OnHttpRequestHeaders(3, false)
	if len(h.replies) != 1 || h.replies[0].status != 413 || inner.created != 0 {
		t.Errorf("replies %+v inner %d", h.replies, inner.created)
	}
	if p.gets+p.sets != 0 || h.tick != 0 {
		t.Errorf("shared data calls %d, tick %d, want none", p.gets+p.sets, h.tick)
	}
}

// The fast path makes at most two shared-data calls per acquire and per
// release when there is no conflict, and a rejection makes one.
func TestGuard_sharedDataCalls(t *testing.T) {
	p := newFakeProcess()
	g := newTestGuard(t, `{"max_inflight": 1}`, p.store(""), newFakeMetrics(), &fakeHost{}, newFakeClock())
	inner := &innerFactory{}
	calls := func() int { return p.gets + p.sets }
	before := calls()
	a := g.Wrap(2, inner.new)
	a.OnHttpRequestHeaders(1, true)
	if n := calls() - before; n != 2 {
		t.Errorf("admission: %d calls, want 2", n)
	}
	before = calls()
	g.Wrap(3, inner.new).OnHttpRequestHeaders(1, true)
	if n := calls() - before; n != 1 {
		t.Errorf("rejection: %d calls, want 1", n)
	}
	before = calls()
	a.OnHttpStreamDone()
	if n := calls() - before; n != 2 {
		t.Errorf("release: %d calls, want 2", n)
	}
}
