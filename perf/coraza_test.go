package perf

import (
	"testing"

	"github.com/wafguard/wafguard/bench"
	"github.com/wafguard/wafguard/internal/benchreq"
)

// BenchmarkCoraza_pool is the denominator of the per-request target: native
// Coraza with its stock operators (this package does not import filter/, so
// none of the plugin's replacements is registered) and the bench's CRS
// directives, on the same requests as BenchmarkWasm_pool, one at a time,
// with the same response. cpu-ns/op counts every thread (the native GC runs
// beside the request; the guest's runs inside it):
//
//	go test ./perf -run '^$' -bench 'Wasm_pool|Coraza_pool' -benchtime 200x
func BenchmarkCoraza_pool(b *testing.B) {
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	waf, err := bench.NewCRSWAF(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, class := range benchreq.PoolRuns {
		reqs := benchreq.Select(pool, class)
		b.Run(class, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				if got := benchreq.Coraza(waf, reqs[i]); got != reqs[i].WantStatus {
					b.Fatalf("%s %s: status %d, want %d", reqs[i].Method, reqs[i].Path, got, reqs[i].WantStatus)
				}
				i = (i + 1) % len(reqs)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
