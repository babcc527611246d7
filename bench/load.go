package bench

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Outcome counts the answers to one class of requests.
type Outcome struct {
	Passed  int `json:"passed"`  // 2xx
	Blocked int `json:"blocked"` // 403
	Limited int `json:"limited"` // 429
	Other   int `json:"other"`   // any other status
	Errors  int `json:"errors"`  // no HTTP answer (timeout, reset)
}

// Total is the number of requests the outcome counts.
func (o Outcome) Total() int { return o.Passed + o.Blocked + o.Limited + o.Other + o.Errors }

func (o *Outcome) add(x Outcome) {
	o.Passed += x.Passed
	o.Blocked += x.Blocked
	o.Limited += x.Limited
	o.Other += x.Other
	o.Errors += x.Errors
}

// Latency holds latency percentiles in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// Quantiles are the points of Latency, in its field order, for plots.
var Quantiles = []struct {
	Label string
	Q     float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p95", 0.95}, {"p99", 0.99}, {"p99.9", 0.999}, {"max", 1}}

// Values returns the percentiles in the order of Quantiles.
func (l Latency) Values() []float64 { return []float64{l.P50, l.P90, l.P95, l.P99, l.P999, l.Max} }

// latencyOf computes percentiles with the nearest-rank method; it sorts d.
func latencyOf(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.999999) - 1
		i = max(0, min(len(d)-1, i))
		return float64(d[i]) / float64(time.Millisecond)
	}
	return Latency{N: len(d), P50: at(0.50), P90: at(0.90), P95: at(0.95), P99: at(0.99), P999: at(0.999), Max: at(1)}
}

// Run is the result of one load run against one server.
type Run struct {
	Mode       string  `json:"mode"`        // "closed" or "open"
	Workers    int     `json:"workers"`     // closed loop: concurrent requests
	TargetRate float64 `json:"target_rate"` // open loop: requests/s
	Seconds    float64 `json:"seconds"`     // start to the last answer, in-flight requests included
	Requests   int     `json:"requests"`
	Answered   int     `json:"answered"` // requests with an HTTP answer
	// Aborted requests were still in flight when the drain time ran out;
	// they count nowhere else.
	Aborted    int     `json:"aborted"`
	Throughput float64 `json:"throughput"` // Answered / Seconds
	// Latency covers every answered request; Admitted leaves out 429s.
	Latency  Latency            `json:"latency"`
	Admitted Latency            `json:"admitted"`
	Classes  map[string]Outcome `json:"classes"`
	Kinds    map[string]Outcome `json:"kinds"`
	// Shapes is the latency of the answered requests of each shape
	// (Shapes, the unloaded run's): where a tail comes from.
	Shapes map[string]Latency `json:"shapes"`
	Errors map[string]int     `json:"error_samples,omitempty"`

	byClass  [numClasses]Outcome
	unknown  int
	lat, adm []time.Duration
	shapeLat map[string][]time.Duration
	kinds    map[string]*Outcome
	errs     map[string]int
}

// LoadOptions configure one run.
type LoadOptions struct {
	BaseURL  string
	Workers  int           // closed loop: fixed workers and connections
	Rate     float64       // open loop when > 0: requests/s
	Duration time.Duration // sending stops after it
	Timeout  time.Duration // per request
	// Drain is how long answers to requests still in flight may take after
	// Duration; then their connections are closed and they count as
	// aborted, not as errors. 0 means Timeout.
	Drain time.Duration
	// Progress, when set, is called about once a second.
	Progress func(done int, rps float64)
}

