package admission

import (
	crand "crypto/rand"
	"errors"
	"sort"
	"strconv"

	"github.com/wafguard/wafguard/internal/httpsyntax"
)

// Metric names, defined once in Start. Labels are in the name, as in
// docs/admission.md; reason is the last label so a `[a-z_]+` tag regex
// cannot swallow another label.
const (
	MetricAdmitted          = "wafguard_admission_admitted"
	MetricRejectedCap       = "wafguard_admission_rejected_reason=cap"
	MetricRejectedAuthority = "wafguard_admission_rejected_reason=authority_cap"
	MetricRejectedBodySize  = "wafguard_admission_rejected_reason=body_size"
	MetricRejectedCAS       = "wafguard_admission_rejected_reason=cas_exhausted"
	MetricRejectedVMCap     = "wafguard_admission_rejected_reason=vm_cap"
	MetricRejectedMemory    = "wafguard_admission_rejected_reason=memory"
	MetricHeapLive          = "wafguard_memory_heap_live_bytes"
	MetricHeapReserved      = "wafguard_memory_reserved_bytes"
	MetricHeapBudget        = "wafguard_memory_budget_bytes"
	MetricInflight          = "wafguard_admission_inflight"
	MetricCASConflicts      = "wafguard_admission_cas_conflicts"
	MetricCASExhausted      = "wafguard_admission_cas_exhausted"
	MetricRepairedSlots     = "wafguard_admission_repaired_slots"
	MetricStoreErrors       = "wafguard_admission_store_errors"
)

// verdict is the outcome of an admission attempt.
type verdict uint8

const (
	admitted verdict = iota
	rejectedCap
	rejectedAuthority
	rejectedCAS
	rejectedVMCap
	rejectedMemory
)

// Guard caps the HTTP streams in flight across every VM of one process and
// rejects request bodies over a size limit. One Guard serves one plugin (root
// context) on one VM.
//
// # Notes
//
//   - A Guard is used by one VM thread only, so it has no locks. Its scratch
//     buffer is reused by every shared-data write.
//   - An admitted stream holds one slot, taken in its request-headers
//     callback and released exactly once, in OnHttpStreamDone. A rejected
//     stream holds nothing and never creates the inner context.
//   - The counts of this member in shared data are always written from its
//     local counts, so any successful write (at the latest the next tick)
//     corrects an entry that a failed release left too high.
type Guard struct {
	cfg   Config
	store Store
	clock Clock
	host  host
	meter meter

	enabled bool // set by Start when any feature is on
	capOn   bool

	id    uint64 // member id in shared data
	beat  int64  // heartbeat (unix ms) written with this member's entry
	local uint32 // slots held by streams of this Guard
	vm    uint32 // streams of this Guard admitted and not done
	mem   memGuard
	auth  []authSlot
	index map[string]int // lower-case authority -> index in auth

	windowRejects    uint32 // 429s since the last tick
	publishedRejects uint32 // 429s in the last tick period, as published
	pressure         uint64 // 429s in the process during the last tick period

	buf []byte
	rng uint64

	retryHeaders [][][2]string // by Retry-After seconds, built on first use
	headers413   [][2]string
	body429      []byte // reject_body, or the default text
	m            metrics
}

type authSlot struct {
	name  string
	hash  uint64
	cap   uint32
	local uint32
}

type metrics struct {
	admitted, rejectedCap, rejectedAuthority, rejectedBody, rejectedCAS counter
	rejectedVMCap, rejectedMemory                                       counter
	conflicts, exhausted, repaired, storeErrors                         counter
	inflight                                                            gauge
}

// Option changes how New builds a Guard.
type Option func(*Guard)

// WithClock sets the clock used for heartbeats (default SystemClock).
func WithClock(c Clock) Option { return func(g *Guard) { g.clock = c } }

var (
	body429 = []byte("too many requests in flight, retry later\n")
	body413 = []byte("request body too large\n")
)

// New returns a Guard for the parsed admission configuration (ParseConfig,
// or pluginconfig.Parse for the whole plugin configuration), using store for
// the shared counts. It makes no host calls; Start does.
func New(cfg Config, store Store, opts ...Option) *Guard {
	g := &Guard{cfg: cfg, store: store, clock: SystemClock{}, host: proxyHost{}, meter: proxyHost{}}
	for _, o := range opts {
		o(g)
	}
	g.capOn = cfg.capOn()
	names := make([]string, 0, len(cfg.PerAuthority))
	for name := range cfg.PerAuthority {
		names = append(names, name)
	}
	sort.Strings(names)
	g.index = make(map[string]int, len(names))
	for i, name := range names {
		g.auth = append(g.auth, authSlot{name: name, hash: authorityHash(name), cap: uint32(cfg.PerAuthority[name].MaxInflight)})
		g.index[name] = i
	}
	g.id = randomID()
	g.rng = randomID() | 1
	return g
}

