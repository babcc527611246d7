package perf

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/v8host"
)

// BenchmarkWasm_footprint measures what one VM holds, on the engine
// $WAFGUARD_ENGINE names (wazero, the default, or v8): its linear memory
// after the VM start with the CRS (start-MiB) and after one pass over the
// bench's pool (pool-MiB); on V8 also the start of a second VM in the same
// process (later-VM-s), what every Envoy worker pays when a new plugin
// configuration arrives, beside the first (first-VM-s), and the median of
// that one and the footprintLaterVMs-1 started after it
// (later-VMs-p50-s): the second VM starts while V8 is still busy with the
// first start, the ones after it do not. Each iteration is a fresh VM (a
// fresh Node process on V8); run it with -benchtime 1x to 3x: a VM start
// takes seconds.
func BenchmarkWasm_footprint(b *testing.B) {
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchreq.Select(pool, "mix")
	var startMiB, poolMiB, firstS, laterS, laterMedS float64
	for b.Loop() {
		if os.Getenv("WAFGUARD_ENGINE") == "v8" {
			first, later, laterMed, start, after := v8Footprint(b, reqs)
			firstS += first.Seconds()
			laterS += later.Seconds()
			laterMedS += laterMed.Seconds()
			startMiB += float64(start) / (1 << 20)
			poolMiB += float64(after) / (1 << 20)
			continue
		}
		t0 := time.Now()
		vm := wazeroVM{startVM(b, b.Context(), "")}
		firstS += time.Since(t0).Seconds()
		startMiB += float64(vm.memory(b)) / (1 << 20)
		for _, r := range reqs {
			if got := vm.exchange(b, r); got != r.WantStatus {
				b.Fatalf("%s %s: status %d, want %d", r.Method, r.Path, got, r.WantStatus)
			}
		}
		poolMiB += float64(vm.memory(b)) / (1 << 20)
		vm.vm.Close()
	}
	n := float64(b.N)
	b.ReportMetric(startMiB/n, "start-MiB")
	b.ReportMetric(poolMiB/n, "pool-MiB")
	b.ReportMetric(firstS/n, "first-VM-s")
	if laterS > 0 {
		b.ReportMetric(laterS/n, "later-VM-s")
		b.ReportMetric(laterMedS/n, "later-VMs-p50-s")
	}
}

// BenchmarkWasm_footprintV8Workers is one Envoy process on V8 with
// $PERF_WORKERS worker threads (default 4): workers + 1 VMs with the CRS
// in one Node process (Envoy runs one VM per worker and one on the main
// thread), the pool once through each worker VM. It reports the linear
// memory of all VMs (VMs-MiB) and the Node process's resident memory
// (node-RSS-MiB), which adds what the engine itself holds (compiled code,
// JIT state, Node's own heap).
func BenchmarkWasm_footprintV8Workers(b *testing.B) {
	workers := 4
	if v := os.Getenv("PERF_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PERF_WORKERS=%q: want a positive integer", v)
		}
		workers = n
	}
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchreq.Select(pool, "mix")
	plugintest.Read(b)
	var vmsMiB, rssMiB float64
	for b.Loop() {
		e, err := v8host.Start(v8host.Options{Wasm: plugintest.Path(), Stderr: os.Stderr})
		if err != nil {
			b.Fatal(err)
		}
		cfg := v8CRSConfig()
		var total uint64
		for i := range workers + 1 {
			vm, err := e.NewVM(cfg)
			if err != nil {
				b.Fatal(err)
			}
			v := v8VM{e, vm}
			if i > 0 { // the main thread's VM serves no stream
				for _, r := range reqs {
					if got := v.exchange(b, r); got != r.WantStatus {
						b.Fatalf("%s %s: status %d, want %d", r.Method, r.Path, got, r.WantStatus)
					}
				}
			}
			total += v.memory(b)
		}
		rss, err := e.RSS()
		if err != nil {
			b.Fatal(err)
		}
		vmsMiB += float64(total) / (1 << 20)
		rssMiB += float64(rss) / (1 << 20)
		e.Close()
	}
	b.ReportMetric(vmsMiB/float64(b.N), "VMs-MiB")
	b.ReportMetric(rssMiB/float64(b.N), "node-RSS-MiB")
}

// v8Footprint starts a Node process, a first VM and a second one, and
// runs the pool through the first.
// footprintLaterVMs is how many VMs BenchmarkWasm_footprint starts after
// the first on V8.
const footprintLaterVMs = 5

func v8Footprint(b *testing.B, reqs []*benchreq.Request) (first, later, laterMedian time.Duration, start, after uint64) {
	plugintest.Read(b)
	e, err := v8host.Start(v8host.Options{Wasm: plugintest.Path(), Stderr: os.Stderr})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	cfg := v8CRSConfig()
	t0 := time.Now()
	vm, err := e.NewVM(cfg)
	if err != nil {
		b.Fatal(err)
	}
	first = time.Since(t0)
	// The VM right after the first pays for V8's work left over from the
	// first start; the median of footprintLaterVMs later VMs is what a
	// start on compiled code costs.
	var laters []time.Duration
	for range footprintLaterVMs {
		t1 := time.Now()
		if _, err := e.NewVM(cfg); err != nil {
			b.Fatal(err)
		}
		laters = append(laters, time.Since(t1))
	}
	later = laters[0]
	slices.Sort(laters)
	laterMedian = laters[len(laters)/2]
	v := v8VM{e, vm}
	start = v.memory(b)
	for _, r := range reqs {
		if got := v.exchange(b, r); got != r.WantStatus {
			b.Fatalf("%s %s: status %d, want %d", r.Method, r.Path, got, r.WantStatus)
		}
	}
	return first, later, laterMedian, start, v.memory(b)
}
