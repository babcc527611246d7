package ftw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wafguard/wafguard/wasmhost"
)

// WasmOptions configures StartWasm.
type WasmOptions struct {
	// Wasm is the plugin binary (build/main.wasm).
	Wasm []byte
	// Config is the plugin configuration (ftw/ftw-config.json).
	Config []byte
	// LogFile receives the host's log, truncated first.
	LogFile string
	// VMs is the number of VMs (Envoy workers); 0 means 1. go-ftw sends
	// one request at a time, so more VMs only cost start-up time.
	VMs int
	// Env is the VM's environment (vm_config.environment_variables).
	Env [][2]string
	// CacheDir is wazero's compilation cache; empty means
	// wasmhost.DefaultCacheDir().
	CacheDir string
	// AllowOnHeadersStopIteration is Envoy's flag of that name, which the
	// plugin's hold_headers_until_inspected needs.
	AllowOnHeadersStopIteration bool
}

// WasmHost is the plugin served by the wasmhost package in this process,
// the way cmd/wafhost serves it, in front of the built-in echo upstream
// (which answers /reflect for the RESPONSE-95x tests).
type WasmHost struct {
	Target Target
	// Started is how long compiling and starting the VMs took.
	Started  time.Duration
	srv      *http.Server
	pool     *wasmhost.Pool
	mod      *wasmhost.Module
	log      *os.File
	critical atomic.Int64
	lastCrit atomic.Value // string
}

// StartWasm compiles the plugin, starts its VMs and serves HTTP on a free
// loopback port. A plugin that refuses its configuration fails here, with
// the plugin's critical log lines in the error.
func StartWasm(ctx context.Context, o WasmOptions) (*WasmHost, error) {
	start := time.Now()
	f, err := os.Create(o.LogFile)
	if err != nil {
		return nil, err
	}
	w := &WasmHost{log: f}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	host := wasmhost.NewHost(wasmhost.HostOptions{Log: f, LogLevel: wasmhost.LevelInfo})
	vms := o.VMs
	if vms <= 0 {
		vms = 1
	}
	if w.mod, err = wasmhost.Compile(ctx, o.Wasm, wasmhost.Options{Host: host, Concurrency: vms, CacheDir: o.CacheDir}); err != nil {
		return nil, fmt.Errorf("compiling the plugin: %w", err)
	}
	w.pool, err = w.mod.NewPool(ctx, wasmhost.PluginConfig{
		Name: "ftw", VMID: "ftw", Configuration: o.Config,
		// As in envoy/envoy.yaml: a trapped VM is rebuilt, so one trap
		// fails the tests it hits and the run goes on. Critical counts
		// the traps.
		FailurePolicy:               wasmhost.FailReload,
		Env:                         o.Env,
		AllowOnHeadersStopIteration: o.AllowOnHeadersStopIteration,
		LogSink: func(e wasmhost.LogEntry) {
			if e.Level >= wasmhost.LevelCritical {
				w.critical.Add(1)
				w.lastCrit.Store(e.Message)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the plugin: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &wasmhost.Handler{Pool: w.pool, Upstream: wasmhost.EchoUpstream{}}
	w.srv = &http.Server{Handler: oneAtATime(h), ConnContext: h.ConnContext, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "ftw: wasm host: %v\n", err)
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	w.Target = Target{Host: "127.0.0.1", Port: addr.Port, LogFile: o.LogFile}
	w.Started = time.Since(start)
	ok = true
	return w, nil
}

// oneAtATime serves one request at a time: a request waits until the one
// before it has been answered in full. go-ftw reads only the status line
// and headers of a stage's response before it sends its end marker, and
// without hold_headers_until_inspected the headers leave after phase 3,
// while phase 4 still reads the body: the marker could then be logged
// before the stage's response rules (RESPONSE-95x), which go-ftw would not
// see. go-ftw sends one request at a time, so this orders the log lines
// without slowing the suite.
func oneAtATime(h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Critical returns how many critical lines the plugin or the host logged
// (plugin start failures, VM traps), and the last one.
func (w *WasmHost) Critical() (int64, string) {
	last, _ := w.lastCrit.Load().(string)
	return w.critical.Load(), last
}

// Close stops serving and releases the VMs.
func (w *WasmHost) Close() {
	if w.srv != nil {
		w.srv.Close()
	}
	if w.pool != nil {
		w.pool.Close()
	}
	if w.mod != nil {
		w.mod.Close(context.Background())
	}
	w.log.Close()
}

// Precompile compiles the plugin into wazero's on-disk cache, so that
// several worker processes started next load it instead of each compiling
// it (about a minute of CPU on a small machine).
func Precompile(ctx context.Context, wasm []byte, cacheDir string) error {
	if cacheDir == "off" {
		return nil
	}
	m, err := wasmhost.Compile(ctx, wasm, wasmhost.Options{CacheDir: cacheDir, Concurrency: 1})
	if err != nil {
		return fmt.Errorf("compiling the plugin: %w", err)
	}
	return m.Close(ctx)
}