// Config returns the validated configuration.
func (g *Guard) Config() Config { return g.cfg }

// Start defines the metrics, builds the replies, sets the tick period and
// registers this member in shared data. Call it from OnPluginStart. With
// admission off it does nothing.
func (g *Guard) Start() error {
	if g.mem.rt != nil {
		if err := g.mem.start(g.meter); err != nil {
			return err
		}
	}
	if !g.capOn && g.cfg.MaxRequestBodyBytes == 0 && g.cfg.MaxInflightPerVM == 0 && !g.mem.on {
		return nil
	}
	g.m = metrics{
		rejectedVMCap:     g.meter.counter(MetricRejectedVMCap),
		rejectedMemory:    g.meter.counter(MetricRejectedMemory),
		admitted:          g.meter.counter(MetricAdmitted),
		rejectedCap:       g.meter.counter(MetricRejectedCap),
		rejectedAuthority: g.meter.counter(MetricRejectedAuthority),
		rejectedBody:      g.meter.counter(MetricRejectedBodySize),
		rejectedCAS:       g.meter.counter(MetricRejectedCAS),
		conflicts:         g.meter.counter(MetricCASConflicts),
		exhausted:         g.meter.counter(MetricCASExhausted),
		repaired:          g.meter.counter(MetricRepairedSlots),
		storeErrors:       g.meter.counter(MetricStoreErrors),
		inflight:          g.meter.gauge(MetricInflight),
	}
	g.headers413 = [][2]string{{"content-type", "text/plain; charset=utf-8"}}
	g.body429 = body429
	if g.cfg.RejectBody != nil {
		g.body429 = g.cfg.RejectBody
	}
	maxRA := g.cfg.RetryAfterMaxSeconds + (g.cfg.RetryAfterMaxSeconds+1)/2
	g.retryHeaders = make([][][2]string, maxRA+1)
	for s := g.cfg.RetryAfterSeconds; s <= g.cfg.RetryAfterSeconds+(g.cfg.RetryAfterSeconds+1)/2; s++ {
		g.replyHeaders(s)
	}
	if g.capOn || g.mem.on {
		if err := g.host.setTickPeriod(uint32(g.cfg.TickPeriodMS)); err != nil {
			return errors.New("admission: setting the tick period: " + err.Error())
		}
	}
	if g.capOn {
		g.register()
	}
	g.enabled = true
	return nil
}

// Ticking reports whether Start set a tick period (the cap or the memory
// guard is on), so that the plugin's OnTick runs.
func (g *Guard) Ticking() bool { return g.enabled && (g.capOn || g.mem.on) }

// OnTick publishes the VM's live heap (with the memory guard on) and this
// member's heartbeat and counts, and removes members whose heartbeat is
// older than stale_after_ms, returning their slots. Call it from the
// plugin's OnTick.
func (g *Guard) OnTick() {
	if !g.enabled {
		return
	}
	g.mem.tick()
	if !g.capOn {
		return
	}
	g.publishedRejects = g.windowRejects
	g.windowRejects = 0
	g.heartbeat()
}

// Done takes back what this guard added to the memory guard's gauges
// (live heap, reserved, budget): Envoy replaced the plugin's
// configuration, and the gauges are sums over the configurations in
// force, each VM's once. Streams still open keep their admission slots
// and reservations until they end. Call it from the plugin's
// OnPluginDone.
func (g *Guard) Done() { g.mem.withdraw() }

// register draws a new id while the current one is already in use (a
// collision of 64 random bits, or a copy of this VM's memory), then writes
// the first heartbeat.
func (g *Guard) register() {
	for i := 0; i < 4; i++ {
		v, _, err := g.store.Get(g.cfg.SharedDataKey)
		if err != nil {
			break
		}
		n, ok := stateValid(v)
		if !ok || !hasMember(v, n, g.id) {
			break
		}
		g.id = randomID()
	}
	g.heartbeat()
}

func hasMember(v []byte, n int, id uint64) bool {
	off := headerSize
	for i := 0; i < n; i++ {
		m, _ := memberAt(v, off)
		if m.id == id {
			return true
		}
		off += m.size
	}
	return false
}

