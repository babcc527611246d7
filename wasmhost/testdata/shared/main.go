// Command shared reads a shared-data counter on request headers and writes
// it back, incremented, with the CAS it read, on the last request body
// chunk. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o shared.wasm ./wasmhost/testdata/shared
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

func (*plugin) NewHttpContext(uint32) types.HttpContext { return &stream{} }

type stream struct {
	types.DefaultHttpContext
	n   int
	cas uint32
}

func (s *stream) OnHttpRequestHeaders(int, bool) types.Action {
	v, cas, err := proxywasm.GetSharedData("counter")
	if err != nil && err != types.ErrorStatusNotFound {
		proxywasm.LogErrorf("get: %v", err)
	}
	s.n, _ = strconv.Atoi(string(v))
	s.cas = cas
	return types.ActionContinue
}

func (s *stream) OnHttpRequestBody(_ int, eos bool) types.Action {
	if !eos {
		return types.ActionContinue
	}
	err := proxywasm.SetSharedData("counter", []byte(strconv.Itoa(s.n+1)), s.cas)
	proxywasm.LogInfof("set counter=%d cas=%d: %v", s.n+1, s.cas, err)
	return types.ActionContinue
}
