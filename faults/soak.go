package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wafguard/wafguard/wasmhost"
)

// Metric names read from the host; they are fixed by the filter and the
// admission guard.
const (
	MetricTxActive = "waf_filter.tx.active"
	MetricInflight = "wafguard_admission_inflight"
)

// SmallRules is a plugin configuration with Coraza's recommended settings,
// one rule that blocks a script tag anywhere in the request, and an
// admission cap of 8 streams. Its per-request cost on the wasm build is a
// few milliseconds, where the CRS costs tens.
const SmallRules = `{"directives_map": {"rules": [
  "Include @recommended-conf",
  "SecRuleEngine On",
  "SecResponseBodyAccess Off",
  "SecRule REQUEST_URI|ARGS|ARGS_NAMES|REQUEST_HEADERS|REQUEST_COOKIES|REQUEST_COOKIES_NAMES|FILES|FILES_NAMES \"@rx <script\" \"id:9001,phase:2,deny,status:403,t:none,t:urlDecodeUni,t:lowercase,log\""
]}, "default_directives": "rules", "admission": {"max_inflight": 8, "tick_period_ms": 100}}`

// CRSRules is SmallRules with the whole CRS instead of the one rule.
const CRSRules = `{"directives_map": {"rules": [
  "Include @recommended-conf",
  "SecRuleEngine On",
  "SecResponseBodyAccess Off",
  "Include @crs-setup-conf",
  "Include @owasp_crs/*.conf"
]}, "default_directives": "rules", "admission": {"max_inflight": 8, "tick_period_ms": 100}}`

// SoakConfig configures Soak. Zero fields take the defaults in brackets.
type SoakConfig struct {
	// Wasm is the plugin binary (required).
	Wasm []byte
	// Config is the plugin configuration [SmallRules].
	Config string
	// VMs is the number of worker VMs [2].
	VMs int
	// Duration of the steady phase [20 s] and its fixed Rate in requests
	// per second [10]. A tick that finds Workers requests in flight is
	// counted in Skipped instead of queued, so the rate never builds a
	// backlog.
	Duration time.Duration
	Rate     float64
	Workers  int // [16]
	// OverloadDuration is the closed-loop burst after the steady phase,
	// with OverloadWorkers clients sending back to back [0: none; 16
	// workers], to show the 429s of the admission cap.
	OverloadDuration time.Duration
	OverloadWorkers  int
	// SampleEvery is the memory sampling period [1 s].
	SampleEvery time.Duration
	// BufferLimit is the host's per-stream buffer limit [1 MiB].
	BufferLimit int
	// HeapProfile, when set, receives a heap profile taken at the end of
	// the run while the VMs are still up, to tell a host leak from VM
	// linear memory (which wazero allocates on the Go heap).
	HeapProfile io.Writer
}

// Phase is what one phase of a run saw.
type Phase struct {
	Sent     int
	Skipped  int         // ticks dropped because Workers requests were in flight
	ByStatus map[int]int // client-visible statuses
	// Unexpected counts transport errors and statuses other than the one
	// the request's kind expects (429 is always allowed); Examples holds
	// the first few.
	Unexpected int
	Examples   []string
	P50, P99   time.Duration
}

// Sample is one memory reading.
type Sample struct {
	At time.Duration
	// RSS is the host process's resident set (Linux /proc), which holds
	// the VMs' linear memories.
	RSS uint64
	// GoHeap is the Go heap in use after a collection
	// (runtime.MemStats.HeapInuse).
	GoHeap uint64
	// VMMemory is the sum of the VMs' linear memory sizes; 0 when the
	// host does not expose it (a VM method MemorySize() uint64).
	VMMemory uint64
}

// SoakReport is the result of Soak.
type SoakReport struct {
	Steady, Overload Phase
	Samples          []Sample
	// Slopes in bytes per minute, least squares over the samples of the
	// second half of the steady phase (after warm-up).
	RSSSlope, GoHeapSlope, VMMemorySlope float64
	// TxActive and Inflight are the gauges once every stream ended; both
	// must be 0.
	TxActive, Inflight int64
	Reloads            int // VM generations past the first, summed
}

