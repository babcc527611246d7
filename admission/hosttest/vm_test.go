package hosttest

import (
	"context"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/wasmhost"
)

// startOne starts one VM of the built plugin with the admission and memory
// objects given, and the environment variables env.
func startOne(t *testing.T, m *wasmhost.Module, admission, memory string, env ...[2]string) (*wasmhost.VM, error) {
	t.Helper()
	cfg := `{"directives_map": {"min": ["SecRuleEngine On"]}, "default_directives": "min", "admission": ` + admission
	if memory != "" {
		cfg += `, "memory": ` + memory
	}
	vm, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "vmres", Configuration: []byte(cfg + "}"), Env: env,
	})
	if err == nil {
		t.Cleanup(vm.Close)
	}
	return vm, err
}

var getReq = [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "app.example"}, {":scheme", "http"}}

func metric(t *testing.T, vm *wasmhost.VM, name string) uint64 {
	t.Helper()
	v, ok := vm.Host().Metric(name)
	if !ok {
		t.Fatalf("metric %s is not defined", name)
	}
	return v
}

// TestAdmission_perVMCap: max_inflight_per_vm in the built plugin.
func TestAdmission_perVMCap(t *testing.T) {
	vm, err := startOne(t, compile(t, 1), `{"max_inflight_per_vm": 2}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var held []*wasmhost.Stream
	for i := 0; i < 2; i++ {
		s := vm.NewStream(wasmhost.StreamInfo{})
		if a := s.RequestHeaders(getReq, true); a != wasmhost.ActionContinue {
			t.Fatalf("stream %d: %v %+v", i, a, s.LocalReply())
		}
		held = append(held, s)
	}
	s := vm.NewStream(wasmhost.StreamInfo{})
	s.RequestHeaders(getReq, true)
	if r := s.LocalReply(); r == nil || r.Status != 429 || header(r.Headers, "retry-after") == "" {
		t.Fatalf("third stream: %+v, want 429 with Retry-After", r)
	}
	s.End()
	if got := metric(t, vm, "wafguard_admission_rejected_reason=vm_cap"); got != 1 {
		t.Errorf("vm_cap rejections %d, want 1", got)
	}
	held[0].End()
	s = vm.NewStream(wasmhost.StreamInfo{})
	if a := s.RequestHeaders(getReq, true); a != wasmhost.ActionContinue {
		t.Fatalf("after one ended: %v %+v", a, s.LocalReply())
	}
	s.End()
	held[1].End()
}

// TestAdmission_memory: the memory guard in the built plugin: the gauges
// stay untouched until the VM's first tick or stream (Envoy's configuration
// canary VM gets neither), then the budget gauge adds max_heap_bytes, or
// GOMEMLIMIT from vm_config's environment when set; a body that alone can
// never fit the budget is answered 413 before any WAF work; the reservation gauge returns to 0; a budget the rule
// sets already fill refuses the plugin start, naming the key.
func TestAdmission_memory(t *testing.T) {
	m := compile(t, 1)
	vm, err := startOne(t, m, `{}`, `{"max_heap_bytes": 268435456}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wafguard_memory_budget_bytes", "wafguard_memory_heap_live_bytes"} {
		if got := metric(t, vm, name); got != 0 {
			t.Errorf("%s %d after the start alone, want 0", name, got)
		}
	}
	vm.Tick()
	if got := metric(t, vm, "wafguard_memory_budget_bytes"); got != 256<<20 {
		t.Errorf("budget gauge %d after a tick, want %d", got, 256<<20)
	}
	live := metric(t, vm, "wafguard_memory_heap_live_bytes")
	t.Logf("live heap after start, one-line rule set: %d KiB", live>>10)
	if live == 0 || live >= 256<<20 {
		t.Errorf("live heap gauge %d, want between 0 and the budget", live)
	}
	held := vm.NewStream(wasmhost.StreamInfo{})
	post := append(append([][2]string(nil), getReq...), [2]string{"content-length", "1000"})
	post[0][1] = "POST"
	held.RequestHeaders(post, false)
	if r := held.LocalReply(); r != nil {
		t.Fatalf("a 1000-byte POST: %+v", r)
	}
	if got := metric(t, vm, "wafguard_memory_reserved_bytes"); got != 256<<10+2*1000 {
		t.Errorf("reserved gauge %d with one POST open, want %d", got, 256<<10+2*1000)
	}
	big := vm.NewStream(wasmhost.StreamInfo{})
	post[len(post)-1][1] = "200000000" // 2 × 200 MB > 256 MiB
	big.RequestHeaders(post, false)
	if r := big.LocalReply(); r == nil || r.Status != 413 {
		t.Fatalf("a body that can never fit: %+v, want 413", r)
	}
	big.End()
	held.RequestBody(make([]byte, 1000), true)
	held.ResponseHeaders([][2]string{{":status", "200"}}, true)
	held.End()
	if got := metric(t, vm, "wafguard_memory_reserved_bytes"); got != 0 {
		t.Errorf("reserved gauge %d after every stream ended, want 0", got)
	}

	// Gauges are process-wide, like Envoy's stats: each VM adds its own.
	before := metric(t, vm, "wafguard_memory_budget_bytes")
	vm, err = startOne(t, m, `{}`, `{"max_heap_bytes": 268435456}`, [2]string{"GOMEMLIMIT", "300MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if got := metric(t, vm, "wafguard_memory_budget_bytes") - before; got != 0 {
		t.Errorf("budget gauge added by a VM that has not ticked: %d, want 0", got)
	}
	vm.Tick()
	if got := metric(t, vm, "wafguard_memory_budget_bytes") - before; got != 300<<20 {
		t.Errorf("budget gauge added by a VM with GOMEMLIMIT=300MiB: %d, want %d", got, 300<<20)
	}

	// The CRS alone takes more than 4 MiB of heap (about 14 MiB; the
	// smallest max_heap_bytes, 16 MiB, is above it, so GOMEMLIMIT sets
	// this budget).
	_, err = m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "vmres",
		Configuration: []byte(`{"directives_map": {"crs": ["Include @crs-setup-conf", "Include @owasp_crs/*.conf"]}, "default_directives": "crs"}`),
		Env:           [][2]string{{"GOMEMLIMIT", "4MiB"}},
	})
	const want = "memory: GOMEMLIMIT (4194304 bytes) is not above the heap the rule sets already use"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a budget under the rule sets' heap: error %v, want one containing %q", err, want)
	}
}
