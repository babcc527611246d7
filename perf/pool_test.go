package perf

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/benchreq"
)

// BenchmarkWasm_pool sends the bench's own traffic (benchreq.DefaultPool: the
// requests `go run mage.go bench` replays) through one VM, one request at
// a time: per class, cycling through that class's requests, and "mix",
// cycling through the whole pool in its order (70% GET, 20% JSON POST of
// 5-25 KB, 10% attacks). Its cpu-ns/op is the per-request cost behind the
// bench's closed-loop figure; compare with BenchmarkPlugin_pool in
// filter/ (native). linear-MiB is the VM's linear memory after the
// sub-benchmark (its peak so far; the sub-benchmarks share one VM).
// WAFGUARD_ENGINE=v8 runs it on V8 (v8host) instead of wazero; cpu-ns/op
// is then the Node process's CPU. p50-ms and p99-ms are quantiles of each
// request's wall time (host included):
//
//	go run mage.go build && go test ./perf -run '^$' -bench Wasm_pool -benchtime 200x
//	WAFGUARD_ENGINE=v8 go test ./perf -run '^$' -bench Wasm_pool -benchtime 200x
func BenchmarkWasm_pool(b *testing.B) {
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	vm := startEngineVM(b)
	own := ownConfig()
	run := func(b *testing.B, reqs []*benchreq.Request) {
		b.ReportAllocs()
		walls := make([]float64, 0, b.N)
		cpu0 := vm.cpu(b)
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if got := vm.exchange(b, reqs[i]); got != reqs[i].WantStatus && !own {
				b.Fatalf("request %d: status %d, want %d", i, got, reqs[i].WantStatus)
			}
			walls = append(walls, float64(time.Since(t0))/1e6)
			i = (i + 1) % len(reqs)
		}
		b.ReportMetric(float64(vm.cpu(b)-cpu0)/float64(b.N), "cpu-ns/op")
		// One request at a time, so no request waits for another: the
		// spread of these is the classes' own, before any queue.
		slices.Sort(walls)
		b.ReportMetric(quantile(walls, 0.5), "p50-ms")
		b.ReportMetric(quantile(walls, 0.99), "p99-ms")
		// Linear memory never shrinks: this is the VM's peak so far.
		b.ReportMetric(float64(vm.memory(b))/(1<<20), "linear-MiB")
	}
	for _, class := range benchreq.PoolRuns {
		reqs := benchreq.Select(pool, class)
		b.Run(class, func(b *testing.B) { run(b, reqs) })
	}
}

// BenchmarkWasm_spread sends the pool's mix through one VM one request at
// a time, after a pass over the pool to warm the VM, and reports the
// spread of the requests' wall times with no queue at all: p50 and p99 of
// the mix (p99/p50 as "spread"), p50 and p99 of each kind of request, and,
// in the log, the kinds of the slowest 2%. At half load a request also
// waits for the one ahead of it, so the bench's p99 over p50 there is at
// least about this spread: it is the part of the tail that the cost of
// each kind sets, whatever the scheduling.
//
// It also replays the measured wall times through a queue at half load
// (halfLoad) and reports that queue's p50, p99 and spread ("half-p50-ms",
// "half-p99-ms", "half-spread"): what the bench's open loop at 50% of
// saturation would measure if each request cost what it cost here. b.N is
// the number of requests:
//
//	WAFGUARD_ENGINE=v8 go test ./perf -run '^$' -bench Wasm_spread -benchtime 3000x
//
// With PERF_PLUGIN_CONFIG='{"directives_map":{"floor":["Include
// @recommended-conf","SecRuleEngine On"]},"default_directives":"floor"}'
// the same loop measures Coraza's floor on this mix: its recommended
// settings parse the JSON bodies into ARGS_POST, and no CRS rule runs.
func BenchmarkWasm_spread(b *testing.B) {
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	vm := startEngineVM(b)
	reqs := benchreq.Select(pool, "mix")
	for _, r := range reqs {
		vm.exchange(b, r)
	}
	type timed struct {
		kind string
		ms   float64
	}
	own := ownConfig()
	all := make([]timed, 0, b.N)
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		t0 := time.Now()
		if got := vm.exchange(b, r); got != r.WantStatus && !own {
			b.Fatalf("%s %s: status %d, want %d", r.Method, r.Path, got, r.WantStatus)
		}
		all = append(all, timed{r.Kind, float64(time.Since(t0)) / 1e6})
		i++
	}
	byKind := map[string][]float64{}
	walls := make([]float64, len(all))
	for k, t := range all {
		walls[k] = t.ms
		byKind[t.kind] = append(byKind[t.kind], t.ms)
	}
	hp50, hp99 := halfLoad(walls)
	b.ReportMetric(hp50, "half-p50-ms")
	b.ReportMetric(hp99, "half-p99-ms")
	if hp50 > 0 {
		b.ReportMetric(hp99/hp50, "half-spread")
	}
	slices.Sort(walls)
	p50, p99 := quantile(walls, 0.5), quantile(walls, 0.99)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	if p50 > 0 {
		b.ReportMetric(p99/p50, "spread")
	}
	for kind, w := range byKind {
		slices.Sort(w)
		b.ReportMetric(quantile(w, 0.5), kind+"-p50-ms")
		b.ReportMetric(quantile(w, 0.99), kind+"-p99-ms")
	}
	slices.SortFunc(all, func(x, y timed) int { return cmp.Compare(y.ms, x.ms) })
	slowest := map[string]int{}
	for _, t := range all[:max(1, len(all)/50)] {
		slowest[t.kind]++
	}
	b.Logf("%d requests: the slowest 2%% by kind: %v", len(all), slowest)
}

// halfLoad replays service times (ms, in the order the requests came)
// through one server that takes requests one at a time, in the order
// they arrive, arriving at a constant pace that keeps it busy half the
// time (one every 2 × the mean service time, as the bench's open loop
// paces them at half the server's rate), and returns p50 and p99 of the
// time from each arrival to its answer: the service time plus the wait
// for the requests ahead.
func halfLoad(service []float64) (p50, p99 float64) {
	if len(service) == 0 {
		return 0, 0
	}
	var sum float64
	for _, s := range service {
		sum += s
	}
	gap := 2 * sum / float64(len(service))
	stay := make([]float64, len(service))
	free := 0.0 // when the server is done with the requests so far
	for i, s := range service {
		arrive := float64(i) * gap
		free = max(free, arrive) + s
		stay[i] = free - arrive
	}
	slices.Sort(stay)
	return quantile(stay, 0.5), quantile(stay, 0.99)
}

func TestHalfLoad(t *testing.T) {
	// Equal costs at half load: nobody waits.
	if p50, p99 := halfLoad([]float64{2, 2, 2, 2}); p50 != 2 || p99 != 2 {
		t.Errorf("equal costs: p50 %v, p99 %v; want 2 and 2", p50, p99)
	}
	// Two requests of 9 ms, then fourteen of 1 (mean 2: one arrives every
	// 4 ms). The second long one waits 5 ms for the first and stays 14;
	// the next four wait 10, 7, 4 and 1 ms, and stay 11, 8, 5 and 2.
	svc := []float64{9, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	if p50, p99 := halfLoad(svc); p50 != 1 || p99 != 14 {
		t.Errorf("two long requests first: p50 %v, p99 %v; want 1 and 14", p50, p99)
	}
	if p50, p99 := halfLoad(nil); p50 != 0 || p99 != 0 {
		t.Errorf("no requests: p50 %v, p99 %v; want 0 and 0", p50, p99)
	}
}
