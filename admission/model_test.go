package admission

import (
	"math/rand"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// The model test runs many simulated VMs of one process against one fake
// shared-data store. Each VM is single-threaded, as in Envoy, but between a
// VM's get and its set (inside the store calls) the schedule runs other VMs'
// operations, chosen by a seeded random source: streams start and end, VMs
// tick, die without running their streams' done callbacks, and are replaced.
// The invariants:
//   - the streams that reached the upstream never exceed the cap (process and
//     per authority), when the retries-exhausted mode is reject;
//   - no count is ever negative (wrapped around);
//   - once every stream has ended and the dead VMs are past their stale
//     time, the shared counts and the in-flight gauge are exactly 0.

type simVM struct {
	g       *Guard
	h       *fakeHost
	busy    bool
	dead    bool
	streams []*simStream
	next    uint32
	current *simStream // the stream whose request headers are being handled
	inner   func(uint32) types.HttpContext
}

type simStream struct {
	ctx      types.HttpContext
	auth     int // index into sim.authorities, -1 for none
	upstream bool
}

type sim struct {
	t           *testing.T
	rng         *rand.Rand
	clk         *fakeClock
	p           *fakeProcess
	m           *fakeMetrics
	config      string
	cap         int
	authCap     []int
	authorities []string
	failOpen    bool
	tickMS      int64
	staleMS     int64
	interleave  float64

	vms      []*simVM
	upstream int
	perAuth  []int
	maxSeen  int
	depth    int
	ops      int
	killed   int
}

// schedStore lets other VMs run before each call of one VM.
type schedStore struct {
	s  *sim
	vm *simVM
	st Store
}

func (c *schedStore) Get(key string) ([]byte, uint32, error) {
	c.s.interfere()
	return c.st.Get(key)
}

func (c *schedStore) Set(key string, v []byte, cas uint32) error {
	c.s.interfere()
	return c.st.Set(key, v, cas)
}

func (s *sim) interfere() {
	if s.depth >= 3 || s.rng.Float64() >= s.interleave {
		return
	}
	s.depth++
	for n := 1 + s.rng.Intn(3); n > 0; n-- {
		s.step(false)
	}
	s.depth--
}

func (s *sim) addVM() {
	vm := &simVM{h: &fakeHost{}, next: 2}
	vm.inner = func(uint32) types.HttpContext { return s.admit(vm.current) }
	st := &schedStore{s: s, vm: vm, st: s.p.store("")}
	g := New(mustParse(s.t, s.config), st, WithClock(s.clk))
	g.host, g.meter = vm.h, s.m
	vm.busy = true
	if err := g.Start(); err != nil {
		s.t.Fatal(err)
	}
	vm.busy = false
	vm.g = g
	s.vms = append(s.vms, vm)
}

func (s *sim) pickVM() *simVM {
	if len(s.vms) == 0 {
		return nil
	}
	for tries := 0; tries < 8; tries++ {
		vm := s.vms[s.rng.Intn(len(s.vms))]
		if !vm.dead && !vm.busy && vm.g != nil {
			return vm
		}
	}
	return nil
}

// innerFor is the inner factory: reaching it means the stream was admitted
// and goes to the upstream.
func (s *sim) admit(st *simStream) types.HttpContext {
	st.upstream = true
	s.upstream++
	if s.upstream > s.maxSeen {
		s.maxSeen = s.upstream
	}
	if !s.failOpen && s.cap > 0 && s.upstream > s.cap {
		s.t.Fatalf("op %d: %d streams at the upstream, cap %d", s.ops, s.upstream, s.cap)
	}
	if st.auth >= 0 {
		s.perAuth[st.auth]++
		if !s.failOpen && s.perAuth[st.auth] > s.authCap[st.auth] {
			s.t.Fatalf("op %d: %d streams for %s, cap %d", s.ops, s.perAuth[st.auth], s.authorities[st.auth], s.authCap[st.auth])
		}
	}
	return &types.DefaultHttpContext{}
}

func (s *sim) startStream(vm *simVM, stopping bool) {
	if stopping {
		return
	}
	st := &simStream{auth: -1}
	authority := "other.example"
	if len(s.authorities) > 0 {
		if i := s.rng.Intn(len(s.authorities) + 1); i < len(s.authorities) {
			st.auth, authority = i, s.authorities[i]
		}
	}
	vm.h.headers = [][2]string{{":authority", authority}}
	vm.next++
	st.ctx = vm.g.Wrap(vm.next, vm.inner)
	vm.streams = append(vm.streams, st)
	vm.current = st
	st.ctx.OnHttpRequestHeaders(1, true)
	vm.current = nil
}

func (s *sim) endStream(vm *simVM) {
	if len(vm.streams) == 0 {
		return
	}
	i := s.rng.Intn(len(vm.streams))
	st := vm.streams[i]
	vm.streams[i] = vm.streams[len(vm.streams)-1]
	vm.streams = vm.streams[:len(vm.streams)-1]
	s.leaveUpstream(st)
	st.ctx.OnHttpStreamDone()
}

func (s *sim) leaveUpstream(st *simStream) {
	if st.upstream {
		st.upstream = false
		s.upstream--
		if st.auth >= 0 {
			s.perAuth[st.auth]--
		}
	}
}

// kill makes a VM vanish as a trap does: no more callbacks, its streams end
// at the upstream (Envoy answers them 503) without OnHttpStreamDone.
func (s *sim) kill(vm *simVM) {
	vm.dead = true
	for _, st := range vm.streams {
		s.leaveUpstream(st)
	}
	vm.streams = nil
	s.killed++
}

// step runs one random operation on one idle VM.
func (s *sim) step(stopping bool) {
	vm := s.pickVM()
	if vm == nil {
		return
	}
	s.ops++
	vm.busy = true
	defer func() { vm.busy = false }()
	switch r := s.rng.Intn(100); {
	case r < 50:
		s.startStream(vm, stopping)
	case r < 95:
		s.endStream(vm)
	default:
		vm.g.OnTick()
	}
}

func (s *sim) tickAll() {
	for _, vm := range s.vms {
		if !vm.dead && !vm.busy {
			vm.busy = true
			vm.g.OnTick()
			vm.busy = false
		}
	}
}

func (s *sim) checkCounts() {
	s.t.Helper()
	v, _, err := s.p.store("").Get(DefaultSharedDataKey)
	if err == ErrNotFound {
		return
	}
	n, ok := stateValid(v)
	if !ok {
		s.t.Fatalf("op %d: malformed value", s.ops)
	}
	off := headerSize
	for i := 0; i < n; i++ {
		m, _ := memberAt(v, off)
		if m.inflight > 1<<20 {
			s.t.Fatalf("op %d: member count %d (wrapped below zero)", s.ops, int32(m.inflight))
		}
		off += m.size
	}
	for _, vm := range s.vms {
		if vm.dead || vm.busy {
			continue
		}
		held := 0
		for _, st := range vm.streams {
			if st.upstream {
				held++
			}
		}
		if int(vm.g.local) != held {
			s.t.Fatalf("op %d: VM local count %d, streams holding a slot %d", s.ops, vm.g.local, held)
		}
	}
}

type modelCase struct {
	name       string
	config     string
	cap        int
	authCap    []int
	auths      []string
	failOpen   bool
	vms        int
	steps      int
	kills      bool
	interleave float64
}

func runModel(t *testing.T, tc modelCase, seed int64) (conflicts, sets int64) {
	s := &sim{
		t: t, rng: rand.New(rand.NewSource(seed)), clk: newFakeClock(), p: newFakeProcess(), m: newFakeMetrics(),
		config: tc.config, cap: tc.cap, authCap: tc.authCap, authorities: tc.auths, failOpen: tc.failOpen,
		tickMS: 100, staleMS: 500, interleave: tc.interleave, perAuth: make([]int, len(tc.auths)),
	}
	for i := 0; i < tc.vms; i++ {
		s.addVM()
	}
	setsBefore := s.p.sets
	for i := 0; i < tc.steps; i++ {
		if i%20 == 0 {
			s.clk.advance(25)
			if i%80 == 0 {
				s.tickAll()
			}
		}
		if tc.kills && i%500 == 250 {
			if vm := s.pickVM(); vm != nil {
				s.kill(vm)
				s.addVM() // FAIL_RELOAD builds a fresh VM
			}
		}
		s.step(false)
		s.checkCounts()
	}
	// Drain: end every stream (other VMs still interfere, but start nothing).
	for {
		left := 0
		for _, vm := range s.vms {
			if !vm.dead {
				left += len(vm.streams)
			}
		}
		if left == 0 {
			break
		}
		for _, vm := range s.vms {
			if !vm.dead && len(vm.streams) > 0 {
				vm.busy = true
				s.endStream(vm)
				vm.busy = false
			}
		}
	}
	s.interleave = 0
	s.clk.advance(s.staleMS + s.tickMS)
	s.tickAll()
	s.tickAll()
	total, members := sharedTotal(t, s.p.store(""), DefaultSharedDataKey)
	live := 0
	for _, vm := range s.vms {
		if !vm.dead {
			live++
		}
	}
	if total != 0 || members != live {
		t.Errorf("seed %d: after drain total %d members %d, want 0 and %d live", seed, total, members, live)
	}
	if g := s.m.get(MetricInflight); g != 0 {
		t.Errorf("seed %d: in-flight gauge %d, want 0", seed, g)
	}
	if s.upstream != 0 {
		t.Errorf("seed %d: upstream %d", seed, s.upstream)
	}
	if !tc.failOpen && tc.cap > 0 && s.maxSeen != tc.cap {
		t.Logf("seed %d: upstream peaked at %d of cap %d", seed, s.maxSeen, tc.cap)
	}
	if tc.kills && s.m.get(MetricRepairedSlots) == 0 && s.killed > 0 {
		t.Logf("seed %d: %d VMs killed, no slots to repair", seed, s.killed)
	}
	return s.m.get(MetricCASConflicts), int64(s.p.sets - setsBefore)
}

func TestGuard_model(t *testing.T) {
	const base = `"tick_period_ms": 100, "stale_after_ms": 500`
	tests := []modelCase{
		{name: "cap", config: `{"max_inflight": 8, ` + base + `}`, cap: 8, vms: 6, steps: 4000, interleave: 0.3},
		{name: "cap with kills", config: `{"max_inflight": 8, ` + base + `}`, cap: 8, vms: 6, steps: 4000, kills: true, interleave: 0.3},
		{name: "few retries", config: `{"max_inflight": 5, "cas_retries": 1, ` + base + `}`, cap: 5, vms: 8, steps: 4000, kills: true, interleave: 0.6},
		{name: "per authority", config: `{"max_inflight": 10, "per_authority": {"a.example": {"max_inflight": 3}, "b.example": {"max_inflight": 2}}, ` + base + `}`,
			cap: 10, authCap: []int{3, 2}, auths: []string{"a.example", "b.example"}, vms: 5, steps: 4000, kills: true, interleave: 0.3},
		{name: "fail open", config: `{"max_inflight": 4, "cas_retries": 0, "on_cas_exhausted": "admit", ` + base + `}`,
			cap: 4, failOpen: true, vms: 6, steps: 3000, kills: true, interleave: 0.6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var conflicts, sets int64
			for seed := int64(1); seed <= 10; seed++ {
				c, n := runModel(t, tc, seed)
				conflicts += c
				sets += n
				if t.Failed() {
					t.Fatalf("seed %d failed", seed)
				}
			}
			t.Logf("CAS conflicts: %d of %d writes (%.1f%%)", conflicts, sets, 100*float64(conflicts)/float64(sets))
		})
	}
}
