package admission

import (
	"math"
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// fakeRuntime is the Go runtime under the memory guard: a settable live
// heap, a recorded memory limit, an optional GOMEMLIMIT.
type fakeRuntime struct {
	heap     uint64
	garbage  uint64 // held besides the live heap
	afterGC  uint64 // when not 0, the live heap the next collection finds
	limit    int64
	sets     []int64
	env      string
	hasEnv   bool
	collects int
	gc       int   // the GOGC in force
	gcSets   []int // every setGC
	gcEnv    bool  // GOGC in the environment
}

func (r *fakeRuntime) envLimit() (string, bool) { return r.env, r.hasEnv }
func (r *fakeRuntime) setLimit(n int64) int64 {
	old := r.limit
	if n >= 0 {
		r.limit = n
		r.sets = append(r.sets, n)
	}
	return old
}
func (r *fakeRuntime) collect() {
	r.collects++
	if r.afterGC != 0 {
		r.heap, r.afterGC = r.afterGC, 0
	}
}
func (r *fakeRuntime) readHeap() (live, inUse uint64) { return r.heap, r.heap + r.garbage }
func (r *fakeRuntime) envGC() bool                    { return r.gcEnv }
func (r *fakeRuntime) setGC(n int) int {
	old := r.gc
	r.gc = n
	r.gcSets = append(r.gcSets, n)
	return old
}

const mib = 1 << 20

// newMemGuard starts a guard with the memory guard on a fake runtime whose
// live heap is 64 MiB (the baseline).
func newMemGuard(t *testing.T, admission, memory string, rt *fakeRuntime, h host, m meter) (*Guard, error) {
	t.Helper()
	mc, err := ParseMemoryConfig([]byte(memory))
	if err != nil {
		t.Fatalf("ParseMemoryConfig(%s): %v", memory, err)
	}
	g := New(mustParse(t, admission), newFakeProcess().store(""), WithClock(newFakeClock()), WithMemory(mc), withMemRuntime(rt))
	g.host, g.meter = h, m
	return g, g.Start()
}

// memStream opens a stream with the given request headers and returns it
// with the action of its request headers.
func memStream(g *Guard, h *fakeHost, inner *innerFactory, headers ...[2]string) (types.HttpContext, types.Action) {
	h.headers = headers
	s := g.Wrap(uint32(inner.created+100), inner.new)
	return s, s.OnHttpRequestHeaders(len(headers), false)
}

func cl(n int) [2]string { return [2]string{"content-length", itoa(n)} }

// TestMemory_budget: with a 96 MiB budget over a 64 MiB baseline and
// 1 MiB + 2×body per stream, streams are admitted while the sum fits, at
// the limit exactly too; the next is answered 429 (reason memory) with a
// Retry-After; a body that could never fit is 413; done streams give
// their reservation back, and the gauges return to 0.
func TestMemory_budget(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576, "body_reserve_factor": 2}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	if rt.limit != 96*mib || rt.collects != 1 {
		t.Fatalf("memory limit %d after %d collections, want %d after one", rt.limit, rt.collects, 96*mib)
	}
	g.OnTick()
	if got := m.get(MetricHeapBudget); got != 96*mib {
		t.Errorf("%s = %d, want %d", MetricHeapBudget, got, 96*mib)
	}
	if got := m.get(MetricHeapLive); got != 64*mib {
		t.Errorf("%s = %d, want %d", MetricHeapLive, got, 64*mib)
	}
	// Each stream: 1 MiB + 2 × 7.5 MiB = 16 MiB; two fit in 32 MiB.
	var open []types.HttpContext
	for i := 0; i < 2; i++ {
		s, act := memStream(g, h, inner, cl(15*mib/2))
		if act != types.ActionContinue || len(h.replies) != 0 {
			t.Fatalf("stream %d: refused (%+v) with %d MiB reserved", i, h.replies, g.mem.reserved/mib)
		}
		open = append(open, s)
	}
	if got := m.get(MetricHeapReserved); got != 32*mib {
		t.Fatalf("%s = %d, want %d (at the budget exactly)", MetricHeapReserved, got, 32*mib)
	}
	s3, act := memStream(g, h, inner, cl(0))
	if act != types.ActionPause || len(h.replies) != 1 || h.replies[0].status != 429 || h.replies[0].headers[0][0] != "retry-after" || h.replies[0].details != "wafguard_admission_memory" {
		t.Fatalf("third stream: action %v replies %+v, want a 429 with Retry-After (wafguard_admission_memory)", act, h.replies)
	}
	if got := m.get(MetricRejectedMemory); got != 1 {
		t.Errorf("%s = %d, want 1", MetricRejectedMemory, got)
	}
	s3.OnHttpStreamDone()
	// 1 MiB + 2 × 16 MiB > 96 - 64 MiB even with nothing else open: 413.
	s4, _ := memStream(g, h, inner, cl(16*mib))
	if len(h.replies) != 2 || h.replies[1].status != 413 || h.replies[1].details != "wafguard_admission_body_size" {
		t.Fatalf("a body that can never fit: replies %+v, want 413 (wafguard_admission_body_size)", h.replies)
	}
	s4.OnHttpStreamDone()
	for _, s := range open {
		s.OnHttpStreamDone()
		s.OnHttpStreamDone() // once only
	}
	if g.mem.reserved != 0 || m.get(MetricHeapReserved) != 0 || g.vm != 0 {
		t.Fatalf("after done: reserved %d, gauge %d, streams %d; want 0", g.mem.reserved, m.get(MetricHeapReserved), g.vm)
	}
	if _, act := memStream(g, h, inner, cl(15*mib/2)); act != types.ActionContinue || len(h.replies) != 2 {
		t.Fatalf("after the others are done a stream must fit again: %+v", h.replies)
	}
	if inner.created != 3 {
		t.Errorf("inner contexts created %d, want 3 (refused streams create none)", inner.created)
	}
}