// String renders the report for logs.
func (r *SoakReport) String() string {
	var b strings.Builder
	for _, p := range []struct {
		name string
		ph   Phase
	}{{"steady", r.Steady}, {"overload", r.Overload}} {
		if p.ph.Sent == 0 && p.ph.Skipped == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s: sent %d, skipped %d, statuses %v, unexpected %d, p50 %v, p99 %v\n",
			p.name, p.ph.Sent, p.ph.Skipped, p.ph.ByStatus, p.ph.Unexpected, p.ph.P50, p.ph.P99)
		for _, e := range p.ph.Examples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	if n := len(r.Samples); n > 0 {
		first, last := r.Samples[0], r.Samples[n-1]
		fmt.Fprintf(&b, "rss %d -> %d KiB (slope %.0f KiB/min), go heap %d -> %d KiB (slope %.0f KiB/min), vm memory %d -> %d KiB (slope %.0f KiB/min)\n",
			first.RSS>>10, last.RSS>>10, r.RSSSlope/1024, first.GoHeap>>10, last.GoHeap>>10, r.GoHeapSlope/1024,
			first.VMMemory>>10, last.VMMemory>>10, r.VMMemorySlope/1024)
	}
	if n := len(r.Samples); n > 2 {
		b.WriteString("go heap (MiB) over time:")
		for i := 0; i < n; i += max(1, n/10) {
			fmt.Fprintf(&b, " %.0fs=%d", r.Samples[i].At.Seconds(), r.Samples[i].GoHeap>>20)
		}
		fmt.Fprintf(&b, " %.0fs=%d\n", r.Samples[n-1].At.Seconds(), r.Samples[n-1].GoHeap>>20)
	}
	fmt.Fprintf(&b, "end: %s %d, %s %d, reloads %d\n", MetricTxActive, r.TxActive, MetricInflight, r.Inflight, r.Reloads)
	return b.String()
}

// Check returns an error naming every broken invariant: unexpected
// outcomes, open transactions or slots at the end, VM reloads.
func (r *SoakReport) Check() error {
	var errs []error
	if n := r.Steady.Unexpected + r.Overload.Unexpected; n != 0 {
		errs = append(errs, fmt.Errorf("%d unexpected outcomes", n))
	}
	if r.TxActive != 0 {
		errs = append(errs, fmt.Errorf("%s: got %d at the end, want 0", MetricTxActive, r.TxActive))
	}
	if r.Inflight != 0 {
		errs = append(errs, fmt.Errorf("%s: got %d at the end, want 0", MetricInflight, r.Inflight))
	}
	if r.Reloads != 0 {
		errs = append(errs, fmt.Errorf("%d VM reloads: a VM trapped", r.Reloads))
	}
	return errors.Join(errs...)
}

// kind is one entry of the traffic mix, with the status it must get.
type kind struct {
	name, method, path, contentType, body string
	headers                               [][2]string
	want                                  int
}

// mix is the traffic of a run: benign and attack requests over each body
// processor, and a malformed body.
var mix = []kind{
	{name: "get", method: "GET", path: "/get?q=hello+world&page=2", want: 200},
	{name: "get attack", method: "GET", path: "/get?q=%3Cscript%3Ealert(1)%3C/script%3E", want: 403},
	{name: "form", method: "POST", path: "/post", contentType: "application/x-www-form-urlencoded", body: "name=alice&city=paris", want: 200},
	{name: "form attack", method: "POST", path: "/post", contentType: "application/x-www-form-urlencoded", body: "name=%3Cscript%3Ealert(1)%3C%2Fscript%3E", want: 403},
	{name: "json", method: "POST", path: "/post", contentType: "application/json", body: `{"user": {"name": "alice", "tags": ["a", "b"]}}`, want: 200},
	{name: "json attack", method: "POST", path: "/post", contentType: "application/json", body: `{"comment": "<script>alert(1)</script>"}`, want: 403},
	{name: "multipart", method: "POST", path: "/post", contentType: "multipart/form-data; boundary=XyZ",
		body: "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XyZ--\r\n", want: 200},
	{name: "cookie attack", method: "GET", path: "/get", headers: [][2]string{{"Cookie", "s=<script>alert(1)</script>"}}, want: 403},
	{name: "bad json", method: "POST", path: "/post", contentType: "application/json", body: `{"a": [1, 2`, want: 400},
}

