package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// EnvoyVersion selects which Envoy release's host the module sees. It only
// changes the WASI functions (notes 8.2): which exist, what poll_oneoff
// returns and which may run during _initialize and allocation.
type EnvoyVersion string

// Supported Envoy versions.
const (
	// Envoy139 is proxy-wasm-cpp-host with PR #533 (Envoy 1.39 and later):
	// the full WASI set used by Go, poll_oneoff succeeds with 0 events.
	Envoy139 EnvoyVersion = "1.39"
	// Envoy133 is proxy-wasm-cpp-host with PR #427 only (Envoy 1.33 to
	// 1.38): poll_oneoff returns ENOSYS (52) and file APIs are missing.
	Envoy133 EnvoyVersion = "1.33"
)

// ParseEnvoyVersion accepts "1.33" to "1.38" (the #427 host) and "1.39" or
// later (the #533 host).
func ParseEnvoyVersion(s string) (EnvoyVersion, error) {
	var major, minor int
	if _, err := fmt.Sscanf(s, "%d.%d", &major, &minor); err != nil || major != 1 || minor < 33 {
		return "", fmt.Errorf("envoy version %q: want 1.33 to 1.38 (cpp-host #427) or 1.39 and later (cpp-host #533)", s)
	}
	if minor >= 39 {
		return Envoy139, nil
	}
	return Envoy133, nil
}

// Options configures Compile. The zero value is usable.
type Options struct {
	// Envoy selects the host profile; the default is Envoy139.
	Envoy EnvoyVersion
	// CacheDir holds wazero's compilation cache, so that a restart does not
	// compile the module again. Empty means DefaultCacheDir(); "off" turns
	// the on-disk cache off.
	CacheDir string
	// Host holds shared data, metrics and logs; nil makes a new one that
	// logs nowhere.
	Host *Host
	// BufferLimit is the per-stream body buffer limit, Envoy's listener
	// per_connection_buffer_limit_bytes; 0 means 1 MiB.
	BufferLimit int
	// StreamIdleTimeout bounds how long Exchange waits for a paused stream
	// to be resumed (Envoy's HCM stream_idle_timeout, default 5 min); 0
	// means 30 s.
	StreamIdleTimeout time.Duration
	// Concurrency is the number of VMs NewPool starts (Envoy's
	// --concurrency); 0 means runtime.NumCPU().
	Concurrency int
}

// DefaultCacheDir is the on-disk compilation cache used when
// Options.CacheDir is empty: "wafguard/wazero" under os.UserCacheDir, or
// under the temporary directory when there is no user cache directory.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "wafguard", "wazero")
}

// Module is a compiled plugin, ready to start VMs. It owns a wazero runtime
// with the proxy-wasm and WASI host modules of one Envoy profile.
type Module struct {
	opts     Options
	host     *Host
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	cache    wazero.CompilationCache
	funcs    map[string]*hostFunc // "module.name"
	seq      atomic.Uint32

	// CompileTime is how long Compile took (compilation or cache load).
	CompileTime time.Duration
}

// Compile compiles the plugin's .wasm bytes and checks its imports against
// the selected Envoy profile. A missing or mistyped import fails with
// Envoy's message, "Failed to load Wasm module due to a missing import:
// <module>.<name>" (proxy-wasm-cpp-host src/v8/v8.cc, link).
func Compile(ctx context.Context, wasm []byte, opts Options) (*Module, error) {
	start := time.Now()
	if opts.Envoy == "" {
		opts.Envoy = Envoy139
	}
	if opts.Envoy != Envoy139 && opts.Envoy != Envoy133 {
		return nil, fmt.Errorf("envoy version %q: want %q or %q", opts.Envoy, Envoy133, Envoy139)
	}
	if opts.Host == nil {
		opts.Host = NewHost(HostOptions{})
	}
	if opts.BufferLimit <= 0 {
		opts.BufferLimit = 1 << 20
	}
	if opts.StreamIdleTimeout <= 0 {
		opts.StreamIdleTimeout = 30 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = runtime.NumCPU()
	}
	m := &Module{opts: opts, host: opts.Host, funcs: map[string]*hostFunc{}}
	// 16384 pages = 1 GiB, V8's --wasm_max_mem_pages default in Envoy
	// (cpp-host include/proxy-wasm/limits.h).
	cfg := wazero.NewRuntimeConfig().WithMemoryLimitPages(16384)
	if opts.CacheDir != "off" {
		dir := opts.CacheDir
		if dir == "" {
			dir = DefaultCacheDir()
		}
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %q: %w (pass another directory, or \"off\")", dir, err)
		}
		m.cache = cache
		cfg = cfg.WithCompilationCache(cache)
	}
	m.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := m.instantiateHostModules(ctx); err != nil {
		m.Close(ctx)
		return nil, err
	}
	compiled, err := m.rt.CompileModule(ctx, wasm)
	if err != nil {
		m.Close(ctx)
		return nil, fmt.Errorf("compiling wasm module: %w", err)
	}
	m.compiled = compiled
	if err := m.checkImports(); err != nil {
		m.Close(ctx)
		return nil, err
	}
	if err := checkExports(compiled); err != nil {
		m.Close(ctx)
		return nil, err
	}
	m.CompileTime = time.Since(start)
	return m, nil
}

