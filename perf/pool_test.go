package perf

import (
	"context"
	"testing"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/wasmhost"
)

// BenchmarkWasm_pool sends the bench's own traffic (benchreq.Pool: the
// requests `go run mage.go bench` replays) through one VM, one request at
// a time: per class, cycling through that class's requests, and "mix",
// cycling through the whole pool in its order (70% GET, 20% JSON POST of
// 5-25 KB, 10% attacks). Its cpu-ns/op is the per-request cost behind the
// bench's closed-loop figure; compare with BenchmarkPlugin_pool in
// filter/ (native). linear-MiB is the VM's linear memory after the
// sub-benchmark (its peak so far; the sub-benchmarks share one VM):
//
//	go run mage.go build && go test ./perf -run '^$' -bench Wasm_pool -benchtime 200x
func BenchmarkWasm_pool(b *testing.B) {
	pool, err := benchreq.Pool()
	if err != nil {
		b.Fatal(err)
	}
	vm := startVM(b, context.Background(), "")
	run := func(b *testing.B, reqs []*wasmhost.Request, want []int) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		i := 0
		for b.Loop() {
			if got := vm.Exchange(context.Background(), reqs[i], upstream).Status; got != want[i] {
				b.Fatalf("request %d: status %d, want %d", i, got, want[i])
			}
			i = (i + 1) % len(reqs)
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		// Linear memory never shrinks: this is the VM's peak so far.
		b.ReportMetric(float64(vm.MemorySize())/(1<<20), "linear-MiB")
	}
	for _, class := range benchreq.PoolRuns {
		var reqs []*wasmhost.Request
		var want []int
		for _, r := range benchreq.Select(pool, class) {
			reqs = append(reqs, wasmRequest(r))
			want = append(want, r.WantStatus)
		}
		b.Run(class, func(b *testing.B) { run(b, reqs, want) })
	}
}