// Soak serves the plugin on a loopback listener (a wasmhost.Pool behind a
// wasmhost.Handler, with the built-in echo upstream) and sends the traffic
// mix at a fixed rate, then optionally an overload burst. It samples memory
// throughout and reads the gauges once every stream ended. The returned
// error is about the setup; the invariants are in SoakReport.Check.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	if len(cfg.Wasm) == 0 {
		return nil, errors.New("faults.Soak: SoakConfig.Wasm is empty; build the plugin first (go run mage.go build)")
	}
	if cfg.Config == "" {
		cfg.Config = SmallRules
	}
	if cfg.VMs <= 0 {
		cfg.VMs = 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 10
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.OverloadWorkers <= 0 {
		cfg.OverloadWorkers = 16
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = time.Second
	}

	host := wasmhost.NewHost(wasmhost.HostOptions{})
	m, err := wasmhost.Compile(ctx, cfg.Wasm, wasmhost.Options{Host: host, Concurrency: cfg.VMs, BufferLimit: cfg.BufferLimit})
	if err != nil {
		return nil, fmt.Errorf("faults.Soak: compiling the plugin: %w", err)
	}
	defer m.Close(context.Background())
	pool, err := m.NewPool(ctx, wasmhost.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(cfg.Config)})
	if err != nil {
		return nil, fmt.Errorf("faults.Soak: starting the VMs: %w", err)
	}
	defer pool.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults.Soak: listening on loopback: %w", err)
	}
	h := &wasmhost.Handler{Pool: pool, Upstream: wasmhost.EchoUpstream{MaxDelay: time.Second}}
	srv := &http.Server{Handler: h, ConnContext: h.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers + cfg.OverloadWorkers, DisableCompression: true},
	}
	defer client.CloseIdleConnections()

	r := &SoakReport{}
	start := time.Now()
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		t := time.NewTicker(cfg.SampleEvery)
		defer t.Stop()
		for {
			r.Samples = append(r.Samples, sample(pool, time.Since(start)))
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()

	r.Steady = steady(ctx, client, base, cfg)
	steadySamples := 0
	if cfg.OverloadDuration > 0 {
		close(stopSampling)
		sampling.Wait()
		steadySamples = len(r.Samples)
		r.Overload = overload(ctx, client, base, cfg)
		r.Samples = append(r.Samples, sample(pool, time.Since(start)))
	} else {
		close(stopSampling)
		sampling.Wait()
		r.Samples = append(r.Samples, sample(pool, time.Since(start)))
		steadySamples = len(r.Samples)
	}
	half := r.Samples[steadySamples/2 : steadySamples]
	r.RSSSlope = slope(half, func(s Sample) uint64 { return s.RSS })
	r.GoHeapSlope = slope(half, func(s Sample) uint64 { return s.GoHeap })
	r.VMMemorySlope = slope(half, func(s Sample) uint64 { return s.VMMemory })

	// Every response was read, so every stream ended; the gauges settle
	// at once. Wait one tick period at most for the admission tick.
	deadline := time.Now().Add(2 * time.Second)
	for {
		r.TxActive = gauge(host, MetricTxActive)
		r.Inflight = gauge(host, MetricInflight)
		if r.TxActive == 0 && r.Inflight == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, vm := range pool.VMs() {
		r.Reloads += int(vm.Generation()) - 1
	}
	if cfg.HeapProfile != nil {
		runtime.GC()
		if err := pprof.WriteHeapProfile(cfg.HeapProfile); err != nil {
			return r, fmt.Errorf("faults.Soak: writing the heap profile: %w", err)
		}
	}
	return r, nil
}

// steady sends the mix at a fixed rate for cfg.Duration.
func steady(ctx context.Context, c *http.Client, base string, cfg SoakConfig) Phase {
	ph := newPhase()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, cfg.Workers)
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	end := time.After(cfg.Duration)
	maxSends := int(cfg.Rate*cfg.Duration.Seconds()) + 1
loop:
	for i := 0; i < maxSends; i++ {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			ph.Skipped++
			mu.Unlock()
			continue
		}
		k := mix[i%len(mix)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d, status, err := send(ctx, c, base, k)
			mu.Lock()
			defer mu.Unlock()
			ph.record(k, status, err)
			lat = append(lat, d)
		}()
	}
	wg.Wait()
	ph.P50, ph.P99 = percentiles(lat)
	return ph
}

