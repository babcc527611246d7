package filter

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// This file is not named runner_wasm_test.go: the _wasm suffix is a GOARCH
// build constraint, so Go would compile it only for GOARCH=wasm.
//
// The wasm runner drives build/main.wasm (the whole plugin: admission guard
// and filter) through the wasmhost package, which applies Envoy's stream
// semantics (docs/envoy-host-rules.md). The module is compiled once
// per test binary, using wazero's on-disk compilation cache, so only the
// first run after a rebuild of main.wasm pays the full compile.
//
// Starting a VM compiles the rules inside the plugin, which takes seconds
// with the CRS, so a started VM is kept per configuration string and reused
// by later loads of the same configuration: logs() then returns only the
// lines written since that load, and metric() the change since that load
// (gauges that go up and down return to their value at load). A VM that
// traps is dropped from the cache.

var wasmOnce struct {
	sync.Once
	r   *wasmRunner
	err error
}

func getWasmRunner() (runner, error) {
	wasmOnce.Do(func() {
		b, err := os.ReadFile(plugintest.Path())
		if err != nil {
			wasmOnce.err = fmt.Errorf("reading the plugin: %w", err)
			return
		}
		m, err := wasmhost.Compile(context.Background(), b, wasmhost.Options{Concurrency: 1})
		if err != nil {
			wasmOnce.err = fmt.Errorf("compiling %s: %w", plugintest.Path(), err)
			return
		}
		wasmOnce.r = &wasmRunner{m: m, vms: map[string]*wasmVM{}}
	})
	if wasmOnce.err != nil {
		return nil, wasmOnce.err
	}
	return wasmOnce.r, nil
}

type wasmRunner struct {
	m   *wasmhost.Module
	mu  sync.Mutex
	vms map[string]*wasmVM
}

// wasmVM is one started plugin with its own Host (metrics, shared data).
type wasmVM struct {
	vm   *wasmhost.VM
	host *wasmhost.Host
	mu   sync.Mutex
	log  []string
}

func (v *wasmVM) sink(e wasmhost.LogEntry) {
	v.mu.Lock()
	v.log = append(v.log, e.Level.String()+": "+e.Message)
	v.mu.Unlock()
}

func (r *wasmRunner) load(t testing.TB, config string) (loadedPlugin, error) {
	t.Helper()
	return r.loadEnvoy(t, config, envoyConfig{})
}

func (r *wasmRunner) loadEnvoy(t testing.TB, config string, env envoyConfig) (loadedPlugin, error) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := fmt.Sprintf("%+v\n%s", env, config)
	v, ok := r.vms[key]
	if ok && v.vm.Failed() {
		v.vm.Close()
		delete(r.vms, key)
		ok = false
	}
	if !ok {
		v = &wasmVM{host: wasmhost.NewHost(wasmhost.HostOptions{})}
		vm, err := r.m.NewVM(context.Background(), wasmhost.PluginConfig{
			Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(config),
			Host: v.host, LogSink: v.sink, AllowOnHeadersStopIteration: env.stopIteration,
		})
		if err != nil {
			return nil, criticalError(v.log, err)
		}
		v.vm = vm
		r.vms[key] = v
	}
	p := &wasmPlugin{v: v, base: map[string]uint64{}}
	v.mu.Lock()
	p.logStart = len(v.log)
	v.mu.Unlock()
	for _, n := range v.host.MetricNames() {
		p.base[n], _ = v.host.Metric(n)
	}
	return p, nil
}

type wasmPlugin struct {
	v        *wasmVM
	logStart int
	base     map[string]uint64
	// filterState is what the last exchange stored with proxy_set_property.
	filterState map[string]string
}

// wasmProperties match the native runner's stream properties.
var wasmInfo = wasmhost.StreamInfo{SourceAddress: "10.1.2.3:43210", DestinationAddress: "10.0.0.1:8080", Protocol: "HTTP/1.1"}

func (p *wasmPlugin) do(t testing.TB, ex exchange) outcome {
	t.Helper()
	req := &wasmhost.Request{
		Headers:           ex.requestHeaders(),
		Body:              ex.body,
		Reset:             ex.reset,
		Info:              wasmhost.StreamInfo{SourceAddress: wasmInfo.SourceAddress, DestinationAddress: wasmInfo.DestinationAddress, Protocol: wasmInfo.Protocol, RouteName: ex.route},
		ResponseAfter:     ex.respAfter,
		ResponseEndsEarly: ex.respEndsEarly,
	}
	up := wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
		return &wasmhost.Response{Status: ex.upstreamStatus(), Headers: ex.respHeaders, Body: ex.respBody}, nil
	})
	res := p.v.vm.Exchange(context.Background(), req, up)
	p.filterState = res.FilterState
	out := outcome{upstream: res.Upstream, upstreamHeaders: res.UpstreamHeaders, upstreamBody: append([]byte(nil), res.UpstreamBody...)}
	if res.Reset || res.Status == 0 {
		return out
	}
	out.status, out.localReply, out.body, out.details = res.Status, res.LocalReply, res.Body, res.Details
	out.headers = append([][2]string{{":status", strconv.Itoa(res.Status)}}, res.Headers...)
	return out
}

func (p *wasmPlugin) logs() []string {
	p.v.mu.Lock()
	defer p.v.mu.Unlock()
	return append([]string(nil), p.v.log[p.logStart:]...)
}

func (p *wasmPlugin) metric(name string) (uint64, bool) {
	v, ok := p.v.host.Metric(name)
	if !ok {
		return 0, false
	}
	return v - p.base[name], true
}

func (p *wasmPlugin) close() {}

// front serves the plugin's VM over HTTP through wasmhost.Handler, the
// server of cmd/wafhost, in front of the upstream at base URL upstream.
func (p *wasmPlugin) front(t testing.TB, upstream string) string {
	t.Helper()
	up, err := wasmhost.NewHTTPUpstream(upstream)
	if err != nil {
		t.Fatal(err)
	}
	h := &wasmhost.Handler{Pool: wasmhost.PoolOf(p.v.vm), Upstream: up}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = h.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
