package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"

	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// Defaults of the memory object. docs/admission.md explains each choice.
const (
	// DefaultMaxHeapBytes leaves a quarter of the engine's 1 GiB linear
	// memory (Envoy's --wasm_max_mem_pages default, 16,384 pages) for
	// what the Go runtime holds besides the heap and for fragmentation:
	// linear memory never shrinks.
	DefaultMaxHeapBytes = 768 << 20
	// DefaultStreamReserveBytes is what an admitted stream reserves before
	// its body: a transaction of the CRS on a JSON POST of the bench pool
	// holds about 0.2-0.5 MiB while it is open.
	DefaultStreamReserveBytes = 256 << 10
	// DefaultBodyReserveFactor is what each request body byte reserves:
	// the body is held by the filter and by Coraza, and parsed into
	// arguments.
	DefaultBodyReserveFactor = 2
	// DefaultGCPercent is the collector's GOGC once the plugin has
	// started: Go's own default.
	DefaultGCPercent = 100
	// StartGCPercent is the collector's GOGC while the rule sets compile,
	// whatever memory.gc_percent or GOGC say. A VM's linear memory never
	// shrinks, so it keeps the peak of its start for its whole life. With
	// the compile's own collections where its garbage is largest
	// (filter's compilePreselected), 25 takes a VM with the CRS from
	// 22.5-23 to 20 MiB of linear memory after the start, for 0.05-0.09 s
	// more per VM start on V8 (docs/performance.md).
	StartGCPercent = 25
)

// Bounds of the memory keys.
const (
	minHeapBytes        = 16 << 20
	maxHeapBytes        = 4 << 30 // a wasm32 linear memory
	maxStreamReserve    = 1 << 30
	maxBodyReserveRatio = 64
	minGCPercent        = 10
	maxGCPercent        = 1000
)

// MemoryConfig is the validated memory object of the plugin configuration.
type MemoryConfig struct {
	// MaxHeapBytes is this VM's heap budget: the Go runtime's soft memory
	// limit, and the level past which new streams are answered 429. 0
	// turns both off. GOMEMLIMIT in the VM's environment wins over it.
	MaxHeapBytes int64
	// StreamReserveBytes is reserved by every admitted stream.
	StreamReserveBytes int64
	// BodyReserveFactor × the request body size is reserved on top,
	// from Content-Length before the body arrives, else as it streams.
	BodyReserveFactor int64
	// GCPercent is the collector's GOGC after the plugin start: the heap
	// grows this many percent past what the last collection found live
	// before the next one runs. Lower holds less memory per VM for more
	// CPU per request. GOGC in the VM's environment wins over it.
	GCPercent int
}

type rawMemory struct {
	MaxHeapBytes       json.RawMessage `json:"max_heap_bytes"`
	StreamReserveBytes json.RawMessage `json:"stream_reserve_bytes"`
	BodyReserveFactor  json.RawMessage `json:"body_reserve_factor"`
	GCPercent          json.RawMessage `json:"gc_percent"`
}

const rawMemoryKeys = "max_heap_bytes, stream_reserve_bytes, body_reserve_factor, gc_percent"

