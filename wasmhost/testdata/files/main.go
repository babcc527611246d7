// Command files calls os.Stat, which makes Go import WASI file functions
// that only Envoy 1.39's host provides. The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o files.wasm ./wasmhost/testdata/files
package main

import (
	"os"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() { proxywasm.SetVMContext(&vm{}) }

func main() {}

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

func (*plugin) OnPluginStart(int) types.OnPluginStartStatus {
	_, err := os.Stat("/etc/hostname")
	proxywasm.LogInfof("stat: %v", err)
	return types.OnPluginStartStatusOK
}
