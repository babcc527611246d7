package admission

import (
	"strconv"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// These tests drive the guard through the SDK's emulator with HostStore and
// the SDK's metrics, wired as main.go wires it. The emulator is global state:
// no t.Parallel. Its shared data refuses cas 0 on an existing key (Envoy
// accepts it); the guard only writes cas 0 when its get found no key, which
// both accept.

type emuVM struct {
	types.DefaultVMContext
	config string
	inner  *innerFactory
}

func (v *emuVM) NewPluginContext(uint32) types.PluginContext { return &emuPlugin{vm: v} }

type emuPlugin struct {
	types.DefaultPluginContext
	vm    *emuVM
	guard *Guard
}

func (p *emuPlugin) OnPluginStart(int) types.OnPluginStartStatus {
	cfg, err := ParseConfig([]byte(p.vm.config))
	var g *Guard
	if err == nil {
		g = New(cfg, HostStore{})
		err = g.Start()
	}
	if err != nil {
		proxywasm.LogCritical(err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.guard = g
	return types.OnPluginStartStatusOK
}

func (p *emuPlugin) OnTick() { p.guard.OnTick() }

func (p *emuPlugin) NewHttpContext(id uint32) types.HttpContext {
	return p.guard.Wrap(id, p.vm.inner.new)
}

func startEmulator(t *testing.T, config string) (proxytest.HostEmulator, *innerFactory, types.OnPluginStartStatus) {
	t.Helper()
	inner := &innerFactory{}
	host, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().WithVMContext(&emuVM{config: config, inner: inner}))
	t.Cleanup(reset)
	return host, inner, host.StartPlugin()
}

func TestGuard_Wrap_emulator(t *testing.T) {
	host, inner, st := startEmulator(t, `{"max_inflight": 1, "retry_after_seconds": 2}`)
	if st != types.OnPluginStartStatusOK {
		t.Fatalf("start: %v %q", st, host.GetCriticalLogs())
	}
	if got := host.GetTickPeriod(); got != 1000 {
		t.Errorf("tick period %d, want 1000", got)
	}
	req := [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "x.example"}}

	a := host.InitializeHttpContext()
	if act := host.CallOnRequestHeaders(a, req, true); act != types.ActionContinue || inner.created != 1 {
		t.Fatalf("first: action %v inner %d", act, inner.created)
	}
	b := host.InitializeHttpContext()
	if act := host.CallOnRequestHeaders(b, req, true); act != types.ActionPause {
		t.Fatalf("second: action %v, want pause", act)
	}
	r := host.GetSentLocalResponse(b)
	if r == nil || r.StatusCode != 429 || string(r.Data) != string(body429) {
		t.Fatalf("local reply %+v, want 429", r)
	}
	var ra string
	for _, h := range r.Headers {
		if h[0] == "retry-after" {
			ra = h[1]
		}
	}
	if n, err := strconv.Atoi(ra); err != nil || n < 2 || n > 3 {
		t.Errorf("Retry-After %q, want 2..3", ra)
	}
	if inner.created != 1 {
		t.Errorf("inner created %d for a rejected stream", inner.created)
	}
	host.CompleteHttpContext(b)
	if v, _ := host.GetGaugeMetric(MetricInflight); v != 1 {
		t.Errorf("gauge %d, want 1", v)
	}
	host.CompleteHttpContext(a)
	if v, _ := host.GetGaugeMetric(MetricInflight); v != 0 {
		t.Errorf("gauge %d after done, want 0", v)
	}
	c := host.InitializeHttpContext()
	if act := host.CallOnRequestHeaders(c, req, true); act != types.ActionContinue {
		t.Errorf("third: action %v", act)
	}
	host.Tick()
	host.CompleteHttpContext(c)

	for name, want := range map[string]uint64{MetricAdmitted: 2, MetricRejectedCap: 1, MetricCASConflicts: 0} {
		if v, err := host.GetCounterMetric(name); err != nil || v != want {
			t.Errorf("%s = %d (%v), want %d", name, v, err, want)
		}
	}
	total, members := sharedTotal(t, HostStore{}, key)
	if total != 0 || members != 1 {
		t.Errorf("shared total %d members %d, want 0 and 1", total, members)
	}
}

func TestGuard_Wrap_emulatorBodySize(t *testing.T) {
	host, inner, st := startEmulator(t, `{"max_request_body_bytes": 10}`)
	if st != types.OnPluginStartStatusOK {
		t.Fatalf("start: %v", st)
	}
	if host.GetTickPeriod() != 0 {
		t.Error("a body limit alone must not set a tick")
	}
	id := host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, [][2]string{{":method", "POST"}, {"content-length", "11"}}, false)
	if r := host.GetSentLocalResponse(id); r == nil || r.StatusCode != 413 || inner.created != 0 {
		t.Fatalf("content-length 11: reply %+v inner %d, want 413 and no inner", r, inner.created)
	}
	host.CompleteHttpContext(id)

	id = host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, [][2]string{{":method", "POST"}}, false)
	host.CallOnRequestBody(id, make([]byte, 10), false)
	if r := host.GetSentLocalResponse(id); r != nil {
		t.Fatalf("10 bytes: reply %+v", r)
	}
	if act := host.CallOnRequestBody(id, make([]byte, 1), true); act != types.ActionPause {
		t.Errorf("11th byte: action %v", act)
	}
	if r := host.GetSentLocalResponse(id); r == nil || r.StatusCode != 413 {
		t.Fatalf("11 bytes: reply %+v, want 413", r)
	}
	host.CompleteHttpContext(id)
	if v, _ := host.GetCounterMetric(MetricRejectedBodySize); v != 2 {
		t.Errorf("rejected body_size %d, want 2", v)
	}
}

func TestGuard_Start_emulatorBadConfig(t *testing.T) {
	host, _, st := startEmulator(t, `{"max_inflight": -1}`)
	if st != types.OnPluginStartStatusFailed {
		t.Fatalf("start: %v, want failed", st)
	}
	want := []string{"admission.max_inflight: got -1, want 0 (off) or a positive integer"}
	if got := host.GetCriticalLogs(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("critical logs %q, want %q", got, want)
	}
}
