// Command body buffers both bodies to their end, upper-cases the request
// body and appends to the response body. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o body.wasm ./wasmhost/testdata/body
package main

import (
	"bytes"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() { proxywasm.SetVMContext(&vm{}) }

func main() {}

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &stream{} }

type stream struct{ types.DefaultHttpContext }

func (*stream) OnHttpRequestHeaders(int, bool) types.Action {
	_ = proxywasm.RemoveHttpRequestHeader("content-length")
	return types.ActionContinue
}

func (*stream) OnHttpRequestBody(size int, eos bool) types.Action {
	proxywasm.LogInfof("request body callback size=%d eos=%v", size, eos)
	if !eos {
		return types.ActionPause
	}
	b, err := proxywasm.GetHttpRequestBody(0, size)
	if err != nil {
		proxywasm.LogErrorf("reading body: %v", err)
		return types.ActionContinue
	}
	_ = proxywasm.ReplaceHttpRequestBody(bytes.ToUpper(b))
	return types.ActionContinue
}

func (*stream) OnHttpResponseHeaders(int, bool) types.Action {
	_ = proxywasm.RemoveHttpResponseHeader("content-length")
	return types.ActionContinue
}

func (*stream) OnHttpResponseBody(size int, eos bool) types.Action {
	if !eos {
		return types.ActionPause
	}
	_ = proxywasm.AppendHttpResponseBody([]byte(" [filtered]"))
	return types.ActionContinue
}

func (*stream) OnHttpStreamDone() { proxywasm.LogInfo("stream done") }
