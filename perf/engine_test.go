package perf

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/v8host"
	"github.com/wafguard/wafguard/wasmhost"
)

// engineVM is one VM of the plugin with the CRS on the engine that
// $WAFGUARD_ENGINE names: "wazero" (the default, wasmhost) or "v8"
// (v8host, Node 26's V8 with Envoy's flags).
type engineVM interface {
	exchange(tb testing.TB, r *benchreq.Request) int
	// cpu is the CPU time in ns the engine has used so far: this test
	// process for wazero, the Node process for V8.
	cpu(tb testing.TB) int64
	memory(tb testing.TB) uint64
}

func startEngineVM(tb testing.TB) engineVM {
	tb.Helper()
	return startEngineVMOf(tb, plugintest.Path())
}

// startEngineVMOf is startEngineVM with the module at path.
func startEngineVMOf(tb testing.TB, path string) engineVM {
	tb.Helper()
	switch e := os.Getenv("WAFGUARD_ENGINE"); e {
	case "", "wazero":
		wasm, err := os.ReadFile(path)
		if err != nil {
			plugintest.Missing(tb, "the plugin: %v", err)
		}
		return wazeroVM{startVMOf(tb, context.Background(), "", wasm)}
	case "v8":
		return startV8VM(tb, path)
	default:
		tb.Fatalf("WAFGUARD_ENGINE=%q: want wazero or v8", e)
		return nil
	}
}

type wazeroVM struct{ vm *wasmhost.VM }

func (w wazeroVM) exchange(_ testing.TB, r *benchreq.Request) int {
	return w.vm.Exchange(context.Background(), wasmRequest(r), upstream).Status
}
func (wazeroVM) cpu(testing.TB) int64       { return cpuTime() }
func (w wazeroVM) memory(testing.TB) uint64 { return w.vm.MemorySize() }

type v8VM struct {
	e  *v8host.Engine
	vm *v8host.VM
}

func startV8VM(tb testing.TB, path string) v8VM {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		plugintest.Missing(tb, "the plugin: %v", err)
	}
	e, err := v8host.Start(v8host.Options{Wasm: path, Stderr: os.Stderr})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	t0 := time.Now()
	cfg := v8CRSConfig()
	cfg.AllowOnHeadersStopIteration = holdHeaders()
	vm, err := e.NewVM(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	v := v8VM{e, vm}
	// V8 compiles each function with TurboFan on its first call: the
	// first requests after a start pay for it. One pass over the pool,
	// reported here, leaves the measured requests at steady state, as
	// wazero's ahead-of-time compilation does.
	pool, err := benchreq.DefaultPool()
	if err != nil {
		tb.Fatal(err)
	}
	startup := time.Since(t0)
	first := benchreq.Select(pool, "benign_get")[0]
	c0 := v.cpu(tb)
	v.exchange(tb, first)
	c1 := v.cpu(tb)
	for _, r := range benchreq.Select(pool, "mix") {
		v.exchange(tb, r)
	}
	c2 := v.cpu(tb)
	again := v.cpu(tb)
	v.exchange(tb, first)
	tb.Logf("V8: VM start (CRS) %v; first GET %.1f ms CPU, the same GET warm %.1f ms; first pass over the pool (%d requests) %.0f ms CPU",
		startup.Round(time.Millisecond), float64(c1-c0)/1e6, float64(v.cpu(tb)-again)/1e6, len(pool), float64(c2-c1)/1e6)
	return v
}

// v8CRSConfig is the plugin configuration of a V8 VM with the CRS
// (crsConfig), with $PERF_GUEST_ENV.
func v8CRSConfig() v8host.PluginConfig {
	return v8host.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(crsConfig()), Env: guestEnv()}
}

func (v v8VM) exchange(tb testing.TB, r *benchreq.Request) int {
	ex := v8host.Exchange{
		Headers:     append([][2]string{{":method", r.Method}, {":path", r.Path}, {":authority", "shop.example.com"}, {":scheme", "https"}}, r.Headers...),
		Source:      info.SourceAddress,
		Destination: info.DestinationAddress,
		Protocol:    info.Protocol,
		RespStatus:  200,
		RespHeaders: [][2]string{{"content-type", "text/html"}, {"content-length", "12"}},
		RespBody:    [][]byte{[]byte("<p>hello</p>")},
	}
	if r.Body != nil {
		ex.Body = [][]byte{r.Body}
	}
	res, err := v.vm.Exchange(ex)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Failed {
		logs, _ := v.vm.Logs()
		tb.Fatalf("the VM failed: %q", logs)
	}
	return res.Status
}

func (v v8VM) cpu(tb testing.TB) int64 {
	d, err := v.e.CPU()
	if err != nil {
		tb.Fatal(err)
	}
	return d.Nanoseconds()
}

func (v v8VM) memory(tb testing.TB) uint64 {
	n, err := v.vm.MemorySize()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
