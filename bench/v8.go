package bench

import (
	"context"
	"os"

	"github.com/wafguard/wafguard/v8host"
)

// ServeV8 serves the plugin on V8 (v8host: Node 26 with Envoy's flags, one
// VM) as a reverse proxy to upstream on listen, until ctx ends: the
// wasm-crs-v8 server. The HTTP front runs inside the Node process, beside
// the VM (v8host.VM.Serve), so that what it measures is the plugin and
// Node's HTTP handling, not a hop between processes. It listens only once
// the VM has started.
func ServeV8(ctx context.Context, listen, upstream, wasm string, config []byte) error {
	e, err := v8host.Start(v8host.Options{Wasm: wasm, Stderr: os.Stderr})
	if err != nil {
		return err
	}
	defer e.Close()
	vm, err := e.NewVM(v8host.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: config})
	if err != nil {
		return err
	}
	if err := vm.Serve(listen, upstream); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
