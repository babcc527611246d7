package admission

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// TestGuard_hammer runs one goroutine per VM (each Guard stays on its own
// goroutine, as each Envoy VM stays on its thread) against one store guarded
// by a mutex, as Envoy's shared data is.
func TestGuard_hammer(t *testing.T) {
	const (
		vms     = 8
		streams = 3000
		cap     = 10
	)
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	p.copyOnSet = true // values handed out are read while other goroutines write
	cfg := `{"max_inflight": 10, "cas_retries": 16}`
	var upstream, peak atomic.Int64
	var over atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < vms; i++ {
		g := newTestGuard(t, cfg, p.store(""), m, &nopHost{}, clk)
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			inner := func(uint32) types.HttpContext {
				n := upstream.Add(1)
				if n > cap {
					over.Store(true)
				}
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				return &types.DefaultHttpContext{}
			}
			var open []types.HttpContext
			var held []bool
			for s := 0; s < streams; s++ {
				c := g.Wrap(uint32(s+2), func(id uint32) types.HttpContext {
					held = append(held, true)
					return inner(id)
				})
				before := len(held)
				c.OnHttpRequestHeaders(1, true)
				if len(held) == before {
					held = append(held, false)
				}
				open = append(open, c)
				for len(open) > 0 && (len(open) > 3 || rng.Intn(2) == 0) {
					j := rng.Intn(len(open))
					if held[j] {
						upstream.Add(-1)
					}
					open[j].OnHttpStreamDone()
					open[j], held[j] = open[len(open)-1], held[len(held)-1]
					open, held = open[:len(open)-1], held[:len(held)-1]
				}
				if s%500 == 0 {
					g.OnTick()
				}
			}
			for j := range open {
				if held[j] {
					upstream.Add(-1)
				}
				open[j].OnHttpStreamDone()
			}
			g.OnTick()
		}(int64(i))
	}
	wg.Wait()
	if over.Load() {
		t.Errorf("more than %d streams at the upstream at once (peak %d)", cap, peak.Load())
	}
	total, members := sharedTotal(t, p.store(""), key)
	if total != 0 || members != vms || m.get(MetricInflight) != 0 {
		t.Errorf("after the run: total %d members %d gauge %d, want 0, %d, 0", total, members, m.get(MetricInflight), vms)
	}
	t.Logf("peak %d; admitted %d, rejected cap %d, rejected cas %d; conflicts %d in %d writes",
		peak.Load(), m.get(MetricAdmitted), m.get(MetricRejectedCap), m.get(MetricRejectedCAS),
		m.get(MetricCASConflicts), p.sets)
}
