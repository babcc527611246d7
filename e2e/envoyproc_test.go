package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// envEnvoy set to 1 runs the tests against a real Envoy (ENVOY_BIN, or the
// one go run mage.go envoy installed) started here with envoy.yaml, in
// front of the built-in upstream.
const envEnvoy = "E2E_ENVOY"

// envoyWorkers is the real Envoy's --concurrency, as docker-compose.yml's.
const envoyWorkers = 2

// envoyStartTimeout bounds Envoy's start: V8 compiles the whole module
// before the listener opens (tens of seconds on a busy 2-core machine).
const envoyStartTimeout = 4 * time.Minute

// startEnvoy starts the built-in upstream and Envoy with envoy.yaml, its
// addresses moved to free loopback ports and its module to
// plugintest.Path() (envoy.Localize).
func startEnvoy() (*target, error) {
	bin, v, err := envoy.Binary()
	if err != nil {
		return nil, err
	}
	wasm, err := filepath.Abs(plugintest.Path())
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(wasm); err != nil {
		return nil, fmt.Errorf("real Envoy: %w; build it with: %s", err, buildCommand)
	}
	b, _, err := envoy.LoadBootstrap(envoyConfig)
	if err != nil {
		return nil, err
	}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	up := &http.Server{Handler: wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20), ReadHeaderTimeout: 10 * time.Second}
	go up.Serve(upLn)
	listen, admin := freePort(), freePort()
	if err := envoy.Localize(b, envoy.Local{Listen: listen, Admin: admin, Upstream: upLn.Addr().String(), Module: wasm}); err != nil {
		up.Close()
		return nil, err
	}
	js, err := envoy.JSON(b)
	if err != nil {
		up.Close()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wafguard-e2e-envoy-")
	if err != nil {
		up.Close()
		return nil, err
	}
	cfg := filepath.Join(dir, "envoy.json")
	if err := os.WriteFile(cfg, js, 0o644); err != nil {
		up.Close()
		return nil, err
	}
	p, err := envoy.Start(envoy.Options{Binary: bin, Config: cfg, Admin: admin, Concurrency: envoyWorkers, BaseID: 100 + os.Getpid()%1000})
	if err != nil {
		up.Close()
		return nil, err
	}
	stop := func() {
		p.Stop()
		up.Close()
		os.RemoveAll(dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), envoyStartTimeout)
	defer cancel()
	if err := p.WaitServing(ctx, envoyWorkers+1); err != nil {
		stop()
		return nil, fmt.Errorf("real Envoy %s (%s): %w", v, bin, err)
	}
	fmt.Printf("e2e: Envoy %s (pid %d) serving %s with %d workers after %s\n", v, p.PID(), wasm, envoyWorkers, time.Since(p.Started).Round(time.Millisecond))
	return &target{
		name:  "Envoy " + v.String(),
		base:  "http://" + listen,
		admin: p.AdminURL(),
		logs:  p.Log,
		stop:  stop,
	}, nil
}

// freePort returns a loopback host:port that was free a moment ago.
func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
