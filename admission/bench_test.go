package admission

import (
	"math"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// benchSetup builds a guard among members other VMs (Envoy with
// --concurrency members-1 has that many VMs), with the process cap either
// full (every stream is rejected) or free.
func benchSetup(tb testing.TB, members int, full bool) (*Guard, func(uint32) types.HttpContext) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	cfg := `{"max_inflight": 1000}`
	for i := 1; i < members; i++ {
		o := newTestGuard(tb, cfg, p.store(""), m, &nopHost{}, clk)
		if full {
			for j := 0; j < 1000/(members-1)+1 && o.acquire(-1) == admitted; j++ {
			}
		}
	}
	g := newTestGuard(tb, cfg, p.store(""), m, &nopHost{}, clk)
	inner := &types.DefaultHttpContext{}
	return g, func(uint32) types.HttpContext { return inner }
}

// TestBenchSetup keeps the benchmarks honest: the reject setup rejects and
// the admit setup admits and releases.
func TestBenchSetup(t *testing.T) {
	for _, full := range []bool{true, false} {
		g, next := benchSetup(t, 9, full)
		s := &stream{g: g, next: next, ai: -1}
		act := s.OnHttpRequestHeaders(3, true)
		if full != (act == types.ActionPause) || full == s.held {
			t.Errorf("full=%v: action %v held %v", full, act, s.held)
		}
		s.OnHttpStreamDone()
		if g.local != 0 {
			t.Errorf("full=%v: local %d", full, g.local)
		}
	}
}

// BenchmarkGuard_reject measures one rejected stream (one shared-data get,
// the Retry-After choice and the 429 reply) against the admission and
// release of one stream (two gets, two sets). The store is the in-memory
// fake, so this is the guard's own cost; in a guest each shared-data call
// adds a host call and a copy of the value (28 bytes per member).
//
// Compare two versions with:
//
//	go test ./admission -run '^$' -bench BenchmarkGuard -count 10 > new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt
func BenchmarkGuard_reject(b *testing.B) { benchStreams(b, true) }

// BenchmarkGuard_admitRelease: see BenchmarkGuard_reject.
func BenchmarkGuard_admitRelease(b *testing.B) { benchStreams(b, false) }

// benchStreams runs one stream's headers and end per iteration, against a
// guard at its cap (full) or with room.
func benchStreams(b *testing.B, full bool) {
	g, next := benchSetup(b, 9, full)
	s := &stream{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		*s = stream{g: g, next: next, ai: -1}
		s.OnHttpRequestHeaders(3, true)
		s.OnHttpStreamDone()
	}
}

// BenchmarkGuard_off is Wrap with admission off: the inner context itself.
func BenchmarkGuard_off(b *testing.B) {
	g := newTestGuard(b, "", newFakeProcess().store(""), newFakeMetrics(), &nopHost{}, newFakeClock())
	inner := &types.DefaultHttpContext{}
	next := func(uint32) types.HttpContext { return inner }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Wrap(2, next).OnHttpRequestHeaders(3, true)
	}
}

// liveOnly is the Go runtime's live-heap reading without the memory limit,
// so that a benchmark does not change the test process's limit.
type liveOnly struct{ *goRuntime }

func (liveOnly) envLimit() (string, bool) { return "", false }
func (liveOnly) setLimit(int64) int64     { return math.MaxInt64 }

// BenchmarkGuard_memory is BenchmarkGuard_admitRelease with only the memory
// guard on, reading the real runtime's live heap per stream: the cost the
// memory guard adds to every admitted stream.
func BenchmarkGuard_memory(b *testing.B) {
	mc, err := ParseMemoryConfig([]byte(`{"max_heap_bytes": 4294967296}`))
	if err != nil {
		b.Fatal(err)
	}
	g := New(mustParse(b, ""), newFakeProcess().store(""), WithMemory(mc), withMemRuntime(liveOnly{newGoRuntime()}))
	g.host, g.meter = &nopHost{headers: [][2]string{{"content-length", "15000"}}}, newFakeMetrics()
	if err := g.Start(); err != nil {
		b.Fatal(err)
	}
	inner := &types.DefaultHttpContext{}
	next := func(uint32) types.HttpContext { return inner }
	s := &stream{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		*s = stream{g: g, next: next, ai: -1}
		if s.OnHttpRequestHeaders(3, true) != types.ActionContinue {
			b.Fatal("refused")
		}
		s.OnHttpStreamDone()
	}
}
