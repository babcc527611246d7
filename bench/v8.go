package bench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/wafguard/wafguard/v8host"
)

// ServeV8 serves the plugin on V8 (v8host: Node 26 with Envoy's flags, one
// VM) as a reverse proxy to upstream on listen, until ctx ends: the
// wasm-crs-v8 server. It listens only once the VM has started.
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
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	srv := &http.Server{Handler: &v8host.Handler{VM: vm, Upstream: upstream, Client: &http.Client{Transport: tr, Timeout: 30 * time.Second}},
		ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