// TestMemory_liveHeap: the heap the last collection found live counts
// when it is above what the reservations account for, at the headers and
// again when the body is complete; so does memory the runtime holds past
// the budget.
func TestMemory_liveHeap(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	rt.heap = 96*mib - 512<<10 // half a reservation left
	if _, act := memStream(g, h, inner); act != types.ActionPause || len(h.replies) != 1 || h.replies[0].status != 429 {
		t.Fatalf("live heap near the budget: action %v replies %+v, want 429", act, h.replies)
	}
	g.OnTick()
	if got := m.get(MetricHeapLive); got != int64(rt.heap) {
		t.Errorf("%s after a tick = %d, want %d", MetricHeapLive, got, rt.heap)
	}
	rt.heap = 70 * mib
	s, act := memStream(g, h, inner, cl(1000))
	if act == types.ActionPause {
		t.Fatalf("live heap back down: refused %+v", h.replies)
	}
	// Admitted, then the streams before it grew the live heap: the check
	// before the WAF reads the whole body refuses it.
	rt.heap = 96*mib - 1*mib
	if act := s.OnHttpRequestBody(1000, true); act != types.ActionPause || len(h.replies) != 2 || h.replies[1].status != 429 {
		t.Fatalf("live heap grew while the body arrived: action %v, replies %+v, want a 429", act, h.replies)
	}
	if calls := inner.last.calls; len(calls) != 1 {
		t.Errorf("the inner filter got %q, want only the request headers", calls)
	}
	s.OnHttpStreamDone()
	// The runtime holds more than the budget (the soft limit could not
	// hold it: the live heap has outgrown it, though no collection has
	// said so yet): refused at the headers and before the body.
	rt.heap, rt.garbage = 70*mib, 27*mib
	if _, act := memStream(g, h, inner); act != types.ActionPause || len(h.replies) != 3 || h.replies[2].status != 429 {
		t.Fatalf("in use over the budget: action %v replies %+v, want 429", act, h.replies)
	}
	rt.garbage = 0
	s, _ = memStream(g, h, inner, cl(10))
	rt.garbage = 27 * mib
	if s.OnHttpRequestBody(10, true); len(h.replies) != 4 || h.replies[3].status != 429 {
		t.Fatalf("in use over the budget before the body: replies %+v, want a fourth, 429", h.replies)
	}
	s.OnHttpStreamDone()
	if got := m.get(MetricRejectedMemory); got != 4 {
		t.Errorf("%s = %d, want 4", MetricRejectedMemory, got)
	}
}