// heartbeat rewrites the value with this member's entry (new beat, local
// counts) and without the stale members.
func (g *Guard) heartbeat() {
	now := g.clock.Now().UnixMilli()
	g.beat = now
	stale := int64(g.cfg.StaleAfterMS)
	for attempt := 0; ; attempt++ {
		v, cas, ok := g.get()
		if !ok {
			return
		}
		n, valid := stateValid(v)
		if !valid {
			g.corrupt()
			v, n = nil, 0
		}
		b := g.grow(headerSize + len(v) + g.ownSize())
		p, count := headerSize, 0
		var ownOld, evicted, evictedMembers uint32
		var rejects uint64
		off := headerSize
		for i := 0; i < n; i++ {
			m, _ := memberAt(v, off)
			off += m.size
			switch {
			case m.id == g.id:
				ownOld = m.inflight
			case now-m.beat > stale:
				evicted += m.inflight
				evictedMembers++
			default:
				p += copy(b[p:], v[m.off:m.off+m.size])
				count++
				rejects += uint64(m.rejects)
			}
		}
		if count+1 > maxStateMembers {
			g.storeError("admission: too many members in shared data")
			return
		}
		g.putOwn(b[p:])
		p += g.ownSize()
		putHeader(b, count+1)
		err := g.store.Set(g.cfg.SharedDataKey, b[:p], cas)
		if err == nil {
			g.settle(ownOld, evicted)
			g.pressure = rejects + uint64(g.publishedRejects)
			return
		}
		if !g.conflict(err, attempt) {
			return
		}
	}
}

// acquire takes a slot for a stream (and for its authority when ai >= 0).
func (g *Guard) acquire(ai int) verdict {
	var hash uint64
	if ai >= 0 {
		hash = g.auth[ai].hash
	}
	for attempt := 0; ; attempt++ {
		v, cas, ok := g.get()
		if !ok {
			break
		}
		s, valid := g.scan(v, hash, ai >= 0)
		if !valid {
			g.corrupt()
			v, s = nil, scanResult{own: -1}
		}
		if g.cfg.MaxInflight > 0 && s.others+uint64(g.local) >= uint64(g.cfg.MaxInflight) {
			return rejectedCap
		}
		if ai >= 0 && s.othersAuth+uint64(g.auth[ai].local) >= uint64(g.auth[ai].cap) {
			return rejectedAuthority
		}
		g.take(ai, 1)
		err := g.store.Set(g.cfg.SharedDataKey, g.encode(v, s), cas)
		if err == nil {
			g.settle(s.ownOld, 0)
			g.m.admitted.Increment(1)
			return admitted
		}
		g.take(ai, -1)
		if !g.conflict(err, attempt) {
			break
		}
	}
	if g.cfg.FailOpen {
		// Counted locally; the next successful write of this member (at the
		// latest its next tick) publishes the slot.
		g.take(ai, 1)
		g.m.admitted.Increment(1)
		return admitted
	}
	return rejectedCAS
}

// release returns a stream's slot. When the write fails, the entry stays
// too high (which only errs on the side of rejecting) until the next
// successful write of this member.
func (g *Guard) release(ai int) {
	g.take(ai, -1)
	for attempt := 0; ; attempt++ {
		v, cas, ok := g.get()
		if !ok {
			return
		}
		s, valid := g.scan(v, 0, false)
		if !valid {
			g.corrupt()
			v, s = nil, scanResult{own: -1}
		}
		err := g.store.Set(g.cfg.SharedDataKey, g.encode(v, s), cas)
		if err == nil {
			g.settle(s.ownOld, 0)
			return
		}
		if !g.conflict(err, attempt) {
			return
		}
	}
}

func (g *Guard) take(ai int, d int32) {
	g.local = uint32(int32(g.local) + d)
	if ai >= 0 {
		g.auth[ai].local = uint32(int32(g.auth[ai].local) + d)
	}
}

// get reads the value; a missing key is an empty value with cas 0.
func (g *Guard) get() ([]byte, uint32, bool) {
	v, cas, err := g.store.Get(g.cfg.SharedDataKey)
	switch {
	case err == nil:
		return v, cas, true
	case err == ErrNotFound:
		return nil, 0, true
	}
	g.storeError("admission: reading shared data: " + err.Error())
	return nil, 0, false
}

// conflict accounts for a failed Set and reports whether to try again.
func (g *Guard) conflict(err error, attempt int) bool {
	if err != ErrCASMismatch {
		g.storeError("admission: writing shared data: " + err.Error())
		return false
	}
	g.m.conflicts.Increment(1)
	if attempt >= g.cfg.CASRetries {
		g.m.exhausted.Increment(1)
		return false
	}
	return true
}

// settle updates the in-flight gauge after a successful write: the gauge is
// the sum of the entries in shared data, each write adding its change.
func (g *Guard) settle(ownOld, evicted uint32) {
	if evicted > 0 {
		g.m.repaired.Increment(uint64(evicted))
	}
	if d := int64(g.local) - int64(ownOld) - int64(evicted); d != 0 {
		g.m.inflight.Add(d)
	}
}

func (g *Guard) storeError(msg string) {
	g.m.storeErrors.Increment(1)
	g.host.logWarn(msg)
}

