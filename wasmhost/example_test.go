package wasmhost_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/wafguard/wafguard/wasmhost"
)

// Run the built plugin on one VM and send it one request, answered by an
// upstream written in Go. (Compiled, not run: it needs build/main.wasm,
// `go run mage.go build`.)
func Example() {
	ctx := context.Background()
	wasm, err := os.ReadFile("build/main.wasm")
	if err != nil {
		log.Fatal(err)
	}
	m, err := wasmhost.Compile(ctx, wasm, wasmhost.Options{Concurrency: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	vm, err := m.NewVM(ctx, wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "waf",
		Configuration: []byte(`{}`), // the CRS in blocking mode
		FailurePolicy: wasmhost.FailReload,
	})
	if err != nil {
		log.Fatal(err) // the plugin refused its configuration
	}
	defer vm.Close()
	upstream := wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
		return &wasmhost.Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: [][]byte{[]byte("hello")}}, nil
	})
	res := vm.Exchange(ctx, &wasmhost.Request{
		Headers: [][2]string{{":method", "GET"}, {":path", "/?q=1' or '1'='1"}, {":authority", "app.example"}, {":scheme", "http"}},
	}, upstream)
	fmt.Println(res.Status, res.LocalReply) // 403 true: the CRS blocked it before the upstream
}
