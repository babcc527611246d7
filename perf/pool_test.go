package perf

import (
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