// TestMemory_streamingBody: a body without Content-Length reserves as it
// arrives (Envoy reports the buffered total while the filter pauses); past
// the budget the stream is answered 429, or 413 once it alone could never
// fit; the inner filter sees no more of it.
func TestMemory_streamingBody(t *testing.T) {
	for _, tc := range []struct {
		name      string
		chunks    []int // bodySize of each callback (the buffered total)
		paused    bool
		want      uint32
		reserved  int64 // after the chunks, for a stream still open
		innerSeen int
	}{
		{"fits", []int{4 * mib, 8 * mib}, true, 0, 1*mib + 16*mib, 2},
		{"fits in chunks", []int{4 * mib, 4 * mib}, false, 0, 1*mib + 16*mib, 2},
		{"past the budget while others hold the rest", []int{4 * mib, 12 * mib}, true, 429, 0, 1},
		{"could never fit", []int{4 * mib, 20 * mib}, true, 413, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{heap: 64 * mib}
			h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
			if tc.paused {
				inner.bodyAction = types.ActionPause
			}
			g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576, "body_reserve_factor": 2}`, rt, h, m)
			if err != nil {
				t.Fatal(err)
			}
			// Another stream holds 8 MiB: 1 MiB + 2 × 3.5 MiB.
			other, _ := memStream(g, h, inner, cl(7*mib/2))
			s, _ := memStream(g, h, inner)
			for i, n := range tc.chunks {
				s.OnHttpRequestBody(n, i == len(tc.chunks)-1)
			}
			switch {
			case tc.want == 0 && len(h.replies) != 0:
				t.Fatalf("replies %+v, want none", h.replies)
			case tc.want != 0 && (len(h.replies) != 1 || h.replies[0].status != tc.want):
				t.Fatalf("replies %+v, want one %d", h.replies, tc.want)
			}
			if got := g.mem.reserved - 8*mib; tc.want == 0 && got != tc.reserved {
				t.Errorf("reserved %d MiB for the stream, want %d MiB", got/mib, tc.reserved/mib)
			}
			got := 0
			for _, c := range inner.last.calls {
				if strings.HasPrefix(c, "request_body") {
					got++
				}
			}
			if got != tc.innerSeen {
				t.Errorf("inner saw %d body callbacks, want %d", got, tc.innerSeen)
			}
			s.OnHttpStreamDone()
			other.OnHttpStreamDone()
			if g.mem.reserved != 0 || m.get(MetricHeapReserved) != 0 {
				t.Errorf("reserved %d after done, want 0", g.mem.reserved)
			}
		})
	}
}

// TestMemory_start: the budget comes from max_heap_bytes, or from
// GOMEMLIMIT when the VM's environment sets it (then max_heap_bytes is not
// applied); GOMEMLIMIT=off or max_heap_bytes 0 turn the memory guard off;
// a budget the rule sets already fill refuses the plugin start.
func TestMemory_start(t *testing.T) {
	h, inner := &fakeHost{}, &innerFactory{}

	rt := &fakeRuntime{heap: 64 * mib, hasEnv: true, env: "200MiB", limit: 200 * mib}
	g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296}`, rt, h, newFakeMetrics())
	if err != nil || g.mem.budget != 200*mib || len(rt.sets) != 0 {
		t.Errorf("GOMEMLIMIT set: err %v, budget %d, limits set %v; want GOMEMLIMIT's 200 MiB and no other limit", err, g.mem.budget, rt.sets)
	}

	rt = &fakeRuntime{heap: 64 * mib, hasEnv: true, env: "off", limit: math.MaxInt64}
	g, err = newMemGuard(t, "", "", rt, h, newFakeMetrics())
	if err != nil || g.mem.on || g.enabled {
		t.Errorf("GOMEMLIMIT=off: err %v, memory guard on %v, guard on %v; want both off", err, g.mem.on, g.enabled)
	}
	if c := g.Wrap(1, inner.new); c != types.HttpContext(inner.last) {
		t.Errorf("with everything off Wrap must return the inner context itself")
	}

	rt = &fakeRuntime{heap: 64 * mib, limit: math.MaxInt64}
	g, err = newMemGuard(t, "", `{"max_heap_bytes": 0}`, rt, h, newFakeMetrics())
	if err != nil || g.mem.on || len(rt.sets) != 0 {
		t.Errorf("max_heap_bytes 0: err %v, on %v, limits set %v; want off and no limit", err, g.mem.on, rt.sets)
	}

	rt = &fakeRuntime{heap: 64 * mib, limit: math.MaxInt64}
	g, err = newMemGuard(t, "", "", rt, h, newFakeMetrics())
	if err != nil || g.mem.budget != DefaultMaxHeapBytes || rt.limit != DefaultMaxHeapBytes {
		t.Errorf("defaults: err %v, budget %d, limit %d; want %d", err, g.mem.budget, rt.limit, DefaultMaxHeapBytes)
	}

	rt = &fakeRuntime{heap: 64 * mib, limit: math.MaxInt64}
	_, err = newMemGuard(t, "", `{"max_heap_bytes": 50331648}`, rt, h, newFakeMetrics())
	if err == nil || !strings.Contains(err.Error(), "memory.max_heap_bytes (50331648)") || !strings.Contains(err.Error(), "64 MiB") {
		t.Errorf("a budget under the baseline: got %v, want an error naming max_heap_bytes and the 64 MiB in use", err)
	}
}

