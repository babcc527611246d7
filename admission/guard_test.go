package admission

import (
	"errors"
	"strconv"
	"testing"
)

const key = DefaultSharedDataKey

func TestGuard_acquireRelease(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	g1 := newTestGuard(t, `{"max_inflight": 2}`, st, m, &fakeHost{}, clk)
	g2 := newTestGuard(t, `{"max_inflight": 2}`, st, m, &fakeHost{}, clk)

	if got, n := sharedTotal(t, st, key); got != 0 || n != 2 {
		t.Fatalf("after start: total %d members %d, want 0 and 2", got, n)
	}
	if v := g1.acquire(-1); v != admitted {
		t.Fatalf("first acquire: %v", v)
	}
	if v := g2.acquire(-1); v != admitted {
		t.Fatalf("second acquire: %v", v)
	}
	if v := g1.acquire(-1); v != rejectedCap {
		t.Fatalf("third acquire: %v, want rejectedCap", v)
	}
	if got := m.get(MetricInflight); got != 2 {
		t.Errorf("gauge %d, want 2", got)
	}
	g2.release(-1)
	if v := g1.acquire(-1); v != admitted {
		t.Fatalf("acquire after release: %v", v)
	}
	g1.release(-1)
	g1.release(-1)
	if got, _ := sharedTotal(t, st, key); got != 0 {
		t.Errorf("total %d, want 0", got)
	}
	if got := m.get(MetricInflight); got != 0 {
		t.Errorf("gauge %d, want 0", got)
	}
	if got := m.get(MetricAdmitted); got != 3 {
		t.Errorf("admitted %d, want 3", got)
	}
}

func TestGuard_perAuthority(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	cfg := `{"max_inflight": 3, "per_authority": {"a.example": {"max_inflight": 1}}}`
	g1 := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	g2 := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	a := g1.authorityIndex("A.example:8443")
	if a != 0 || g1.authorityIndex("b.example") != -1 {
		t.Fatalf("authorityIndex: %d", a)
	}
	if v := g1.acquire(a); v != admitted {
		t.Fatalf("a #1: %v", v)
	}
	if v := g2.acquire(a); v != rejectedAuthority {
		t.Fatalf("a #2 on another VM: %v, want rejectedAuthority", v)
	}
	if v := g2.acquire(-1); v != admitted {
		t.Fatalf("other authority: %v", v)
	}
	g1.release(a)
	if v := g2.acquire(a); v != admitted {
		t.Fatalf("a after release: %v", v)
	}
	if v := g1.acquire(-1); v != admitted {
		t.Fatalf("third slot: %v", v)
	}
	if v := g1.acquire(-1); v != rejectedCap {
		t.Fatalf("process cap: %v, want rejectedCap", v)
	}
}

// conflictStore fails every Set with a CAS mismatch.
type conflictStore struct{ Store }

func (conflictStore) Set(string, []byte, uint32) error { return ErrCASMismatch }

