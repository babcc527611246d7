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
	run := func(b *testing.B, reqs []*benchreq.Request) {
		b.ReportAllocs()
		walls := make([]float64, 0, b.N)
		cpu0 := vm.cpu(b)
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if got := vm.exchange(b, reqs[i]); got != reqs[i].WantStatus {
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
// each kind sets, whatever the scheduling. b.N is the number of requests:
//
//	WAFGUARD_ENGINE=v8 go test ./perf -run '^$' -bench Wasm_spread -benchtime 3000x
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
	all := make([]timed, 0, b.N)
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		t0 := time.Now()
		if got := vm.exchange(b, r); got != r.WantStatus {
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