// Host returns the process-wide state the module's VMs use.
func (m *Module) Host() *Host { return m.host }

// Options returns the options in effect, defaults applied.
func (m *Module) Options() Options { return m.opts }

// Imports returns the module's function imports as "module.name".
func (m *Module) Imports() []string {
	var out []string
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		out = append(out, mod+"."+name)
	}
	return out
}

// Close releases the runtime and every VM made from the module.
func (m *Module) Close(ctx context.Context) error {
	err := m.rt.Close(ctx)
	if m.cache != nil {
		err = errors.Join(err, m.cache.Close(ctx))
	}
	return err
}

func (m *Module) checkImports() error {
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		hf, ok := m.funcs[mod+"."+name]
		if !ok || !sameTypes(hf.params, f.ParamTypes()) || !sameTypes(hf.results, f.ResultTypes()) {
			return fmt.Errorf("Failed to load Wasm module due to a missing import: %s.%s", mod, name) //nolint:staticcheck // Envoy's message
		}
	}
	for _, mem := range m.compiled.ImportedMemories() {
		mod, name, _ := mem.Import()
		return fmt.Errorf("Failed to load Wasm module due to a missing import: %s.%s", mod, name) //nolint:staticcheck // Envoy's message
	}
	return nil
}

func checkExports(c wazero.CompiledModule) error {
	ex := c.ExportedFunctions()
	for _, v := range []string{"proxy_abi_version_0_2_0", "proxy_abi_version_0_2_1", "proxy_abi_version_0_1_0"} {
		if _, ok := ex[v]; ok {
			if _, ok := c.ExportedMemories()["memory"]; !ok {
				return errors.New("wasm module exports no memory named \"memory\"; build it with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared")
			}
			if _, ok := ex["proxy_on_memory_allocate"]; !ok {
				if _, ok := ex["malloc"]; !ok {
					return errors.New("wasm module exports neither proxy_on_memory_allocate nor malloc; want a proxy-wasm plugin built with the proxy-wasm Go SDK")
				}
			}
			return nil
		}
	}
	return errors.New("wasm module exports no proxy_abi_version_* function; build it with the proxy-wasm Go SDK")
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hostFunc is one host function: its module-independent behaviour and the
// phases in which the host lets it run.
type hostFunc struct {
	module  string // "env" or "wasi" (registered as wasi_snapshot_preview1 and wasi_unstable)
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      func(vm *VM, stack []uint64)
	// inInit and inAlloc say whether the function may run during
	// _initialize and during the allocator (notes 1.4).
	inInit, inAlloc bool
}

func (m *Module) instantiateHostModules(ctx context.Context) error {
	env := m.rt.NewHostModuleBuilder("env")
	for _, hf := range m.envFuncs() {
		m.funcs["env."+hf.name] = hf
		env.NewFunctionBuilder().WithGoModuleFunction(m.wrap(hf), hf.params, hf.results).Export(hf.name)
	}
	if _, err := env.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiating host module env: %w", err)
	}
	for _, mod := range []string{"wasi_snapshot_preview1", "wasi_unstable"} {
		b := m.rt.NewHostModuleBuilder(mod)
		for _, hf := range m.wasiFuncs() {
			m.funcs[mod+"."+hf.name] = hf
			b.NewFunctionBuilder().WithGoModuleFunction(m.wrap(hf), hf.params, hf.results).Export(hf.name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("instantiating host module %s: %w", mod, err)
		}
	}
	return nil
}

type vmKey struct{}

// restrictedError is the trap raised by a host call outside the allowed
// set while the VM is restricted (cpp-host: V8 "restricted_callback").
type restrictedError struct {
	name, phase string
}

func (e *restrictedError) Error() string {
	return fmt.Sprintf("restricted_callback: %s called during %s", e.name, e.phase)
}

func (m *Module) wrap(hf *hostFunc) api.GoModuleFunc {
	fn, name := hf.fn, hf.name
	inInit, inAlloc := hf.inInit, hf.inAlloc
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		vm, _ := ctx.Value(vmKey{}).(*VM)
		if vm == nil {
			panic(fmt.Errorf("host function %s called without a VM", name))
		}
		switch vm.phase {
		case phaseInit:
			if !inInit {
				panic(&restrictedError{name: name, phase: "_initialize"})
			}
		case phaseAlloc:
			if !inAlloc {
				panic(&restrictedError{name: name, phase: "memory allocation"})
			}
		}
		fn(vm, stack)
	}
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func sig(n int) []api.ValueType {
	s := make([]api.ValueType, n)
	for i := range s {
		s[i] = i32
	}
	return s
}