// ParseMemoryConfig decodes and validates the plugin configuration's memory
// object. A nil or empty raw gives the defaults (the guard on).
func ParseMemoryConfig(raw json.RawMessage) (MemoryConfig, error) {
	c := MemoryConfig{
		MaxHeapBytes:       DefaultMaxHeapBytes,
		StreamReserveBytes: DefaultStreamReserveBytes,
		BodyReserveFactor:  DefaultBodyReserveFactor,
		GCPercent:          DefaultGCPercent,
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var r rawMemory
	if err := jsonstrict.Decode(raw, &r); err != nil {
		return MemoryConfig{}, objectError("memory", raw, rawMemoryKeys, err)
	}
	heap, err := intField("memory.max_heap_bytes", r.MaxHeapBytes, int(c.MaxHeapBytes), 0, maxHeapBytes,
		fmt.Sprintf("0 (off) or bytes from %d (16 MiB) to %d (4 GiB), e.g. 805306368 for 768 MiB", minHeapBytes, maxHeapBytes))
	if err == nil && heap != 0 && heap < minHeapBytes {
		err = fmt.Errorf("memory.max_heap_bytes: got %d, want 0 (off) or at least %d (16 MiB): the rule sets alone take more", heap, minHeapBytes)
	}
	if err != nil {
		return MemoryConfig{}, err
	}
	c.MaxHeapBytes = int64(heap)
	reserve, err := intField("memory.stream_reserve_bytes", r.StreamReserveBytes, int(c.StreamReserveBytes), 0, maxStreamReserve,
		fmt.Sprintf("bytes from 0 to %d", maxStreamReserve))
	if err != nil {
		return MemoryConfig{}, err
	}
	c.StreamReserveBytes = int64(reserve)
	factor, err := intField("memory.body_reserve_factor", r.BodyReserveFactor, int(c.BodyReserveFactor), 0, maxBodyReserveRatio,
		fmt.Sprintf("an integer from 0 to %d (bytes reserved per request body byte)", maxBodyReserveRatio))
	if err != nil {
		return MemoryConfig{}, err
	}
	c.BodyReserveFactor = int64(factor)
	gc, err := intField("memory.gc_percent", r.GCPercent, c.GCPercent, minGCPercent, maxGCPercent,
		fmt.Sprintf("an integer from %d to %d (Go's GOGC: 100 is its default, lower holds less memory for more CPU)", minGCPercent, maxGCPercent))
	if err != nil {
		return MemoryConfig{}, err
	}
	c.GCPercent = gc
	return c, nil
}

// memRuntime is the Go runtime as the memory guard uses it; tests replace it.
type memRuntime interface {
	// envLimit returns GOMEMLIMIT from the VM's environment.
	envLimit() (string, bool)
	// setLimit is debug.SetMemoryLimit.
	setLimit(int64) int64
	// envGC reports whether GOGC is set in the VM's environment;
	// setGC is debug.SetGCPercent.
	envGC() bool
	setGC(int) int
	// collect runs a garbage collection.
	collect()
	// readHeap reads, in one go, the heap the last collection found live and
	// the memory the runtime holds now (heap objects, dead ones not yet
	// freed included, stacks and runtime metadata), not counting what it
	// returned: what the soft limit holds under the budget.
	readHeap() (live, inUse uint64)
}

// goRuntime is memRuntime on the running Go runtime.
type goRuntime struct{ sample []rtmetrics.Sample }

func newGoRuntime() *goRuntime {
	return &goRuntime{sample: []rtmetrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}}
}

func (*goRuntime) envLimit() (string, bool) { return os.LookupEnv("GOMEMLIMIT") }
func (*goRuntime) setLimit(n int64) int64   { return debug.SetMemoryLimit(n) }
func (*goRuntime) envGC() bool {
	_, ok := os.LookupEnv("GOGC")
	return ok
}
func (*goRuntime) setGC(n int) int { return debug.SetGCPercent(n) }
func (*goRuntime) collect()        { runtime.GC() }
func (r *goRuntime) readHeap() (live, inUse uint64) {
	rtmetrics.Read(r.sample)
	total, released := value(r.sample[1]), value(r.sample[2])
	if released <= total {
		inUse = total - released
	}
	return value(r.sample[0]), inUse
}

