// Command headers mutates request and response headers and reports what
// it could read. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o headers.wasm ./wasmhost/testdata/headers
package main

import (
	"encoding/binary"

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
	first, _ := proxywasm.GetHttpRequestHeader("x-dup")
	_ = proxywasm.AddHttpRequestHeader("x-dup-first", first)
	_ = proxywasm.AddHttpRequestHeader("x-added", "req")
	_ = proxywasm.ReplaceHttpRequestHeader(":path", "/rewritten")
	_ = proxywasm.RemoveHttpRequestHeader("x-remove")
	addr, _ := proxywasm.GetProperty([]string{"source", "address"})
	port, _ := proxywasm.GetProperty([]string{"source", "port"})
	proto, _ := proxywasm.GetProperty([]string{"request", "protocol"})
	p := uint64(0)
	if len(port) == 8 {
		p = binary.LittleEndian.Uint64(port)
	}
	proxywasm.LogInfof("source %s port %d protocol %s", addr, p, proto)
	_ = proxywasm.SetProperty([]string{"my_prop"}, []byte("kept"))
	return types.ActionContinue
}

func (*stream) OnHttpResponseHeaders(int, bool) types.Action {
	_, err := proxywasm.GetHttpRequestHeader(":path")
	proxywasm.LogInfof("request header in response phase: %v", err)
	v, _ := proxywasm.GetProperty([]string{"my_prop"})
	proxywasm.LogInfof("my_prop %s", v)
	_ = proxywasm.ReplaceHttpResponseHeader("x-resp", "1")
	_ = proxywasm.RemoveHttpResponseHeader("server")
	_ = proxywasm.ReplaceHttpResponseHeader(":status", "201")
	return types.ActionContinue
}
