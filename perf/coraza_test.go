package perf

import (
	"testing"

	"github.com/corazawaf/coraza/v3"

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
	pool, err := benchreq.Pool()
	if err != nil {
		b.Fatal(err)
	}
	waf, err := bench.NewCRSWAF(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, class := range append(benchreq.PoolClasses, "mix") {
		var reqs []*benchreq.Request
		for i := range pool {
			if class == "mix" || pool[i].Name == class {
				reqs = append(reqs, &pool[i])
			}
		}
		b.Run(class, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				if got := corazaExchange(waf, reqs[i]); got != reqs[i].WantStatus {
					b.Fatalf("%s %s: status %d, want %d", reqs[i].Method, reqs[i].Path, got, reqs[i].WantStatus)
				}
				i = (i + 1) % len(reqs)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// corazaExchange runs r through a transaction of waf, every phase, with
// upstream's response, and returns the status the client would get.
func corazaExchange(waf coraza.WAF, r *benchreq.Request) int {
	tx := waf.NewTransaction()
	defer func() {
		tx.ProcessLogging()
		_ = tx.Close()
	}()
	tx.ProcessConnection("10.1.2.3", 43210, "10.0.0.1", 8080)
	tx.ProcessURI(r.Path, r.Method, "HTTP/1.1")
	tx.AddRequestHeader("Host", "shop.example.com")
	for _, h := range r.Headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	if it := tx.ProcessRequestHeaders(); it != nil {
		return it.Status
	}
	if r.Body != nil {
		if it, _, err := tx.WriteRequestBody(r.Body); it != nil || err != nil {
			return 413
		}
	}
	if it, err := tx.ProcessRequestBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	tx.AddResponseHeader("Content-Type", "text/html")
	tx.AddResponseHeader("Content-Length", "12")
	if it := tx.ProcessResponseHeaders(200, "HTTP/1.1"); it != nil {
		return it.Status
	}
	if tx.IsResponseBodyAccessible() && tx.IsResponseBodyProcessable() {
		if it, _, err := tx.WriteResponseBody([]byte("<p>hello</p>")); it != nil || err != nil {
			return 500
		}
	}
	if it, err := tx.ProcessResponseBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	return 200
}