func value(s rtmetrics.Sample) uint64 {
	if s.Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// memGuard is the memory side of a Guard: a heap budget for this VM and
// the reservations of its open streams.
//
// A new stream needs reserve + factor × Content-Length. It is admitted when
//
//	max(live, baseline + reserved) + need <= budget
//
// where live is the heap the last collection found live (it lags, but it
// counts what reservations underestimate), baseline the live heap at
// plugin start (the compiled rule sets), and reserved the sum of the
// reservations of the open streams (it counts a burst before any
// collection has seen it). A stream whose need alone does not fit
// (baseline + need > budget) can never be served and is answered 413; any
// other refusal is a 429 with reason memory. A body without Content-Length
// reserves as it arrives, under the same rule. When the body is complete,
// before the WAF reads it, the stream is checked once more against the
// live heap alone (settled). Both checks also refuse while the runtime
// holds more than the budget: the soft limit keeps it under unless the
// live heap has outgrown it, which the live figure shows only after the
// next collection ends.
type memGuard struct {
	rt       memRuntime
	cfg      MemoryConfig
	on       bool
	budget   int64
	baseline int64
	reserved int64
	fromEnv  bool // the budget is GOMEMLIMIT's

	heapGauge, reservedGauge, budgetGauge gauge
	heapShown, reservedShown              int64
	// withdrawn: the plugin context is done, and what it added to the
	// gauges was taken back; they are no longer written.
	withdrawn bool
	// published: the gauges carry this guard's figures (publish).
	published bool

	// shed is set when a stream was refused for memory since the last
	// tick, ended when an admitted stream ended.
	shed, ended bool
}

// memVerdict is the outcome of a reservation.
type memVerdict uint8

const (
	memFits memVerdict = iota
	memFull
	memNever
)

// Compiling makes the collector run often (StartGCPercent) while the rule
// sets compile, and returns the function that sets the steady value
// (memory.gc_percent) when they are built; with GOGC in the VM's
// environment, the environment's value. Without the memory guard's
// options (WithMemory) it changes nothing.
func (g *Guard) Compiling() (done func()) {
	rt := g.mem.rt
	if rt == nil {
		return func() {}
	}
	prev := rt.setGC(StartGCPercent)
	return func() {
		if rt.envGC() {
			rt.setGC(prev)
			return
		}
		rt.setGC(g.mem.cfg.GCPercent)
	}
}

// start sets the budget and the runtime's memory limit, and measures the
// baseline. It fails when the rule sets already take the whole budget.
func (m *memGuard) start(me meter) error {
	if env, ok := m.rt.envLimit(); ok && env != "" {
		// The runtime parsed GOMEMLIMIT at start-up; reading the limit
		// back (a negative argument changes nothing) gives its value.
		m.fromEnv = true
		m.budget = m.rt.setLimit(-1)
	} else if m.cfg.MaxHeapBytes > 0 {
		m.budget = m.cfg.MaxHeapBytes
		m.rt.setLimit(m.budget)
	}
	if m.budget <= 0 || m.budget == math.MaxInt64 {
		m.budget = 0
		return nil // off: max_heap_bytes 0, or GOMEMLIMIT=off
	}
	m.rt.collect()
	live, _ := m.rt.readHeap()
	m.baseline = int64(live)
	if m.baseline >= m.budget {
		src := fmt.Sprintf("memory.max_heap_bytes (%d)", m.budget)
		if m.fromEnv {
			src = fmt.Sprintf("GOMEMLIMIT (%d bytes)", m.budget)
		}
		return fmt.Errorf("memory: %s is not above the heap the rule sets already use (%d MiB after loading); raise it", src, m.baseline>>20)
	}
	m.on = true
	m.heapGauge = me.gauge(MetricHeapLive)
	m.reservedGauge = me.gauge(MetricHeapReserved)
	m.budgetGauge = me.gauge(MetricHeapBudget)
	// The gauges start at the first tick or stream (publish).
	return nil
}

// WithMemory turns the memory guard on with cfg (see memGuard); without it
// the Guard never looks at memory. The plugin passes it; native tests of
// the other features leave it out, since natively the heap is the whole
// test process's.
func WithMemory(cfg MemoryConfig) Option {
	return func(g *Guard) { g.mem.cfg, g.mem.rt = cfg, newGoRuntime() }
}

// withMemRuntime replaces the Go runtime under the memory guard (tests).
func withMemRuntime(rt memRuntime) Option { return func(g *Guard) { g.mem.rt = rt } }

// need is what a stream with a request body of n bytes reserves.
func (m *memGuard) need(n int64) int64 {
	if n > (maxHeapBytes<<1)/max(m.cfg.BodyReserveFactor, 1) {
		return math.MaxInt64 / 2 // more than any budget
	}
	return m.cfg.StreamReserveBytes + m.cfg.BodyReserveFactor*n
}

// grow reserves more for a stream that holds have and now needs need.
func (m *memGuard) grow(have, need int64) memVerdict {
	if need <= have {
		return memFits
	}
	if m.baseline+need > m.budget {
		return memNever
	}
	live, inUse := m.rt.readHeap()
	used := max(int64(live), m.baseline+m.reserved)
	if used+need-have > m.budget || int64(inUse) > m.budget {
		return memFull
	}
	m.reserved += need - have
	m.showReserved()
	return memFits
}

// settled reports whether the live heap the last collection found, plus
// what a stream holds, is within the budget: the check before the WAF
// gets a whole body. An admitted stream's transaction can cost far more
// than its reservation (rules that keep a cache per value), and a burst
// admits many streams before any of them reaches that point; by then the
// collections the budget triggers (the runtime's soft limit) have
// measured what the earlier ones hold.
//
// Both checks also refuse while the runtime holds more than the budget:
// the soft limit makes the collector hold it under the budget while the
// live heap allows; past it, the live heap itself is too large, before any
// collection has finished measuring it.
func (m *memGuard) settled(own int64) bool {
	live, inUse := m.rt.readHeap()
	return int64(live)+own <= m.budget && int64(inUse) <= m.budget
}

// release returns a stream's reservation.
func (m *memGuard) release(n int64) {
	if n == 0 {
		return
	}
	m.reserved -= n
	m.showReserved()
}

func (m *memGuard) showReserved() {
	if !m.publish() {
		return
	}
	m.reservedGauge.Add(m.reserved - m.reservedShown)
	m.reservedShown = m.reserved
}

// tick runs on every tick. The live figure changes only when a collection
// ends, and a VM that sheds allocates little, so after a burst the figure
// could keep the streams that have since ended counted, and the VM
// shedding, until something else triggers a collection. So a tick that
// follows a refusal for memory, with streams ended since the previous
// tick, runs one collection: at most one per tick period, only while
// shedding.
func (m *memGuard) tick() {
	if !m.on {
		return
	}
	if m.shed && m.ended {
		m.rt.collect()
	}
	m.shed, m.ended = false, false
	m.refresh()
}

// refresh publishes the live heap (the first publication reads it).
func (m *memGuard) refresh() {
	if m.published && !m.withdrawn {
		m.showHeap()
		return
	}
	m.publish()
}

func (m *memGuard) showHeap() {
	l, _ := m.rt.readHeap()
	live := int64(l)
	m.heapGauge.Add(live - m.heapShown)
	m.heapShown = live
}

// publish reports whether the guard writes the gauges, and adds its budget
// to theirs the first time. It does from the first tick or stream on, not
// from start: Envoy checks each new configuration by starting the plugin
// in a canary VM that it destroys without OnPluginDone (proxy-wasm's
// configuration canary), and what that VM added would stay in Envoy's sums
// for good, one VM's budget and heap more with every configuration pushed.
func (m *memGuard) publish() bool {
	if !m.on || m.withdrawn {
		return false
	}
	if !m.published {
		m.published = true
		m.budgetGauge.Add(m.budget)
		m.showHeap()
	}
	return true
}

// withdraw takes back what this guard added to the gauges, which Envoy
// sums over every VM and every plugin context in them.
func (m *memGuard) withdraw() {
	if !m.on || m.withdrawn {
		return
	}
	m.withdrawn = true
	if !m.published {
		return
	}
	m.heapGauge.Add(-m.heapShown)
	m.reservedGauge.Add(-m.reservedShown)
	m.budgetGauge.Add(-m.budget)
	m.heapShown, m.reservedShown = 0, 0
}
