package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/wasmhost"
)

// envoyConfig is the bootstrap the docker-compose Envoy runs; the in-process
// host takes its plugin settings from the same file.
const envoyConfig = "envoy.yaml"

// hostSettings are the parts of envoyConfig that the in-process host
// reproduces.
type hostSettings struct {
	plugin      envoy.WasmPlugin
	bufferLimit int           // listener per_connection_buffer_limit_bytes
	idleTimeout time.Duration // HCM stream_idle_timeout
	reload      time.Duration // reload_config.backoff.base_interval
	statsTags   []statsTag    // stats_config.stats_tags
}

type statsTag struct{ name, regex string }

// loadHostSettings reads envoyConfig, checked against Envoy's API like the
// envoy package's tests do.
func loadHostSettings() (hostSettings, error) {
	b, doc, err := envoy.LoadBootstrap(envoyConfig)
	if err != nil {
		return hostSettings{}, err
	}
	plugins, err := envoy.WasmPlugins(doc, b)
	if err != nil {
		return hostSettings{}, err
	}
	if len(plugins) != 1 {
		return hostSettings{}, fmt.Errorf("%s: got %d wasm filters, want 1", envoyConfig, len(plugins))
	}
	listeners := b.GetStaticResources().GetListeners()
	if len(listeners) != 1 {
		return hostSettings{}, fmt.Errorf("%s: got %d listeners, want 1", envoyConfig, len(listeners))
	}
	s := hostSettings{plugin: plugins[0], bufferLimit: 1 << 20}
	if v := listeners[0].GetPerConnectionBufferLimitBytes(); v != nil {
		s.bufferLimit = int(v.GetValue())
	}
	if bi := plugins[0].Config.GetReloadConfig().GetBackoff().GetBaseInterval(); bi != nil {
		s.reload = bi.AsDuration()
	}
	err = envoy.Walk(listeners[0], func(_ string, m proto.Message) error {
		if hcm, ok := m.(*hcmv3.HttpConnectionManager); ok && hcm.GetStreamIdleTimeout() != nil {
			s.idleTimeout = hcm.GetStreamIdleTimeout().AsDuration()
		}
		return nil
	})
	if err != nil {
		return hostSettings{}, err
	}
	for _, tag := range b.GetStatsConfig().GetStatsTags() {
		s.statsTags = append(s.statsTags, statsTag{name: tag.GetTagName(), regex: tag.GetRegex()})
	}
	if s.plugin.Config.GetFailurePolicy() != wasmv3.FailurePolicy_FAIL_RELOAD {
		return hostSettings{}, fmt.Errorf("%s: failure_policy %s, want FAIL_RELOAD (what the in-process host is set up with)", envoyConfig, s.plugin.Config.GetFailurePolicy())
	}
	return s, nil
}

// inProcessWorkers is the number of VMs of the in-process host, like
// docker-compose.yml's --concurrency 2: two VMs share the admission cap
// through shared data.
const inProcessWorkers = 2

// startInProcess serves the plugin with the wazero test host the way
// docker-compose.yml serves it with Envoy: the listener with the plugin in
// front of the built-in upstream, and an admin port with
// /stats/prometheus, each on a free loopback port.
func startInProcess(wasm []byte) (*target, error) {
	s, err := loadHostSettings()
	if err != nil {
		return nil, err
	}
	var tags []wasmhost.StatsTag
	for _, t := range s.statsTags {
		re, err := regexp.Compile(t.regex)
		if err != nil {
			return nil, fmt.Errorf("%s: stats_tags %q: %w", envoyConfig, t.name, err)
		}
		tags = append(tags, wasmhost.StatsTag{Name: t.name, Regex: re})
	}
	logs := &tailWriter{max: 200}
	host := wasmhost.NewHost(wasmhost.HostOptions{Log: logs, StatsTags: tags})
	ctx := context.Background()
	mod, err := wasmhost.Compile(ctx, wasm, wasmhost.Options{
		Host:              host,
		BufferLimit:       s.bufferLimit,
		StreamIdleTimeout: s.idleTimeout,
		Concurrency:       inProcessWorkers,
	})
	if err != nil {
		return nil, err
	}
	vm := s.plugin.Config.GetVmConfig()
	pool, err := mod.NewPool(ctx, wasmhost.PluginConfig{
		Name:          s.plugin.Config.GetName(),
		RootID:        s.plugin.Config.GetRootId(),
		VMID:          vm.GetVmId(),
		Configuration: []byte(s.plugin.Configuration),
		FailurePolicy: wasmhost.FailReload,
		ReloadBackoff: s.reload,
	})
	if err != nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("starting the plugin: %w\nlog:\n%s", err, logs.String())
	}
	h := &wasmhost.Handler{Pool: pool, Upstream: wasmhost.EchoUpstream{}}
	srv := &http.Server{Handler: h, ConnContext: h.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	admin := &http.Server{Handler: wasmhost.AdminHandler(host, nil), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		mod.Close(ctx)
		return nil, err
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		pool.Close()
		mod.Close(ctx)
		return nil, err
	}
	go srv.Serve(ln)
	go admin.Serve(adminLn)
	return &target{
		name:  "in-process wasmhost",
		base:  "http://" + ln.Addr().String(),
		admin: "http://" + adminLn.Addr().String(),
		logs:  logs.String,
		stop: func() {
			srv.Close()
			admin.Close()
			pool.Close()
			mod.Close(ctx)
		},
	}, nil
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
}

// Write implements io.Writer.
func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.lines = append(w.lines, l)
	}
	if n := len(w.lines) - w.max; n > 0 {
		w.lines = append(w.lines[:0], w.lines[n:]...)
	}
	return len(p), nil
}

// String returns the kept lines.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}