func TestGuard_casExhausted(t *testing.T) {
	tests := []struct {
		name        string
		config      string
		wantVerdict verdict
		wantLocal   uint32
		wantRejects int64
	}{
		{"reject by default", `{"max_inflight": 5, "cas_retries": 3}`, rejectedCAS, 0, 1},
		{"admit when configured", `{"max_inflight": 5, "cas_retries": 3, "on_cas_exhausted": "admit"}`, admitted, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
			real := p.store("")
			g := newTestGuard(t, tc.config, real, m, &fakeHost{}, clk)
			g.store = conflictStore{real}
			h := &fakeHost{}
			g.host = h
			inner := &innerFactory{}
			s := g.Wrap(2, inner.new)
			s.OnHttpRequestHeaders(3, true)
			if got := g.local; got != tc.wantLocal {
				t.Errorf("local %d, want %d", got, tc.wantLocal)
			}
			if got := m.get(MetricCASConflicts); got != 4 {
				t.Errorf("conflicts %d, want 4 (1 try + 3 retries)", got)
			}
			if got := m.get(MetricCASExhausted); got != 1 {
				t.Errorf("exhausted %d, want 1", got)
			}
			if got := m.get(MetricRejectedCAS); got != tc.wantRejects {
				t.Errorf("rejected cas_exhausted %d, want %d", got, tc.wantRejects)
			}
			if tc.wantVerdict == rejectedCAS {
				if inner.created != 0 || len(h.replies) != 1 || h.replies[0].status != 429 || h.replies[0].details != "wafguard_admission_cas_exhausted" {
					t.Fatalf("inner %d replies %+v, want no inner and one 429 (wafguard_admission_cas_exhausted)", inner.created, h.replies)
				}
				return
			}
			// Admitted without a write: the next successful write publishes it.
			if inner.created != 1 {
				t.Fatalf("inner created %d, want 1", inner.created)
			}
			g.store = real
			g.OnTick()
			if got, _ := sharedTotal(t, real, key); got != 1 {
				t.Errorf("after tick: total %d, want 1", got)
			}
			s.OnHttpStreamDone()
			if got, _ := sharedTotal(t, real, key); got != 0 || m.get(MetricInflight) != 0 {
				t.Errorf("after done: total %d gauge %d, want 0", got, m.get(MetricInflight))
			}
		})
	}
}

// A release whose writes all conflict leaves the entry high (never low) until
// the member's next tick.
func TestGuard_releaseExhausted(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	real := p.store("")
	g := newTestGuard(t, `{"max_inflight": 1, "cas_retries": 1}`, real, m, &fakeHost{}, clk)
	if g.acquire(-1) != admitted {
		t.Fatal("acquire")
	}
	g.store = conflictStore{real}
	g.release(-1)
	if got, _ := sharedTotal(t, real, key); got != 1 {
		t.Fatalf("total after failed release %d, want 1 (conservative)", got)
	}
	g.store = real
	g.OnTick()
	if got, _ := sharedTotal(t, real, key); got != 0 || m.get(MetricInflight) != 0 {
		t.Errorf("after tick: total %d gauge %d, want 0", got, m.get(MetricInflight))
	}
}

// errStore fails every call with a host error.
type errStore struct{}

func (errStore) Get(string) ([]byte, uint32, error) { return nil, 0, errors.New("internal failure") }
func (errStore) Set(string, []byte, uint32) error   { return errors.New("internal failure") }

func TestGuard_storeError(t *testing.T) {
	m, h := newFakeMetrics(), &fakeHost{}
	g := newTestGuard(t, `{"max_inflight": 1}`, errStore{}, m, h, newFakeClock())
	if v := g.acquire(-1); v != rejectedCAS {
		t.Errorf("acquire with a failing store: %v, want rejectedCAS (fail closed)", v)
	}
	if m.get(MetricStoreErrors) == 0 || len(h.warns) == 0 {
		t.Errorf("store errors %d, warns %q", m.get(MetricStoreErrors), h.warns)
	}
}

// A VM that traps or is reloaded never runs its streams' OnHttpStreamDone.
// Its slots must come back within stale_after_ms + tick_period_ms.
func TestGuard_repairVanishedVM(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	cfg := `{"max_inflight": 3, "tick_period_ms": 100, "stale_after_ms": 300}`
	live := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	dead := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	for i := 0; i < 2; i++ {
		if dead.acquire(-1) != admitted {
			t.Fatal("acquire on the doomed VM")
		}
	}
	if live.acquire(-1) != admitted {
		t.Fatal("acquire on the live VM")
	}
	if live.acquire(-1) != rejectedCap {
		t.Fatal("cap not enforced while the doomed VM holds two slots")
	}
	// dead stops here: no more ticks, no releases. live ticks every period.
	const bound = 300 + 100
	var repairedAt int64 = -1
	for elapsed := int64(100); elapsed <= 2*bound; elapsed += 100 {
		clk.advance(100)
		live.OnTick()
		if total, _ := sharedTotal(t, st, key); total == 1 {
			repairedAt = elapsed
			break
		}
	}
	if repairedAt < 0 || repairedAt > bound {
		t.Fatalf("slots repaired after %d ms, want within %d ms", repairedAt, bound)
	}
	if _, n := sharedTotal(t, st, key); n != 1 {
		t.Errorf("members %d, want 1", n)
	}
	if got := m.get(MetricRepairedSlots); got != 2 {
		t.Errorf("repaired %d, want 2", got)
	}
	if got := m.get(MetricInflight); got != 1 {
		t.Errorf("gauge %d, want 1", got)
	}
	for i := 0; i < 2; i++ {
		if live.acquire(-1) != admitted {
			t.Fatalf("slot %d not back", i)
		}
	}
}

