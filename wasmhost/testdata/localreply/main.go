// Command localreply answers 403 from the phase named by its plugin
// configuration (request_headers, request_body, response_headers,
// response_body) and logs every callback. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o localreply.wasm ./wasmhost/testdata/localreply
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
	phase string
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	b, err := proxywasm.GetPluginConfiguration()
	if err != nil {
		proxywasm.LogCriticalf("plugin configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	p.phase = string(b)
	if p.phase == "refuse" {
		proxywasm.LogCritical("refusing to start: configuration says refuse")
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(uint32) types.HttpContext { return &stream{phase: p.phase} }

type stream struct {
	types.DefaultHttpContext
	phase string
}

func (s *stream) reply(phase string) types.Action {
	if s.phase != phase {
		return types.ActionContinue
	}
	_ = proxywasm.SendHttpResponse(403, [][2]string{{"x-reply", phase}}, []byte("denied"), -1)
	return types.ActionContinue // overridden by the host: a local reply stops iteration
}

func (s *stream) OnHttpRequestHeaders(int, bool) types.Action {
	proxywasm.LogInfo("on_request_headers")
	return s.reply("request_headers")
}

func (s *stream) OnHttpRequestBody(size int, eos bool) types.Action {
	proxywasm.LogInfof("on_request_body %d %v", size, eos)
	return s.reply("request_body")
}

func (s *stream) OnHttpResponseHeaders(int, bool) types.Action {
	st, _ := proxywasm.GetHttpResponseHeader(":status")
	proxywasm.LogInfof("on_response_headers %s", st)
	return s.reply("response_headers")
}

func (s *stream) OnHttpResponseBody(size int, eos bool) types.Action {
	proxywasm.LogInfof("on_response_body %d %v", size, eos)
	return s.reply("response_body")
}

func (*stream) OnHttpStreamDone() { proxywasm.LogInfo("on_log") }