// corrupt handles a value this code cannot read: it is replaced. Every other
// member adds its entry back on its next write, so the counts heal within
// one tick period.
func (g *Guard) corrupt() {
	g.storeError("admission: shared data value is malformed, replacing it")
}

type scanResult struct {
	n          int
	own        int // offset of this member's entry, -1 if absent
	ownSize    int
	ownOld     uint32
	others     uint64
	othersAuth uint64
}

// scan sums the other members' counts in a value, and finds this member's
// entry. It reports false for a malformed value.
func (g *Guard) scan(v []byte, hash uint64, withAuth bool) (scanResult, bool) {
	s := scanResult{own: -1}
	if len(v) == 0 {
		return s, true
	}
	if len(v) < headerSize || string(v[:4]) != stateMagic {
		return s, false
	}
	s.n = int(le.Uint16(v[4:]))
	off := headerSize
	for i := 0; i < s.n; i++ {
		m, ok := memberAt(v, off)
		if !ok {
			return s, false
		}
		if m.id == g.id {
			s.own, s.ownSize, s.ownOld = off, m.size, m.inflight
		} else {
			s.others += uint64(m.inflight)
			if withAuth {
				s.othersAuth += uint64(m.authCount(v, hash))
			}
		}
		off += m.size
	}
	return s, off == len(v)
}

// encode returns v with this member's entry rewritten from its local counts
// (or added, when absent), in the scratch buffer.
func (g *Guard) encode(v []byte, s scanResult) []byte {
	own := g.ownSize()
	if s.own >= 0 && s.ownSize == own {
		b := g.grow(len(v))
		copy(b, v)
		g.putOwn(b[s.own:])
		return b
	}
	if s.own < 0 {
		// Added back after another member removed it as stale (or after a
		// lost first write): a fresh heartbeat, or it would be removed again
		// before its next tick.
		g.beat = g.clock.Now().UnixMilli()
	}
	base, n := len(v), s.n
	if base == 0 {
		base = headerSize
	}
	if s.own >= 0 {
		base -= s.ownSize
		n--
	}
	b := g.grow(base + own)
	putHeader(b, n+1)
	p := headerSize
	if s.own >= 0 {
		p += copy(b[p:], v[headerSize:s.own])
		p += copy(b[p:], v[s.own+s.ownSize:])
	} else if len(v) > 0 {
		p += copy(b[p:], v[headerSize:])
	}
	g.putOwn(b[p:])
	return b
}

// retryAfter returns the Retry-After seconds of a 429: a base that grows by
// retry_after_seconds for every cap's worth of 429s the process sent in the
// last tick period, up to retry_after_max_seconds, plus a jitter of up to
// half the base so that rejected clients do not come back in lockstep.
func (g *Guard) retryAfter(capN uint32) int {
	base, max := g.cfg.RetryAfterSeconds, g.cfg.RetryAfterMaxSeconds
	b := base
	if capN > 0 {
		level := g.pressure / uint64(capN)
		if level >= uint64(max) {
			b = max
		} else {
			b = base * (1 + int(level))
		}
	}
	if b > max {
		b = max
	}
	j := (b + 1) / 2
	return b + int(g.next()%uint64(j+1))
}

// replyHeaders returns the 429 headers for a Retry-After value, building
// them on first use.
func (g *Guard) replyHeaders(s int) [][2]string {
	h := g.retryHeaders[s]
	if h == nil {
		ct := g.cfg.RejectContentType
		if ct == "" {
			ct = DefaultRejectContentType
		}
		h = make([][2]string, 0, 2+len(g.cfg.RejectHeaders))
		h = append(h, [2]string{"retry-after", strconv.Itoa(s)})
		if len(g.body429) != 0 {
			h = append(h, [2]string{"content-type", ct})
		}
		h = append(h, g.cfg.RejectHeaders...)
		g.retryHeaders[s] = h
	}
	return h
}

// next is xorshift64*: jitter needs spread, not secrecy.
func (g *Guard) next() uint64 {
	x := g.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	g.rng = x
	return x * 2685821657736338717
}

// authorityIndex returns the per_authority entry for an :authority value:
// the authority with its port first, then its host alone, both in
// httpsyntax's normal form.
func (g *Guard) authorityIndex(a string) int {
	// httpsyntax's reading, shared with the rule-set choice: lower case,
	// no trailing dot; no allocation for an authority in that form.
	if i, ok := g.index[httpsyntax.AuthorityWithPort(a)]; ok {
		return i
	}
	if i, ok := g.index[httpsyntax.AuthorityHost(a)]; ok {
		return i
	}
	return -1
}

func randomID() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails since Go 1.24; it aborts instead
	return le.Uint64(b[:])
}
