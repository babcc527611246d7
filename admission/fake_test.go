package admission

import (
	"fmt"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeProcess is an Envoy process's shared data: one map per vm_id, one CAS
// counter for all of them (starts at 1, skips 0), cas 0 writes
// unconditionally, a non-zero cas on a missing key succeeds
// (proxy-wasm-cpp-host src/shared_data.cc).
//
// With copyOnSet false, Set reuses the stored array when it fits, so the
// store allocates nothing in steady state; that is only safe while one
// goroutine uses it (the guard never reads a value after its next call).
type fakeProcess struct {
	mu         sync.Mutex
	cas        uint32
	data       map[string]map[string]*fakeEntry
	copyOnSet  bool
	gets, sets int
}

type fakeEntry struct {
	v   []byte
	cas uint32
}

func newFakeProcess() *fakeProcess {
	return &fakeProcess{data: map[string]map[string]*fakeEntry{}}
}

// store returns the Store of one vm_id namespace.
func (p *fakeProcess) store(vmID string) *fakeStore { return &fakeStore{p: p, vmID: vmID} }

type fakeStore struct {
	p    *fakeProcess
	vmID string
}

func (s *fakeStore) Get(key string) ([]byte, uint32, error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	e, ok := p.data[s.vmID][key]
	if !ok {
		return nil, 0, ErrNotFound
	}
	return e.v, e.cas, nil
}

func (s *fakeStore) Set(key string, value []byte, cas uint32) error {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sets++
	ns := p.data[s.vmID]
	if ns == nil {
		ns = map[string]*fakeEntry{}
		p.data[s.vmID] = ns
	}
	e, ok := ns[key]
	if ok && cas != 0 && e.cas != cas {
		return ErrCASMismatch
	}
	if !ok {
		e = &fakeEntry{}
		ns[key] = e
	}
	if p.copyOnSet || cap(e.v) < len(value) {
		e.v = append([]byte(nil), value...)
	} else {
		e.v = e.v[:len(value)]
		copy(e.v, value)
	}
	p.cas++
	if p.cas == 0 {
		p.cas++
	}
	e.cas = p.cas
	return nil
}

// fakeMetrics is the process-wide stats store: every VM's increments add up.
type fakeMetrics struct {
	mu sync.Mutex
	v  map[string]*int64
}

func newFakeMetrics() *fakeMetrics { return &fakeMetrics{v: map[string]*int64{}} }

func (f *fakeMetrics) ptr(name string) *int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.v[name]
	if p == nil {
		p = new(int64)
		f.v[name] = p
	}
	return p
}

func (f *fakeMetrics) get(name string) int64 { return atomic.LoadInt64(f.ptr(name)) }

type fakeCounter struct{ p *int64 }

func (c fakeCounter) Increment(d uint64) {
	if d == 0 {
		panic("counter increment by 0 (Envoy answers BadArgument and the SDK panics)")
	}
	atomic.AddInt64(c.p, int64(d))
}

type fakeGauge struct{ p *int64 }

func (g fakeGauge) Add(d int64) { atomic.AddInt64(g.p, d) }

func (f *fakeMetrics) counter(name string) counter { return fakeCounter{f.ptr(name)} }
func (f *fakeMetrics) gauge(name string) gauge     { return fakeGauge{f.ptr(name)} }

// fakeHost answers the request headers of the stream being driven and
// records local replies.
type fakeHost struct {
	headers [][2]string
	replies []fakeReply
	tick    uint32
	warns   []string
}

type fakeReply struct {
	status  uint32
	details string
	headers [][2]string
	body    []byte
}

func (h *fakeHost) requestHeader(name string) (string, bool) {
	for _, kv := range h.headers {
		if kv[0] == name {
			return kv[1], true
		}
	}
	return "", false
}

func (h *fakeHost) sendReply(status uint32, details string, headers [][2]string, body []byte) error {
	h.replies = append(h.replies, fakeReply{status, details, headers, body})
	return nil
}

func (h *fakeHost) setTickPeriod(ms uint32) error { h.tick = ms; return nil }
func (h *fakeHost) logWarn(msg string)            { h.warns = append(h.warns, msg) }

// nopHost is a host that keeps nothing, for benchmarks.
type nopHost struct{ headers [][2]string }

func (h *nopHost) requestHeader(name string) (string, bool) {
	for _, kv := range h.headers {
		if kv[0] == name {
			return kv[1], true
		}
	}
	return "", false
}
func (*nopHost) sendReply(uint32, string, [][2]string, []byte) error { return nil }
func (*nopHost) setTickPeriod(uint32) error                          { return nil }
func (*nopHost) logWarn(string)                                      {}

// fakeClock is a settable wall clock shared by simulated VMs.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) Now() time.Time   { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(ms int64) { c.ms.Add(ms) }
func newFakeClock() *fakeClock        { c := &fakeClock{}; c.ms.Store(1_700_000_000_000); return c }

// mustParse parses an admission object ("" for none).
func mustParse(t testing.TB, config string) Config {
	t.Helper()
	var raw []byte
	if config != "" {
		raw = []byte(config)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", config, err)
	}
	return cfg
}

// newTestGuard builds and starts a guard on a fake host.
func newTestGuard(t testing.TB, config string, st Store, m meter, h host, clk Clock) *Guard {
	t.Helper()
	g := New(mustParse(t, config), st, WithClock(clk))
	g.host, g.meter = h, m
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return g
}

// sharedTotal sums the in-flight counts of every member in the value.
func sharedTotal(t testing.TB, st Store, key string) (total uint64, members int) {
	t.Helper()
	v, _, err := st.Get(key)
	if err == ErrNotFound {
		return 0, 0
	}
	n, ok := stateValid(v)
	if !ok {
		t.Fatalf("malformed shared value %x", v)
	}
	off := headerSize
	for i := 0; i < n; i++ {
		m, _ := memberAt(v, off)
		total += uint64(m.inflight)
		off += m.size
	}
	return total, n
}

// innerFactory builds recording inner contexts and counts them.
type innerFactory struct {
	created, done, live, maxLive int
	last                         *innerCtx
	bodyAction                   types.Action // returned by OnHttpRequestBody
}

func (f *innerFactory) new(id uint32) types.HttpContext {
	f.created++
	f.live++
	if f.live > f.maxLive {
		f.maxLive = f.live
	}
	f.last = &innerCtx{f: f, id: id}
	return f.last
}

// innerCtx records the callbacks it gets.
type innerCtx struct {
	types.DefaultHttpContext
	f     *innerFactory
	id    uint32
	calls []string
}

func (c *innerCtx) OnHttpRequestHeaders(int, bool) types.Action {
	c.calls = append(c.calls, "request_headers")
	return types.ActionContinue
}

func (c *innerCtx) OnHttpRequestBody(size int, eos bool) types.Action {
	c.calls = append(c.calls, fmt.Sprintf("request_body %d %v", size, eos))
	return c.f.bodyAction
}

func (c *innerCtx) OnHttpResponseHeaders(int, bool) types.Action {
	c.calls = append(c.calls, "response_headers")
	return types.ActionContinue
}

func (c *innerCtx) OnHttpStreamDone() {
	c.calls = append(c.calls, "done")
	c.f.done++
	c.f.live--
}
