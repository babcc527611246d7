package ftw

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/wasmhost"
)

// EnvoyOptions configures StartEnvoy.
type EnvoyOptions struct {
	// Wasm is the plugin's path (build/main.wasm).
	Wasm string
	// Config is the plugin configuration (ftw/ftw-config.json); it
	// replaces the bootstrap's.
	Config []byte
	// Bootstrap is the Envoy bootstrap to run (envoy/envoy.yaml), with
	// only its addresses, module and plugin configuration changed.
	Bootstrap string
	// LogFile receives Envoy's log, truncated first: go-ftw reads the
	// plugin's lines in it.
	LogFile string
	// Workers is Envoy's --concurrency; 0 means 1.
	Workers int
}

// envoyMarkerRetries is the marker requests go-ftw may send before it
// gives up finding one in Envoy's log: each is a round trip of about a
// millisecond, so this waits up to about half a second on an idle
// machine, and longer on a loaded one, where the log lags more.
const envoyMarkerRetries = 500

// EnvoyHost is a real Envoy serving the plugin, started by StartEnvoy in
// front of the built-in echo upstream.
type EnvoyHost struct {
	Target Target
	// Envoy is the running process.
	Envoy *envoy.Launched
	up    *http.Server
	log   *os.File
	crit  *criticalLines
}

// StartEnvoy starts the echo upstream and Envoy with o.Bootstrap and the
// plugin configuration o.Config, and waits until every VM serves. A
// plugin that refuses its configuration makes Envoy exit: the error has
// the end of its log.
func StartEnvoy(ctx context.Context, o EnvoyOptions) (*EnvoyHost, error) {
	f, err := os.Create(o.LogFile)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	e := &EnvoyHost{log: f, crit: &criticalLines{}}
	e.up = &http.Server{Handler: wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20), ReadHeaderTimeout: 30 * time.Second}
	go e.up.Serve(ln)
	e.Envoy, err = envoy.Launch(ctx, envoy.Setup{
		Bootstrap: o.Bootstrap, Module: o.Wasm, Upstream: ln.Addr().String(), Workers: o.Workers,
		Log: io.MultiWriter(f, e.crit.writer()),
		Edit: func(b *bootstrapv3.Bootstrap) error {
			n, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error {
				return envoy.SetConfiguration(pc, string(o.Config))
			})
			if err == nil && n == 0 {
				err = fmt.Errorf("%s: no wasm filter to configure", o.Bootstrap)
			}
			return err
		},
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	host, port, _ := net.SplitHostPort(e.Envoy.Listen)
	p, _ := strconv.Atoi(port)
	// Envoy's log is copied from its pipe into the file: under load it
	// may reach the file some hundred milliseconds after the answer.
	e.Target = Target{Host: host, Port: p, LogFile: o.LogFile, MarkerRetries: envoyMarkerRetries}
	return e, nil
}

// Critical returns how many critical lines Envoy logged (the plugin's
// failed starts, VM failures), and the last one.
func (e *EnvoyHost) Critical() (int64, string) {
	return e.crit.get()
}

// Close stops Envoy by its PID, then the upstream.
func (e *EnvoyHost) Close() {
	if e.Envoy != nil {
		e.Envoy.Stop()
	}
	e.up.Close()
	e.log.Close()
}

// criticalLines counts the lines of Envoy's log at level critical.
type criticalLines struct {
	mu   sync.Mutex
	n    int64
	last string
}

// writer returns the io.Writer that counts the lines of a log.
func (c *criticalLines) writer() *envoy.LineWriter {
	return envoy.NewLineWriter(func(l string) {
		if !strings.Contains(l, "][critical][") {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n++
		c.last = l
	})
}

func (c *criticalLines) get() (int64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.last
}