// overload runs cfg.OverloadWorkers clients back to back for
// cfg.OverloadDuration.
func overload(ctx context.Context, c *http.Client, base string, cfg SoakConfig) Phase {
	ph := newPhase()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	until := time.Now().Add(cfg.OverloadDuration)
	// A worker sends at most this many requests, whatever their speed.
	const maxPerWorker = 100000
	for w := 0; w < cfg.OverloadWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < maxPerWorker && time.Now().Before(until) && ctx.Err() == nil; i++ {
				k := mix[(w+i)%len(mix)]
				d, status, err := send(ctx, c, base, k)
				mu.Lock()
				ph.record(k, status, err)
				lat = append(lat, d)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	ph.P50, ph.P99 = percentiles(lat)
	return ph
}

func newPhase() Phase { return Phase{ByStatus: map[int]int{}} }

func (ph *Phase) record(k kind, status int, err error) {
	ph.Sent++
	if err != nil {
		ph.ByStatus[0]++
		ph.unexpected(fmt.Sprintf("%s: %v", k.name, err))
		return
	}
	ph.ByStatus[status]++
	if status != k.want && status != http.StatusTooManyRequests {
		ph.unexpected(fmt.Sprintf("%s: got %d, want %d", k.name, status, k.want))
	}
}

func (ph *Phase) unexpected(msg string) {
	ph.Unexpected++
	if len(ph.Examples) < 10 {
		ph.Examples = append(ph.Examples, msg)
	}
}

func send(ctx context.Context, c *http.Client, base string, k kind) (time.Duration, int, error) {
	var body io.Reader
	if k.body != "" {
		body = strings.NewReader(k.body)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, base+k.path, body)
	if err != nil {
		return 0, 0, err
	}
	if k.contentType != "" {
		req.Header.Set("Content-Type", k.contentType)
	}
	for _, h := range k.headers {
		req.Header.Add(h[0], h[1])
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return time.Since(start), 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return time.Since(start), resp.StatusCode, err
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*50/100], d[min(len(d)-1, len(d)*99/100)]
}

// memorySizer is implemented by wasmhost.VM once it exposes the size of
// its linear memory in bytes.
type memorySizer interface{ MemorySize() uint64 }

func sample(pool *wasmhost.Pool, at time.Duration) Sample {
	// A collection first, so that the heap figure is live data and its
	// slope shows leaks rather than the collector's pacing.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := Sample{At: at, RSS: rss(), GoHeap: ms.HeapInuse}
	for _, vm := range pool.VMs() {
		if m, ok := any(vm).(memorySizer); ok {
			s.VMMemory += m.MemorySize()
		}
	}
	return s
}

// rss returns the resident set of this process in bytes, 0 where /proc is
// missing.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// slope is the least-squares slope of v over the samples, per minute.
func slope(s []Sample, v func(Sample) uint64) float64 {
	if len(s) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, p := range s {
		x, y := p.At.Minutes(), float64(v(p))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(s))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func gauge(h *wasmhost.Host, name string) int64 {
	v, _ := h.Metric(name)
	return int64(v)
}
