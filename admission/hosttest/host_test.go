package hosttest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// compile loads the plugin, or skips (fails when WASM_REQUIRED is set) when
// it has not been built.
func compile(t testing.TB, vms int) *wasmhost.Module {
	t.Helper()
	m, err := wasmhost.Compile(context.Background(), plugintest.Read(t), wasmhost.Options{Concurrency: vms})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// pluginConfig is a configuration with a one-line rule set, so that VMs start
// fast; the admission object is the part under test.
func pluginConfig(admission string) []byte {
	return []byte(`{"directives_map": {"min": ["SecRuleEngine On"]}, "default_directives": "min", "admission": ` + admission + `}`)
}

const (
	vmID   = "waf"
	stateK = "wafguard.admission.v1"
)

// sharedTotal sums the in-flight counts in the guard's shared-data value
// (layout in admission/state.go).
func sharedTotal(h *wasmhost.Host) (total uint64, members int) {
	v, _, ok := h.GetSharedData(vmID, stateK)
	if !ok || len(v) < 8 {
		return 0, 0
	}
	members = int(binary.LittleEndian.Uint16(v[4:]))
	off := 8
	for i := 0; i < members && off+28 <= len(v); i++ {
		total += uint64(binary.LittleEndian.Uint32(v[off+16:]))
		off += 28 + 12*int(binary.LittleEndian.Uint16(v[off+24:]))
	}
	return total, members
}

func header(h [][2]string, name string) string {
	for _, kv := range h {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// delayUpstream answers after a delay and records the most requests it held
// at once.
type delayUpstream struct {
	delay     time.Duration
	now, peak atomic.Int64
	served    atomic.Int64
}

func (u *delayUpstream) RoundTrip(ctx context.Context, _ *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
	n := u.now.Add(1)
	defer u.now.Add(-1)
	for {
		p := u.peak.Load()
		if n <= p || u.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-time.After(u.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	u.served.Add(1)
	return &wasmhost.Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: [][]byte{[]byte("ok")}}, nil
}

// TestAdmission_overload offers ten times the cap, spread over four VMs, for a
// bounded time: the upstream never holds more than the cap, every excess
// request gets a 429 with Retry-After, nothing gets a 5xx, and the in-flight
// gauge and shared counts go back to 0.
func TestAdmission_overload(t *testing.T) {
	const (
		vms     = 4
		cap     = 6
		clients = 10 * cap
	)
	m := compile(t, vms)
	pool, err := m.NewPool(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: vmID,
		Configuration: pluginConfig(fmt.Sprintf(`{"max_inflight": %d, "retry_after_seconds": 1, "retry_after_max_seconds": 4, "tick_period_ms": 100, "stale_after_ms": 500}`, cap)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	up := &delayUpstream{delay: 20 * time.Millisecond}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		badRA    []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				r := pool.Exchange(ctx, &wasmhost.Request{Headers: [][2]string{
					{":method", "GET"}, {":path", "/delay"}, {":authority", "app.example"}, {":scheme", "http"},
				}}, up)
				mu.Lock()
				statuses[r.Status]++
				if r.Status == 429 {
					ra, err := strconv.Atoi(header(r.Headers, "retry-after"))
					if err != nil || ra < 1 || ra > 6 {
						badRA = append(badRA, header(r.Headers, "retry-after"))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("statuses %v, upstream peak %d, served %d", statuses, up.peak.Load(), up.served.Load())
	if p := up.peak.Load(); p > cap {
		t.Errorf("upstream held %d requests at once, cap %d", p, cap)
	}
	if statuses[429] == 0 || statuses[200] == 0 {
		t.Errorf("statuses %v, want both 200 and 429", statuses)
	}
	for s, n := range statuses {
		if s != 200 && s != 429 {
			t.Errorf("%d responses with status %d", n, s)
		}
	}
	if len(badRA) > 0 {
		t.Errorf("%d 429s with Retry-After outside 1..6, e.g. %q", len(badRA), badRA[0])
	}
	h := m.Host()
	var total uint64
	var gauge uint64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		total, _ = sharedTotal(h)
		gauge, _ = h.Metric("wafguard_admission_inflight")
		if total == 0 && gauge == 0 {
			break
		}
	}
	if total != 0 || gauge != 0 {
		t.Errorf("after the run: shared total %d, in-flight gauge %d, want 0", total, int64(gauge))
	}
	rejected, _ := h.Metric("wafguard_admission_rejected_reason=cap")
	casRejected, _ := h.Metric("wafguard_admission_rejected_reason=cas_exhausted")
	conflicts, _ := h.Metric("wafguard_admission_cas_conflicts")
	admitted, _ := h.Metric("wafguard_admission_admitted")
	if int(rejected+casRejected) != statuses[429] || int(admitted) != statuses[200] {
		t.Errorf("metrics admitted %d rejected %d+%d, statuses %v", admitted, rejected, casRejected, statuses)
	}
	t.Logf("admitted %d, rejected cap %d, rejected cas_exhausted %d, CAS conflicts %d", admitted, rejected, casRejected, conflicts)
}

// TestAdmission_reloadedVM: a VM replaced while it holds slots never runs its
// streams' done callbacks; the other VMs take the slots back within
// stale_after_ms + tick_period_ms.
func TestAdmission_reloadedVM(t *testing.T) {
	const (
		tickMS  = 100
		staleMS = 400
	)
	m := compile(t, 2)
	pool, err := m.NewPool(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: vmID, FailurePolicy: wasmhost.FailReload,
		Configuration: pluginConfig(fmt.Sprintf(`{"max_inflight": 2, "tick_period_ms": %d, "stale_after_ms": %d}`, tickMS, staleMS)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	vm0, vm1 := pool.VMs()[0], pool.VMs()[1]
	req := [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "app.example"}, {":scheme", "http"}}
	for i := 0; i < 2; i++ {
		s := vm0.NewStream(wasmhost.StreamInfo{})
		if a := s.RequestHeaders(req, true); a != wasmhost.ActionContinue {
			t.Fatalf("stream %d on vm0: %v %+v", i, a, s.Result())
		}
	}
	s := vm1.NewStream(wasmhost.StreamInfo{})
	s.RequestHeaders(req, true)
	if r := s.LocalReply(); r == nil || r.Status != 429 {
		t.Fatalf("third stream: %+v, want 429", r)
	}
	s.End()
	reloaded := time.Now() // the old instance's last heartbeat is before this
	if err := vm0.Reload(); err != nil {
		t.Fatal(err)
	}
	bound := time.Duration(staleMS+tickMS)*time.Millisecond + 300*time.Millisecond // + scheduling slack
	for {
		s := vm1.NewStream(wasmhost.StreamInfo{})
		s.RequestHeaders(req, true)
		ok := s.LocalReply() == nil
		s.End()
		if ok {
			break
		}
		if time.Since(reloaded) > bound {
			total, members := sharedTotal(m.Host())
			t.Fatalf("capacity not back %v after the reload (shared total %d, members %d)", time.Since(reloaded), total, members)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("capacity back %v after the reload", time.Since(reloaded).Round(time.Millisecond))
	if n, _ := m.Host().Metric("wafguard_admission_repaired_slots"); n != 2 {
		t.Errorf("repaired slots %d, want 2", n)
	}
}

// TestAdmission_badConfig: the built plugin refuses to start on a bad
// admission object, with the same message as the native tests expect.
func TestAdmission_badConfig(t *testing.T) {
	m := compile(t, 1)
	_, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: vmID, Configuration: pluginConfig(`{"max_inflight": -1}`),
	})
	const want = "admission.max_inflight: got -1, want 0 (off) or a positive integer"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("NewVM error %v, want one containing %q", err, want)
	}
}