// A live member evicted because its ticks stalled adds itself back, with its
// exact counts, on its next write.
func TestGuard_evictedMemberComesBack(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	cfg := `{"max_inflight": 5, "tick_period_ms": 100, "stale_after_ms": 300}`
	a := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	b := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	b.acquire(-1)
	b.acquire(-1)
	clk.advance(1000)
	a.OnTick() // evicts b
	if total, n := sharedTotal(t, st, key); total != 0 || n != 1 {
		t.Fatalf("after eviction: total %d members %d", total, n)
	}
	b.release(-1) // b writes again: back with 1 slot
	if total, n := sharedTotal(t, st, key); total != 1 || n != 2 {
		t.Fatalf("after b's write: total %d members %d, want 1 and 2", total, n)
	}
	a.OnTick() // b came back with a fresh heartbeat: it stays
	if total, n := sharedTotal(t, st, key); total != 1 || n != 2 {
		t.Fatalf("after a's tick: total %d members %d, want 1 and 2", total, n)
	}
	b.release(-1)
	if total, _ := sharedTotal(t, st, key); total != 0 || m.get(MetricInflight) != 0 {
		t.Errorf("total %d gauge %d, want 0", total, m.get(MetricInflight))
	}
}

func TestGuard_malformedValueIsReplaced(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	h := &fakeHost{}
	g := newTestGuard(t, `{"max_inflight": 2}`, st, m, h, clk)
	if err := st.Set(key, []byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}
	if g.acquire(-1) != admitted {
		t.Fatal("acquire over a malformed value")
	}
	if total, n := sharedTotal(t, st, key); total != 1 || n != 1 {
		t.Errorf("total %d members %d, want 1 and 1", total, n)
	}
	if len(h.warns) != 1 {
		t.Errorf("warns %q, want one", h.warns)
	}
}

func TestGuard_retryAfter(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		pressure uint64
		cap      uint32
		lo, hi   int
	}{
		{"base 1", `{"max_inflight": 10}`, 0, 10, 1, 2},
		{"base 4", `{"max_inflight": 10, "retry_after_seconds": 4}`, 0, 10, 4, 6},
		{"one cap over", `{"max_inflight": 10, "retry_after_seconds": 2}`, 10, 10, 4, 6},
		{"three caps over", `{"max_inflight": 10, "retry_after_seconds": 2}`, 35, 10, 8, 12},
		{"capped", `{"max_inflight": 10, "retry_after_seconds": 2, "retry_after_max_seconds": 5}`, 1000, 10, 5, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGuard(t, tc.config, newFakeProcess().store(""), newFakeMetrics(), &fakeHost{}, newFakeClock())
			g.pressure = tc.pressure
			seen := map[int]int{}
			for i := 0; i < 2000; i++ {
				ra := g.retryAfter(tc.cap)
				if ra < tc.lo || ra > tc.hi {
					t.Fatalf("Retry-After %d, want %d..%d", ra, tc.lo, tc.hi)
				}
				seen[ra]++
			}
			if len(seen) != tc.hi-tc.lo+1 {
				t.Errorf("values seen %v, want every value in %d..%d (jitter)", seen, tc.lo, tc.hi)
			}
			for s := range seen {
				if h := g.replyHeaders(s); h[0] != [2]string{"retry-after", strconv.Itoa(s)} {
					t.Errorf("headers %q", h)
				}
			}
		})
	}
}

