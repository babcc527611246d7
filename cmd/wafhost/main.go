// Command wafhost runs a proxy-wasm plugin (build/main.wasm by default) on
// the wasmhost package and serves HTTP through it, the way Envoy with the
// wasm HTTP filter would: a reverse proxy to --upstream, or to a built-in
// echo upstream (/anything, /status/N, /delay/N, /reflect), with an admin
// listener for /stats/prometheus and /ready.
//
//	go run ./cmd/wafhost --config config/default.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wafguard/wafguard/pluginconfig"
	"github.com/wafguard/wafguard/wasmhost"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		// "wafhost check --config f.json": only check the configuration natively.
		os.Exit(pluginconfig.Main("wafhost check", os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wafhost:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("wafhost", flag.ContinueOnError)
	var (
		wasmPath    = fs.String("wasm", "build/main.wasm", "plugin `file` to run")
		configFile  = fs.String("config", "", "plugin configuration JSON `file`")
		configJSON  = fs.String("config-json", "", "plugin configuration, inline JSON (instead of --config)")
		listen      = fs.String("listen", "127.0.0.1:8080", "HTTP listener `address`")
		admin       = fs.String("admin", "127.0.0.1:8082", "admin listener `address` (/stats/prometheus, /stats, /ready); empty turns it off")
		upstream    = fs.String("upstream", "", "upstream `URL`; empty uses the built-in echo upstream")
		concurrency = fs.Int("concurrency", runtime.NumCPU(), "number of VMs (Envoy worker threads)")
		envoy       = fs.String("envoy", "1.39", "Envoy `version` whose wasm host to copy: 1.39 (cpp-host #533) or 1.33 (#427)")
		policy      = fs.String("failure-policy", "fail_reload", "after a VM trap: fail_closed, fail_open or fail_reload (envoy/envoy.yaml uses fail_reload)")
		backoff     = fs.Duration("reload-backoff", time.Second, "fail_reload backoff (reload_config.backoff.base_interval)")
		logFile     = fs.String("log-file", "", "also append log lines to this `file`")
		logLevel    = fs.String("log-level", "info", "least level logged: trace, debug, info, warn, error, critical")
		bufLimit    = fs.Int("buffer-limit", 2<<20, "per-stream body buffer limit in `bytes` (per_connection_buffer_limit_bytes; envoy/envoy.yaml uses 2 MiB)")
		cacheDir    = fs.String("cache-dir", "", "compilation cache `directory` (default: "+wasmhost.DefaultCacheDir()+"); \"off\" disables it")
		name        = fs.String("name", "wafguard", "plugin name")
		rootID      = fs.String("root-id", "", "plugin root_id")
		vmID        = fs.String("vm-id", "wafguard", "vm_id (the shared-data namespace)")
		idle        = fs.Duration("stream-idle-timeout", 5*time.Minute, "how long a paused stream may wait (HCM stream_idle_timeout)")
		stopIter    = fs.Bool("allow-on-headers-stop-iteration", false, "model allow_on_headers_stop_iteration: true (Envoy 1.35+)")
		statsTags   stringList
		vmEnv       stringList
	)
	fs.Var(&vmEnv, "vm-env", "environment variable `NAME=value` of every VM (vm_config.environment_variables; e.g. GOGC=200 for the guest's Go runtime), repeatable")
	fs.Var(&statsTags, "stats-tags", "tag extractor `name=regex` for /stats/prometheus, repeatable; replaces the default set (env, rule_id, phase from envoy/envoy.yaml)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var env [][2]string
	for _, kv := range vmEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--vm-env %q: want NAME=value", kv)
		}
		env = append(env, [2]string{k, v})
	}
	if *configFile != "" && *configJSON != "" {
		return errors.New("--config and --config-json: give one of them")
	}
	var pluginConfig []byte
	switch {
	case *configFile != "":
		b, err := os.ReadFile(*configFile)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		pluginConfig = b
	case *configJSON != "":
		pluginConfig = []byte(*configJSON)
	}
	ver, err := wasmhost.ParseEnvoyVersion(*envoy)
	if err != nil {
		return fmt.Errorf("--envoy: %w", err)
	}
	fp, err := wasmhost.ParseFailurePolicy(*policy)
	if err != nil {
		return fmt.Errorf("--failure-policy: %w", err)
	}
	level, err := wasmhost.ParseLogLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if *concurrency < 1 {
		return fmt.Errorf("--concurrency: got %d, want 1 or more", *concurrency)
	}
	var tags []wasmhost.StatsTag
	if len(statsTags) > 0 {
		if tags, err = wasmhost.ParseStatsTags(statsTags); err != nil {
			return fmt.Errorf("--stats-tags: %w", err)
		}
	}
	var logOut io.Writer = os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--log-file: %w", err)
		}
		defer f.Close()
		logOut = io.MultiWriter(os.Stderr, f)
	}
	host := wasmhost.NewHost(wasmhost.HostOptions{Log: logOut, LogLevel: level, StatsTags: tags})

	var up wasmhost.Upstream = wasmhost.EchoUpstream{}
	upName := "built-in echo upstream"
	if *upstream != "" {
		hu, err := wasmhost.NewHTTPUpstream(*upstream)
		if err != nil {
			return fmt.Errorf("--upstream: %w", err)
		}
		up, upName = hu, *upstream
	}

	var ready atomic.Bool
	if *admin != "" {
		aln, err := net.Listen("tcp", *admin)
		if err != nil {
			return fmt.Errorf("--admin: %w", err)
		}
		go func() { _ = http.Serve(aln, wasmhost.AdminHandler(host, ready.Load)) }()
	}

	wasm, err := os.ReadFile(*wasmPath)
	if err != nil {
		return fmt.Errorf("--wasm: %w (build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -tags no_fs_access,memoize_builders,tinygo -o build/main.wasm .)", err)
	}
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "wafhost: compiling %s (%.1f MB) for Envoy %s ...\n", *wasmPath, float64(len(wasm))/1e6, ver)
	m, err := wasmhost.Compile(ctx, wasm, wasmhost.Options{
		Envoy: ver, CacheDir: *cacheDir, Host: host, BufferLimit: *bufLimit,
		StreamIdleTimeout: *idle, Concurrency: *concurrency,
	})
	if err != nil {
		return err
	}
	defer m.Close(ctx)
	fmt.Fprintf(os.Stderr, "wafhost: compiled in %v; starting %d VMs ...\n", m.CompileTime.Round(time.Millisecond), *concurrency)
	start := time.Now()
	pool, err := m.NewPool(ctx, wasmhost.PluginConfig{
		Name: *name, RootID: *rootID, VMID: *vmID, Configuration: pluginConfig,
		FailurePolicy: fp, ReloadBackoff: *backoff, AllowOnHeadersStopIteration: *stopIter, Env: env,
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(os.Stderr, "wafhost: %d VMs started in %v\n", *concurrency, time.Since(start).Round(time.Millisecond))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	h := &wasmhost.Handler{Pool: pool, Upstream: up}
	srv := &http.Server{Handler: h, ConnContext: h.ConnContext, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	ready.Store(true)
	adminURL := "off"
	if *admin != "" {
		adminURL = "http://" + *admin
	}
	fmt.Fprintf(os.Stderr, "wafhost: ready on http://%s (admin %s, upstream %s)\n", ln.Addr(), adminURL, upName)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case err := <-errc:
		return err
	case <-sig:
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
