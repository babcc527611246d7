// Command gc runs runtime.GC in on_request_headers. Go's runtime then calls
// WASI poll_oneoff, which Envoy 1.33 to 1.38 answer with ENOSYS (the VM
// dies) and Envoy 1.39 with success. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o gc.wasm ./wasmhost/testdata/gc
package main

import (
	"runtime"
	"time"

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
	runtime.GC()
	time.Sleep(time.Millisecond)
	proxywasm.LogInfo("gc done")
	return types.ActionContinue
}