// The pressure that raises Retry-After is the process's 429 count in the last
// tick period, published by every member on its tick.
func TestGuard_pressureFromTicks(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	cfg := `{"max_inflight": 1, "retry_after_seconds": 2}`
	a := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	b := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	b.windowRejects = 3
	b.OnTick()
	a.windowRejects = 2
	a.OnTick()
	if a.pressure != 5 {
		t.Fatalf("pressure %d, want 5", a.pressure)
	}
	if ra := a.retryAfter(1); ra < 12 || ra > 18 {
		t.Errorf("Retry-After %d, want 12..18", ra)
	}
}

func TestGuard_acquireReleaseAllocs(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	st := p.store("")
	cfg := `{"max_inflight": 100, "per_authority": {"a.example": {"max_inflight": 50}}}`
	g := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	other := newTestGuard(t, cfg, st, m, &fakeHost{}, clk)
	other.acquire(0)
	for _, ai := range []int{-1, 0} {
		allocs := testing.AllocsPerRun(1000, func() {
			if g.acquire(ai) != admitted {
				t.Fatal("acquire")
			}
			g.release(ai)
		})
		if allocs != 0 {
			t.Errorf("authority %d: %v allocs per acquire/release, want 0", ai, allocs)
		}
	}
	// A rejection with its 429 reply.
	h := &nopHost{}
	g.host = h
	full := newTestGuard(t, `{"max_inflight": 1}`, p.store("full"), m, h, clk)
	full.acquire(-1)
	checkRejectAllocs(t, full)
}

// checkRejectAllocs fails unless a stream that full (a guard at its cap)
// rejects costs no allocation and never creates the inner context.
func checkRejectAllocs(t *testing.T, full *Guard) {
	t.Helper()
	inner := &innerFactory{}
	next := inner.new
	s := &stream{g: full, next: next, ai: -1}
	allocs := testing.AllocsPerRun(1000, func() {
		*s = stream{g: full, next: next, ai: -1}
		s.OnHttpRequestHeaders(3, true)
		s.OnHttpStreamDone()
	})
	if allocs != 0 || inner.created != 0 {
		t.Errorf("%v allocs per rejected stream (inner created %d), want 0", allocs, inner.created)
	}
}

// TestGuard_authorityReading: per_authority keys and request authorities
// are read as the rule-set choice reads them (httpsyntax): case, one
// trailing dot and surrounding spaces do not change the entry; the
// authority with its port wins over its host.
func TestGuard_authorityReading(t *testing.T) {
	g := newTestGuard(t, `{"per_authority": {"A.example.": {"max_inflight": 1}, "a.example:8443": {"max_inflight": 1}, "[::1]": {"max_inflight": 1}}}`,
		newFakeProcess().store(""), newFakeMetrics(), &fakeHost{}, newFakeClock())
	host, port, v6 := g.authorityIndex("a.example"), g.authorityIndex("a.example:8443"), g.authorityIndex("[::1]")
	if host < 0 || port < 0 || v6 < 0 || host == port {
		t.Fatalf("entries: host %d, host:port %d, [::1] %d", host, port, v6)
	}
	for a, want := range map[string]int{
		"a.example": host, "A.EXAMPLE.": host, " a.example ": host, "a.example:80": host, "a.example.:80": host,
		"a.example:8443": port, "A.Example.:8443": port,
		"[::1]:8080": v6, "b.example": -1, "": -1,
	} {
		if got := g.authorityIndex(a); got != want {
			t.Errorf("authorityIndex(%q) = %d, want %d", a, got, want)
		}
	}
}
