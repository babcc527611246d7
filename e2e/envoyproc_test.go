package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
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
// plugintest.Path() (envoy.Launch).
func startEnvoy() (*target, error) {
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	up := &http.Server{Handler: wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20), ReadHeaderTimeout: 10 * time.Second}
	go up.Serve(upLn)
	p, err := envoy.Launch(context.Background(), envoy.Setup{
		Bootstrap: envoyConfig, Module: plugintest.Path(), Upstream: upLn.Addr().String(),
		Workers: envoyWorkers, Wait: envoyStartTimeout,
	})
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("real Envoy: %w", err)
	}
	fmt.Printf("e2e: Envoy %s (pid %d) serving %s with %d workers after %s\n", p.Version, p.PID(), plugintest.Path(), envoyWorkers, p.Serving.Round(time.Millisecond))
	return &target{
		name:  "Envoy " + p.Version.String(),
		base:  "http://" + p.Listen,
		admin: p.AdminURL(),
		logs:  p.Log,
		stop: func() {
			p.Stop()
			up.Close()
		},
	}, nil
}
