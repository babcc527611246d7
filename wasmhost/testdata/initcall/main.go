// Command initcall defines a metric in init(), which Envoy forbids while
// the VM initialises (the host call traps). The wasmhost tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o initcall.wasm ./wasmhost/testdata/initcall
package main

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() {
	proxywasm.DefineCounterMetric("initcall.too_early")
	proxywasm.SetVMContext(&types.DefaultVMContext{})
}

func main() {}
