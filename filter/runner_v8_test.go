package filter

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/v8host"
)

// The V8 runner drives build/main.wasm on Node 26's V8 with Envoy's flags
// (package v8host): the engine Envoy runs plugins on. One Node process
// serves the test binary; as in the wasm runner, a started VM is kept per
// configuration and reused, logs() returns the lines since the load and
// metric() the change since the load. Metrics are the Node process's, shared
// by its VMs like an Envoy process's: the change since the load counts only
// this plugin while the case tables run one exchange at a time.

var v8Once struct {
	sync.Once
	r   *v8Runner
	err error
}

func getV8Runner() (runner, error) {
	v8Once.Do(func() {
		if _, err := os.Stat(plugintest.Path()); err != nil {
			v8Once.err = fmt.Errorf("reading the plugin: %w", err)
			return
		}
		e, err := v8host.Start(v8host.Options{Wasm: plugintest.Path(), Stderr: os.Stderr})
		if err != nil {
			v8Once.err = err
			return
		}
		v8Once.r = &v8Runner{e: e, vms: map[string]*v8VM{}}
	})
	if v8Once.err != nil {
		return nil, v8Once.err
	}
	return v8Once.r, nil
}

type v8Runner struct {
	e   *v8host.Engine
	mu  sync.Mutex
	vms map[string]*v8VM
}

type v8VM struct {
	vm  *v8host.VM
	log []string
	// fronts are the HTTP fronts started on the VM, by upstream URL.
	fronts map[string]string
}

// drain appends the VM's new log lines.
func (v *v8VM) drain(t testing.TB) {
	l, err := v.vm.Logs()
	if err != nil {
		t.Fatal(err)
	}
	v.log = append(v.log, l...)
}

func (r *v8Runner) load(t testing.TB, config string) (loadedPlugin, error) {
	t.Helper()
	return r.loadEnvoy(t, config, envoyConfig{})
}

func (r *v8Runner) loadEnvoy(t testing.TB, config string, env envoyConfig) (loadedPlugin, error) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := fmt.Sprintf("%+v\n%s", env, config)
	v, ok := r.vms[key]
	if !ok {
		vm, err := r.e.NewVM(v8host.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(config),
			AllowOnHeadersStopIteration: env.stopIteration})
		if err != nil {
			// The host's error holds the plugin's log lines.
			return nil, criticalError(strings.Split(err.Error(), "\n"), err)
		}
		v = &v8VM{vm: vm}
		r.vms[key] = v
	}
	v.drain(t)
	m, err := r.e.Metrics()
	if err != nil {
		return nil, err
	}
	return &v8Plugin{r: r, v: v, logStart: len(v.log), base: m, config: key}, nil
}

type v8Plugin struct {
	r           *v8Runner
	v           *v8VM
	config      string
	logStart    int
	base        map[string]uint64
	filterState map[string]string
}

func (p *v8Plugin) do(t testing.TB, ex exchange) outcome {
	t.Helper()
	res, err := p.v.vm.Exchange(v8host.Exchange{
		Headers:       ex.requestHeaders(),
		Body:          ex.body,
		Reset:         ex.reset,
		Source:        wasmInfo.SourceAddress,
		Destination:   wasmInfo.DestinationAddress,
		Protocol:      wasmInfo.Protocol,
		RouteName:     ex.route,
		RespStatus:    ex.upstreamStatus(),
		RespHeaders:   ex.respHeaders,
		RespBody:      ex.respBody,
		RespAfter:     ex.respAfter,
		RespEndsEarly: ex.respEndsEarly,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.v.drain(t)
	if res.Failed {
		p.r.mu.Lock()
		delete(p.r.vms, p.config)
		p.r.mu.Unlock()
	}
	p.filterState = res.FilterState
	out := outcome{upstream: res.Upstream, upstreamHeaders: res.UpstreamHeaders, upstreamBody: append([]byte(nil), res.UpstreamBody...)}
	if res.Reset || res.Status == 0 {
		return out
	}
	out.status, out.localReply, out.body, out.details = res.Status, res.LocalReply, res.Body, res.Details
	out.headers = append([][2]string{{":status", strconv.Itoa(res.Status)}}, res.Headers...)
	return out
}

func (p *v8Plugin) logs() []string {
	return append([]string(nil), p.v.log[p.logStart:]...)
}

func (p *v8Plugin) metric(name string) (uint64, bool) {
	m, err := p.r.e.Metrics()
	if err != nil {
		return 0, false
	}
	v, ok := m[name]
	if !ok {
		return 0, false
	}
	return v - p.base[name], true
}

func (p *v8Plugin) close() {}

// front serves the plugin's VM over HTTP through the host's own front
// (v8host.VM.Serve), in front of the upstream at base URL upstream. A
// front lives as long as the Node process, so one is started per VM and
// upstream.
func (p *v8Plugin) front(t testing.TB, upstream string) string {
	t.Helper()
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if u, ok := p.v.fronts[upstream]; ok {
		return u
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := p.v.vm.Serve(addr, upstream); err != nil {
		t.Fatal(err)
	}
	if p.v.fronts == nil {
		p.v.fronts = map[string]string{}
	}
	p.v.fronts[upstream] = "http://" + addr
	return "http://" + addr
}
