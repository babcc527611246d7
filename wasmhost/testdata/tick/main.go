// Command tick counts ticks and holds each request at its headers until
// the next tick resumes it. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o tick.wasm ./wasmhost/testdata/tick
package main

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() { proxywasm.SetVMContext(&vm{}) }

func main() {}

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	ticks  proxywasm.MetricCounter
	paused []uint32
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	p.ticks = proxywasm.DefineCounterMetric("tick_plugin.ticks")
	if err := proxywasm.SetTickPeriodMilliSeconds(20); err != nil {
		proxywasm.LogCriticalf("tick period: %v", err)
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *plugin) OnTick() {
	p.ticks.Increment(1)
	for _, id := range p.paused {
		if err := proxywasm.SetEffectiveContext(id); err != nil {
			continue
		}
		_ = proxywasm.ResumeHttpRequest()
	}
	p.paused = p.paused[:0]
}

func (p *plugin) NewHttpContext(id uint32) types.HttpContext { return &stream{p: p, id: id} }

type stream struct {
	types.DefaultHttpContext
	p  *plugin
	id uint32
}

func (s *stream) OnHttpRequestHeaders(int, bool) types.Action {
	s.p.paused = append(s.p.paused, s.id)
	return types.ActionPause
}