// Load runs one bounded load run of the pool against a server: a closed
// loop of opt.Workers when opt.Rate is 0, else an open loop at opt.Rate.
// The pool is replayed in order from its first request, so every run sends
// the same sequence.
func Load(ctx context.Context, pool *Pool, opt LoadOptions) (*Run, error) {
	if opt.Workers <= 0 || opt.Duration <= 0 || opt.Timeout <= 0 {
		return nil, fmt.Errorf("load: workers %d, duration %s, timeout %s: want all positive", opt.Workers, opt.Duration, opt.Timeout)
	}
	var next atomic.Uint64
	n := uint64(len(pool.Requests))
	headers := make([]http.Header, n) // built once: vegeta only reads them
	for i := range pool.Requests {
		headers[i] = pool.Requests[i].HTTPHeader()
	}
	targeter := func(t *vegeta.Target) error {
		i := (next.Add(1) - 1) % n
		r := &pool.Requests[i]
		t.Method, t.URL, t.Body, t.Header = r.Method, opt.BaseURL+r.Path, r.Body, headers[i]
		return nil
	}
	run := &Run{Mode: "closed", Workers: opt.Workers, TargetRate: opt.Rate, kinds: map[string]*Outcome{}, errs: map[string]int{}}
	pacer := vegeta.Pacer(vegeta.ConstantPacer{}) // zero value: as fast as the workers go
	maxWorkers := uint64(opt.Workers)
	maxConns := opt.Workers
	if opt.Rate > 0 {
		run.Mode = "open"
		// Hits per 1000 s keep three decimals of a slow server's rate.
		pacer = vegeta.ConstantPacer{Freq: max(1, int(math.Round(opt.Rate*1000))), Per: 1000 * time.Second}
		// An open loop adds workers when answers lag; the bound keeps a
		// stalled server from growing the load generator without limit.
		maxWorkers = 1024
		maxConns = 1024
	}
	drain := opt.Drain
	if drain <= 0 {
		drain = opt.Timeout
	}
	conns := &connSet{m: map[*trackedConn]struct{}{}}
	client := &http.Client{Transport: &http.Transport{
		DialContext: conns.dial,
		// vegeta's own transport has no response header timeout either;
		// the client Timeout bounds each request.
	}}
	atk := vegeta.NewAttacker(
		vegeta.Client(client), // first: the options below adjust its transport
		vegeta.Workers(uint64(opt.Workers)),
		vegeta.MaxWorkers(maxWorkers),
		vegeta.Connections(maxConns),
		vegeta.MaxConnections(maxConns),
		vegeta.KeepAlive(true),
		vegeta.Timeout(opt.Timeout),
		vegeta.MaxBody(0),
		vegeta.Redirects(vegeta.NoFollow),
	)
	// The attack stops sending at Duration. Requests still in flight get
	// Drain, then their connections close and they end at once; the same
	// happens when ctx ends.
	var aborted atomic.Bool
	abort := func() {
		aborted.Store(true)
		atk.Stop()
		conns.closeAll()
	}
	abortAt := time.AfterFunc(opt.Duration+drain, abort)
	defer abortAt.Stop()
	stopCtx := context.AfterFunc(ctx, abort)
	defer stopCtx()

	begin := time.Now()
	var last time.Time // end of the last answered request
	var done atomic.Int64
	if opt.Progress != nil {
		// A ticker of its own, so that the line moves while a slow server
		// answers nothing.
		tick := time.NewTicker(time.Second)
		stopTick := make(chan struct{})
		var wg sync.WaitGroup
		defer func() { tick.Stop(); close(stopTick); wg.Wait() }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, prevAt := int64(0), begin
			for {
				select {
				case <-stopTick:
					return
				case now := <-tick.C:
					d := done.Load()
					opt.Progress(int(d), float64(d-prev)/now.Sub(prevAt).Seconds())
					prev, prevAt = d, now
				}
			}
		}()
	}
	for res := range atk.Attack(vegeta.Targeter(targeter), pacer, opt.Duration, "bench") {
		if end := res.End(); res.Code != 0 && end.After(last) {
			last = end
		}
		if res.Code == 0 && aborted.Load() {
			run.Aborted++
			continue
		}
		run.add(pool, res)
		done.Add(1)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Throughput divides every answer by the time from the start to the
	// last answer, in-flight requests included. A server on one core stays
	// busy until its queue is empty, so the drain after sending stops runs
	// at the same rate; counting only the answers within Duration would
	// read 0 for a server slower than 32 requests per Duration.
	if !last.IsZero() {
		run.Seconds = last.Sub(begin).Seconds()
		run.Throughput = float64(run.Answered) / run.Seconds
	}
	run.finish()
	if run.unknown > 0 {
		return run, fmt.Errorf("load: %d answers to requests not in the pool", run.unknown)
	}
	return run, nil
}

func (r *Run) add(pool *Pool, res *vegeta.Result) {
	r.Requests++
	i := pool.Lookup(res.Method, res.URL)
	if i < 0 {
		r.unknown++
		return
	}
	req := &pool.Requests[i]
	var o Outcome
	switch {
	case res.Code == 0:
		o.Errors++
		if len(r.errs) < 5 || r.errs[res.Error] > 0 {
			r.errs[res.Error]++
		}
	case res.Code >= 200 && res.Code < 300:
		o.Passed++
	case res.Code == http.StatusForbidden:
		o.Blocked++
	case res.Code == http.StatusTooManyRequests:
		o.Limited++
	default:
		o.Other++
		key := fmt.Sprintf("status %d", res.Code)
		if len(r.errs) < 5 || r.errs[key] > 0 {
			r.errs[key]++
		}
	}
	r.byClass[req.Class].add(o)
	k := r.kinds[req.Kind]
	if k == nil {
		k = &Outcome{}
		r.kinds[req.Kind] = k
	}
	k.add(o)
	if res.Code != 0 {
		r.Answered++
		r.lat = append(r.lat, res.Latency)
		if r.shapeLat == nil {
			r.shapeLat = map[string][]time.Duration{}
		}
		sh := shapeOf(req)
		r.shapeLat[sh] = append(r.shapeLat[sh], res.Latency)
		if res.Code != http.StatusTooManyRequests {
			r.adm = append(r.adm, res.Latency)
		}
	}
}

func (r *Run) finish() {
	r.Latency = latencyOf(r.lat)
	r.Admitted = latencyOf(r.adm)
	r.lat, r.adm = nil, nil
	r.Shapes = map[string]Latency{}
	for sh, d := range r.shapeLat {
		r.Shapes[sh] = latencyOf(d)
	}
	r.shapeLat = nil
	r.Classes = map[string]Outcome{}
	for c := Class(0); c < numClasses; c++ {
		r.Classes[c.String()] = r.byClass[c]
	}
	r.Kinds = map[string]Outcome{}
	for k, o := range r.kinds {
		r.Kinds[k] = *o
	}
	if len(r.errs) > 0 {
		r.Errors = r.errs
	}
}

// LimitedShare is the share of answered requests that got 429.
func (r *Run) LimitedShare() float64 {
	if r.Answered == 0 {
		return 0
	}
	limited := 0
	for _, o := range r.byClass {
		limited += o.Limited
	}
	return float64(limited) / float64(r.Answered)
}

// connSet tracks the load generator's connections so that a run can end
// requests still in flight: vegeta's requests carry no context.
type connSet struct {
	mu     sync.Mutex
	m      map[*trackedConn]struct{}
	closed bool
}

func (s *connSet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, set: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	s.m[tc] = struct{}{}
	return tc, nil
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	list := make([]*trackedConn, 0, len(s.m))
	for c := range s.m {
		list = append(list, c)
	}
	s.mu.Unlock()
	for _, c := range list {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.m, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}
