// Command trap panics in on_request_headers for the path /panic and counts
// its starts in shared data. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o trap.wasm ./wasmhost/testdata/trap
package main

import (
	"strconv"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() { proxywasm.SetVMContext(&vm{}) }

func main() {}

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

func (*plugin) OnPluginStart(int) types.OnPluginStartStatus {
	v, cas, _ := proxywasm.GetSharedData("starts")
	n, _ := strconv.Atoi(string(v))
	_ = proxywasm.SetSharedData("starts", []byte(strconv.Itoa(n+1)), cas)
	proxywasm.DefineCounterMetric("trap_plugin.starts").Increment(1)
	return types.OnPluginStartStatusOK
}

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &stream{} }

type stream struct {
	types.DefaultHttpContext
	panicInBody bool
}

func (*stream) OnHttpRequestHeaders(int, bool) types.Action {
	if p, _ := proxywasm.GetHttpRequestHeader(":path"); p == "/panic" {
		panic("boom")
	}
	return types.ActionContinue
}

// OnHttpResponseHeaders reads what the body callback needs: the response
// header map is gone once the headers continued.
func (s *stream) OnHttpResponseHeaders(int, bool) types.Action {
	p, _ := proxywasm.GetHttpResponseHeader("x-panic")
	s.panicInBody = p != ""
	return types.ActionContinue
}

func (s *stream) OnHttpResponseBody(int, bool) types.Action {
	if s.panicInBody {
		panic("boom in response")
	}
	return types.ActionContinue
}
