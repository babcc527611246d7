package perf

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/v8host"
)

// BenchmarkWasm_ab compares two builds of the plugin on one engine in one
// run: A is the usual module (build/main.wasm or $WAFGUARD_WASM), B the
// one at $WAFGUARD_WASM_B (a baseline kept aside with cp). On a shared
// machine the same build measures up to 1.5x apart from one run to the
// next; alternating short blocks of the same requests between the two
// VMs puts both under the same load. Per class of the bench pool, it runs
// $PERF_AB_BLOCKS blocks (30) of $PERF_AB_BLOCK requests (40) on each
// build, alternately, and reports each build's CPU per request as the
// p25 and the median over its blocks (A-p25-ns, B-p50-ns, ...) and B's
// median over A's (B/A). The CPU is the engine's: the Node process of
// each VM on V8 (WAFGUARD_ENGINE=v8), this process on wazero.
//
//	cp build/main.wasm /tmp/base.wasm    # before the change
//	go run mage.go build                 # after it
//	WAFGUARD_ENGINE=v8 WAFGUARD_WASM_B=/tmp/base.wasm go test ./perf -run '^$' -bench Wasm_ab -benchtime 1x
//
// PERF_AB_CLASSES (e.g. "benign_get mix") limits the classes.
func BenchmarkWasm_ab(b *testing.B) {
	pathB := os.Getenv("WAFGUARD_WASM_B")
	if pathB == "" {
		b.Skip("WAFGUARD_WASM_B names the second build")
	}
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	blocks, size := envInt(b, "PERF_AB_BLOCKS", 30), envInt(b, "PERF_AB_BLOCK", 40)
	vms := [2]engineVM{startEngineVMOf(b, plugintest.Path()), startEngineVMOf(b, pathB)}
	classes := benchreq.PoolRuns
	if s := os.Getenv("PERF_AB_CLASSES"); s != "" {
		classes = fieldsOf(s)
	}
	for _, class := range classes {
		reqs := benchreq.Select(pool, class)
		if len(reqs) == 0 {
			b.Fatalf("PERF_AB_CLASSES: no class %q in the pool (classes: %v)", class, benchreq.PoolRuns)
		}
		b.Run(class, func(b *testing.B) {
			for b.Loop() {
				var per [2][]float64 // CPU ns per request of each block
				next := [2]int{}
				for k := range 2 * blocks {
					w := abSlot(k)
					vm := vms[w]
					c0 := vm.cpu(b)
					for range size {
						r := reqs[next[w]%len(reqs)]
						next[w]++
						if got := vm.exchange(b, r); got != r.WantStatus {
							b.Fatalf("build %c, %s %s: status %d, want %d", 'A'+w, r.Method, r.Path, got, r.WantStatus)
						}
					}
					per[w] = append(per[w], float64(vm.cpu(b)-c0)/float64(size))
				}
				for w, name := range []string{"A", "B"} {
					slices.Sort(per[w])
					b.ReportMetric(quantile(per[w], 0.25), name+"-p25-ns")
					b.ReportMetric(quantile(per[w], 0.5), name+"-p50-ns")
				}
				b.ReportMetric(quantile(per[1], 0.5)/quantile(per[0], 0.5), "B/A")
			}
		})
	}
}

// abSlot is the build (0 for A, 1 for B) of the k-th turn: A B, B A,
// A B, ...; neither build always runs right after the other.
func abSlot(k int) int {
	w := k % 2
	if (k/2)%2 == 1 {
		w = 1 - w
	}
	return w
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// envInt is the positive integer in $name, or def when it is unset.
func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// fieldsOf splits s at spaces and commas.
func fieldsOf(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

// BenchmarkWasm_abStart compares the VM start of two builds on V8, as
// BenchmarkWasm_ab compares their requests: one Node process per build,
// each with its first VM started (TurboFan compiles what the start calls),
// then $PERF_AB_STARTS (10) later VMs per build, alternately; it reports
// each build's median and fastest later-VM start (A-later-s, B-min-s,
// ...) and B's median over A's. Every VM stays up to the end, as Envoy's
// workers do.
//
//	WAFGUARD_ENGINE=v8 WAFGUARD_WASM_B=/tmp/base.wasm go test ./perf -run '^$' -bench Wasm_abStart -benchtime 1x
func BenchmarkWasm_abStart(b *testing.B) {
	pathB := os.Getenv("WAFGUARD_WASM_B")
	if pathB == "" || os.Getenv("WAFGUARD_ENGINE") != "v8" {
		b.Skip("WAFGUARD_ENGINE=v8 and WAFGUARD_WASM_B (the second build) select this benchmark")
	}
	starts := envInt(b, "PERF_AB_STARTS", 10)
	var engines [2]*v8host.Engine
	cfg := v8CRSConfig()
	start := func(w int) float64 {
		t0 := time.Now()
		if _, err := engines[w].NewVM(cfg); err != nil {
			b.Fatalf("build %c: %v", 'A'+w, err)
		}
		return time.Since(t0).Seconds()
	}
	for b.Loop() {
		var first [2]float64
		var later [2][]float64
		// One engine after the other: the first VM's start is mostly
		// V8 compiling, on every core it gets.
		for w, path := range []string{plugintest.Path(), pathB} {
			if _, err := os.Stat(path); err != nil {
				plugintest.Missing(b, "the plugin: %v", err)
			}
			e, err := v8host.Start(v8host.Options{Wasm: path, Stderr: os.Stderr})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			engines[w] = e
			first[w] = start(w)
		}
		for k := range 2 * starts {
			w := abSlot(k)
			later[w] = append(later[w], start(w))
		}
		for w, name := range []string{"A", "B"} {
			slices.Sort(later[w])
			b.ReportMetric(first[w], name+"-first-s")
			b.ReportMetric(quantile(later[w], 0.5), name+"-later-s")
			b.ReportMetric(later[w][0], name+"-min-s")
		}
		b.ReportMetric(quantile(later[1], 0.5)/quantile(later[0], 0.5), "B/A")
	}
}
