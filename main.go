// Command main is the proxy-wasm entrypoint of the WAF filter. It only wires
// packages together: the admission guard runs first on every stream, and only
// admitted streams reach the Coraza filter.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -tags no_fs_access,memoize_builders,tinygo -o build/main.wasm .
//
// or `go run mage.go build`.
package main

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/wafguard/wafguard/admission"
	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/pluginconfig"
)

// init registers the VM context. It must not make host calls: Envoy traps
// every host call but a few while the VM initialises.
func init() {
	proxywasm.SetVMContext(&vmContext{})
}

func main() {}

type vmContext struct {
	types.DefaultVMContext
}

// NewPluginContext implements types.VMContext.
func (*vmContext) NewPluginContext(uint32) types.PluginContext {
	return &pluginContext{}
}

type pluginContext struct {
	types.DefaultPluginContext
	waf   *filter.Plugin
	guard *admission.Guard
}

// OnPluginStart implements types.PluginContext. Any configuration error
// refuses the plugin start (Envoy then rejects the configuration) after one
// critical log line that names the bad key or directive.
func (p *pluginContext) OnPluginStart(int) types.OnPluginStartStatus {
	data, err := proxywasm.GetPluginConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		proxywasm.LogCriticalf("reading plugin configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	cfg, err := pluginconfig.Parse(data)
	if err != nil {
		proxywasm.LogCritical(err.Error())
		return types.OnPluginStartStatusFailed
	}
	p.guard = admission.New(cfg.Admission, admission.HostStore{}, admission.WithMemory(cfg.Memory))
	compiled := p.guard.Compiling()
	p.waf, err = filter.NewPlugin(cfg.Filter)
	compiled()
	if err != nil {
		proxywasm.LogCritical(err.Error())
		return types.OnPluginStartStatusFailed
	}
	if err := p.guard.Start(); err != nil {
		proxywasm.LogCritical(err.Error())
		p.waf.Done()
		return types.OnPluginStartStatusFailed
	}
	if p.waf.NeedsTicks() && !p.guard.Ticking() {
		if err := proxywasm.SetTickPeriodMilliSeconds(filterTickMS); err != nil {
			proxywasm.LogCritical("setting the tick period: " + err.Error())
			p.waf.Done()
			return types.OnPluginStartStatusFailed
		}
	}
	return types.OnPluginStartStatusOK
}

// OnPluginDone implements types.PluginContext: Envoy replaced or removed
// this plugin's configuration.
func (p *pluginContext) OnPluginDone() bool {
	if p.guard != nil {
		p.guard.Done()
	}
	if p.waf != nil {
		p.waf.Done()
	}
	return true
}

// filterTickMS is the tick period the filter asks for when the admission
// guard sets none.
const filterTickMS = 1000

// OnTick implements types.PluginContext.
func (p *pluginContext) OnTick() {
	p.guard.OnTick()
	p.waf.OnTick()
}

// NewHttpContext implements types.PluginContext.
func (p *pluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	return p.guard.Wrap(contextID, p.waf.NewHttpContext)
}