// TestMemory_perVMCap: max_inflight_per_vm counts this VM's streams,
// rejects at the cap with reason vm_cap, and lets the next in once one is
// done.
func TestMemory_perVMCap(t *testing.T) {
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	g := newTestGuard(t, `{"max_inflight_per_vm": 2}`, newFakeProcess().store(""), m, h, newFakeClock())
	a, _ := memStream(g, h, inner)
	b, _ := memStream(g, h, inner)
	c, act := memStream(g, h, inner)
	if act != types.ActionPause || len(h.replies) != 1 || h.replies[0].status != 429 || m.get(MetricRejectedVMCap) != 1 {
		t.Fatalf("third stream: action %v, replies %+v, %s %d; want a 429", act, h.replies, MetricRejectedVMCap, m.get(MetricRejectedVMCap))
	}
	c.OnHttpStreamDone()
	a.OnHttpStreamDone()
	if _, act := memStream(g, h, inner); act == types.ActionPause {
		t.Fatalf("after one is done: refused %+v", h.replies)
	}
	b.OnHttpStreamDone()
	if g.vm != 1 || m.get(MetricAdmitted) != 3 {
		t.Errorf("streams %d, admitted %d; want 1 and 3", g.vm, m.get(MetricAdmitted))
	}
}

func TestParseMemoryConfig(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"max_heap_bytes": 1000}`, "memory.max_heap_bytes: got 1000, want 0 (off) or at least 16777216"},
		{`{"max_heap_bytes": 5000000000}`, "memory.max_heap_bytes: got 5000000000, want 0 (off) or bytes from"},
		{`{"max_heap_bytes": "1GiB"}`, `memory.max_heap_bytes: got "1GiB"`},
		{`{"body_reserve_factor": -1}`, "memory.body_reserve_factor: got -1, want an integer from 0 to 64"},
		{`{"stream_reserve_bytes": 1.5}`, "memory.stream_reserve_bytes: got 1.5"},
		{`{"max_heap": 1}`, `memory: unknown key "max_heap", want one of max_heap_bytes, stream_reserve_bytes, body_reserve_factor, gc_percent`},
		{`{"gc_percent": 0}`, "memory.gc_percent: got 0, want an integer from 10 to 1000"},
		{`[1]`, "memory: got [1], want an object"},
	} {
		if _, err := ParseMemoryConfig([]byte(tc.in)); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("ParseMemoryConfig(%s): got %v, want an error starting %q", tc.in, err, tc.err)
		}
	}
	c, err := ParseMemoryConfig([]byte(`{"max_heap_bytes": 536870912, "stream_reserve_bytes": 0, "body_reserve_factor": 4, "gc_percent": 50}`))
	if err != nil || c != (MemoryConfig{MaxHeapBytes: 512 * mib, StreamReserveBytes: 0, BodyReserveFactor: 4, GCPercent: 50}) {
		t.Errorf("valid config: %+v, %v", c, err)
	}
}

// TestMemory_staleAfterBurst: a VM that sheds allocates little, so the
// live figure of the last collection, taken while a burst was open, would
// keep it shedding after the burst ends; the next tick after a refusal,
// with streams ended since, runs one collection, and no more while
// nothing is refused.
func TestMemory_staleAfterBurst(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := memStream(g, h, inner)
	s2, _ := memStream(g, h, inner)
	rt.heap = 96 * mib // the burst, measured while open
	s1.OnHttpStreamDone()
	g.OnTick()
	if rt.collects != 1 {
		t.Fatalf("a tick without a refusal collected (%d collections, want the one at start)", rt.collects)
	}
	if _, act := memStream(g, h, inner); act != types.ActionPause {
		t.Fatal("the stale figure should refuse")
	}
	g.OnTick() // no stream ended since the last tick: nothing to collect
	if rt.collects != 1 {
		t.Fatalf("collected with no stream ended: %d", rt.collects)
	}
	s2.OnHttpStreamDone()
	memStream(g, h, inner)
	rt.afterGC = 65 * mib
	g.OnTick()
	if rt.collects != 2 || m.get(MetricHeapLive) != 65*mib {
		t.Fatalf("after a refusal and an ended stream: %d collections, live gauge %d; want 2 and %d", rt.collects, m.get(MetricHeapLive), 65*mib)
	}
	if _, act := memStream(g, h, inner); act == types.ActionPause {
		t.Fatalf("after the collection: refused %+v", h.replies)
	}
	g.OnTick()
	if rt.collects != 2 {
		t.Errorf("a tick with nothing refused collected: %d", rt.collects)
	}
}

// TestParseMemoryConfig_bounds: every bound of the memory object and of
// max_inflight_per_vm, at the limit (accepted) and one past it (refused).
func TestParseMemoryConfig_bounds(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"max_heap_bytes": 16777216}`, true}, {`{"max_heap_bytes": 16777215}`, false},
		{`{"max_heap_bytes": 4294967296}`, true}, {`{"max_heap_bytes": 4294967297}`, false},
		{`{"max_heap_bytes": 0}`, true}, {`{"max_heap_bytes": -1}`, false},
		{`{"stream_reserve_bytes": 1073741824}`, true}, {`{"stream_reserve_bytes": 1073741825}`, false},
		{`{"stream_reserve_bytes": 0}`, true}, {`{"stream_reserve_bytes": -1}`, false},
		{`{"body_reserve_factor": 64}`, true}, {`{"body_reserve_factor": 65}`, false},
		{`{"body_reserve_factor": 0}`, true},
		{`{"gc_percent": 10}`, true}, {`{"gc_percent": 9}`, false},
		{`{"gc_percent": 1000}`, true}, {`{"gc_percent": 1001}`, false},
	} {
		if _, err := ParseMemoryConfig([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("ParseMemoryConfig(%s): %v, want accepted %v", tc.in, err, tc.ok)
		}
	}
	for in, ok := range map[string]bool{
		`{"max_inflight_per_vm": 0}`: true, `{"max_inflight_per_vm": 1073741824}`: true,
		`{"max_inflight_per_vm": 1073741825}`: false, `{"max_inflight_per_vm": -1}`: false,
	} {
		if _, err := ParseConfig([]byte(in)); (err == nil) != ok {
			t.Errorf("ParseConfig(%s): %v, want accepted %v", in, err, ok)
		}
	}
}

// TestMemory_neverFitsBoundary: a body whose reservation fills the budget
// exactly over the baseline is admitted; one byte more can never fit: 413.
func TestMemory_neverFitsBoundary(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	g, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576, "body_reserve_factor": 2}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	exact := (32*mib - 1*mib) / 2 // 1 MiB + 2 × exact = 32 MiB = budget - baseline
	s, act := memStream(g, h, inner, cl(exact))
	if act != types.ActionContinue || len(h.replies) != 0 {
		t.Fatalf("a body filling the budget exactly: action %v, replies %+v", act, h.replies)
	}
	s.OnHttpStreamDone()
	if _, act := memStream(g, h, inner, cl(exact+1)); act != types.ActionPause || len(h.replies) != 1 || h.replies[0].status != 413 {
		t.Fatalf("one byte more: action %v, replies %+v, want 413", act, h.replies)
	}
}

// TestGuard_compiling: while the rule sets compile the collector runs at
// StartGCPercent, then at memory.gc_percent; GOGC in the environment wins
// after the start.
func TestGuard_compiling(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   string
		env   bool
		after int
	}{
		{"default", `{}`, false, DefaultGCPercent},
		{"configured", `{"gc_percent": 50}`, false, 50},
		{"GOGC set", `{"gc_percent": 50}`, true, 300},
	} {
		mc, err := ParseMemoryConfig([]byte(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		rt := &fakeRuntime{gc: 300, gcEnv: c.env}
		g := New(Config{}, newFakeProcess().store(""), WithMemory(mc), withMemRuntime(rt))
		done := g.Compiling()
		if rt.gc != StartGCPercent {
			t.Errorf("%s: GOGC %d while compiling, want %d", c.name, rt.gc, StartGCPercent)
		}
		done()
		if rt.gc != c.after {
			t.Errorf("%s: GOGC %d after, want %d", c.name, rt.gc, c.after)
		}
	}
	// Without the memory options nothing is touched.
	New(Config{}, newFakeProcess().store("")).Compiling()()
}

// TestMemory_done: when Envoy replaces the configuration, the old guard
// takes its figures out of the gauges, which Envoy sums over the plugin
// contexts of every VM: with an old and a new guard on one VM the live
// heap was counted twice, and after the old one's Done it is counted
// once. A stream of the old guard that ends later writes nothing to them.
func TestMemory_done(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	old, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	s, act := memStream(old, h, inner, cl(1000))
	if act != types.ActionContinue {
		t.Fatalf("stream refused: %+v", h.replies)
	}
	next, err := newMemGuard(t, "", `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576}`, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	next.OnTick()
	if got := m.get(MetricHeapLive); got != 2*64*mib {
		t.Fatalf("%s with two guards on one VM = %d MiB, want each counting it (128)", MetricHeapLive, got/mib)
	}
	old.Done()
	old.Done() // once only
	if got := m.get(MetricHeapLive); got != 64*mib {
		t.Errorf("%s after the old guard's Done = %d MiB, want 64", MetricHeapLive, got/mib)
	}
	if got := m.get(MetricHeapBudget); got != 96*mib {
		t.Errorf("%s after the old guard's Done = %d MiB, want the new one's 96", MetricHeapBudget, got/mib)
	}
	if got := m.get(MetricHeapReserved); got != 0 {
		t.Errorf("%s after the old guard's Done = %d, want 0 (its stream's reservation withdrawn)", MetricHeapReserved, got)
	}
	s.OnHttpStreamDone()
	old.OnTick()
	if got, got2 := m.get(MetricHeapReserved), m.get(MetricHeapLive); got != 0 || got2 != 64*mib {
		t.Errorf("after the old guard's stream ended and it ticked: reserved %d, live %d MiB; want 0 and 64", got, got2/mib)
	}
	next.OnTick()
	if got := m.get(MetricHeapLive); got != 64*mib {
		t.Errorf("%s after the new guard's tick = %d MiB, want 64", MetricHeapLive, got/mib)
	}
}

// TestMemory_canary: Envoy checks every new configuration by starting the
// plugin in a VM it destroys at once without OnPluginDone (proxy-wasm's
// configuration canary). A guard that has started but neither ticked nor
// seen a stream writes nothing to the gauges, so such a VM leaves nothing
// in Envoy's sums; the guard that serves writes its figures from its
// first tick, or its first stream.
func TestMemory_canary(t *testing.T) {
	rt := &fakeRuntime{heap: 64 * mib}
	h, m, inner := &fakeHost{}, newFakeMetrics(), &innerFactory{}
	cfg := `{"max_heap_bytes": 100663296, "stream_reserve_bytes": 1048576}`
	if _, err := newMemGuard(t, "", cfg, rt, h, m); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{MetricHeapLive, MetricHeapBudget, MetricHeapReserved} {
		if got := m.get(name); got != 0 {
			t.Errorf("%s after a start alone = %d, want 0", name, got)
		}
	}
	ticked, err := newMemGuard(t, "", cfg, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	ticked.OnTick()
	if live, budget := m.get(MetricHeapLive), m.get(MetricHeapBudget); live != 64*mib || budget != 96*mib {
		t.Errorf("after a tick: live %d MiB, budget %d MiB; want 64 and 96 (one VM's)", live/mib, budget/mib)
	}
	streamed, err := newMemGuard(t, "", cfg, rt, h, m)
	if err != nil {
		t.Fatal(err)
	}
	s, act := memStream(streamed, h, inner, cl(1000))
	if act != types.ActionContinue {
		t.Fatalf("stream refused: %+v", h.replies)
	}
	if reserved, budget := m.get(MetricHeapReserved), m.get(MetricHeapBudget); reserved == 0 || budget != 2*96*mib {
		t.Errorf("after a stream: reserved %d, budget %d MiB; want the stream's reservation and two budgets (192)", reserved, budget/mib)
	}
	s.OnHttpStreamDone()
}
