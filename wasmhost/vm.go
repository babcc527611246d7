package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// FailurePolicy is what happens to streams once a VM has trapped, like
// Envoy's PluginConfig.failure_policy (notes 1.5).
type FailurePolicy int

// Failure policies.
const (
	// FailClosed answers 503 (details wasm_fail_stream) to the streams of a
	// failed VM, in flight and new. It is Envoy's FAIL_CLOSED and what
	// UNSPECIFIED does in the code read for the notes.
	FailClosed FailurePolicy = iota
	// FailOpen lets traffic bypass the plugin once its VM has failed.
	FailOpen
	// FailReload rebuilds the VM for a new stream once the reload backoff
	// has passed since the last load; inside the window it acts as FailClosed.
	FailReload
)

// ParseFailurePolicy parses fail_closed, fail_open or fail_reload.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch strings.ToLower(s) {
	case "fail_closed", "":
		return FailClosed, nil
	case "fail_open":
		return FailOpen, nil
	case "fail_reload":
		return FailReload, nil
	}
	return 0, fmt.Errorf("failure policy %q: want fail_closed, fail_open or fail_reload", s)
}

// String returns the flag spelling of the policy.
func (p FailurePolicy) String() string {
	switch p {
	case FailOpen:
		return "fail_open"
	case FailReload:
		return "fail_reload"
	}
	return "fail_closed"
}

// PluginConfig is one plugin on one VM: the fields of Envoy's
// envoy.extensions.wasm.v3.PluginConfig and VmConfig that the host uses.
type PluginConfig struct {
	Name   string // plugin name (property plugin_name)
	RootID string // root_id (property plugin_root_id)
	VMID   string // vm_id: the shared-data namespace (property plugin_vm_id)
	// Configuration is the plugin configuration, read by the plugin with
	// proxy_get_buffer_bytes(7) during proxy_on_configure.
	Configuration []byte
	// VMConfiguration is vm_config.configuration (buffer type 6).
	VMConfiguration []byte
	// Env is vm_config.environment_variables, given to WASI environ_get.
	Env [][2]string
	// FailurePolicy applies once the VM traps.
	FailurePolicy FailurePolicy
	// ReloadBackoff is reload_config.backoff.base_interval; 0 means 1 s.
	ReloadBackoff time.Duration
	// AllowOnHeadersStopIteration models allow_on_headers_stop_iteration
	// (Envoy 1.35+): a pause on headers holds only the headers, and body
	// callbacks keep coming.
	AllowOnHeadersStopIteration bool
	// ManualTicks turns off the tick timer; the caller runs VM.Tick.
	ManualTicks bool
	// LogSink, when set, receives this VM's log entries (every level).
	LogSink func(LogEntry)
	// Host, when set, replaces the module's Host for this VM: its own
	// shared data, metrics and log writer (tests use it for isolation).
	Host *Host
	// TrapOn, when set, is asked before each guest callback with the
	// export's name (for example "proxy_on_request_body"); true makes that
	// call trap instead of running, exactly as if the guest had hit
	// unreachable there. Fault tests use it to trap the real plugin in any
	// callback. It runs with the VM locked and must not call into the VM.
	TrapOn func(export string) bool
}

// errInjectedTrap is the trap PluginConfig.TrapOn asks for.
var errInjectedTrap = errors.New("wasm error: unreachable (injected by PluginConfig.TrapOn)")

type phase int

const (
	phaseNormal phase = iota
	phaseInit
	phaseAlloc
)

// Guest exports, cached at instantiation.
const (
	fnAlloc = iota
	fnInitialize
	fnStart
	fnContextCreate
	fnVMStart
	fnConfigure
	fnTick
	fnQueueReady
	fnDone
	fnLog
	fnDelete
	fnRequestHeaders
	fnRequestBody
	fnRequestTrailers
	fnResponseHeaders
	fnResponseBody
	fnResponseTrailers
	fnHTTPCallResponse
	numExports
)

var exportNames = [numExports]string{
	"proxy_on_memory_allocate", "_initialize", "_start", "proxy_on_context_create", "proxy_on_vm_start",
	"proxy_on_configure", "proxy_on_tick", "proxy_on_queue_ready", "proxy_on_done", "proxy_on_log",
	"proxy_on_delete", "proxy_on_request_headers", "proxy_on_request_body", "proxy_on_request_trailers",
	"proxy_on_response_headers", "proxy_on_response_body", "proxy_on_response_trailers",
	"proxy_on_http_call_response",
}

// VM is one instance of the module, like one of Envoy's thread-local VMs,
// with one root context for its plugin.
//
// # Notes
//
// Every method locks the VM, so calls from several goroutines are
// serialised; a VM runs one callback at a time, as on an Envoy worker.
// Streams of one VM may interleave between callbacks.
type VM struct {
	m    *Module
	host *Host
	cfg  PluginConfig
	base string

	mu       sync.Mutex
	ctx      context.Context
	inst     api.Module
	mem      api.Memory
	fns      [numExports]api.Function
	stk      []uint64
	allocStk []uint64

	name     string
	gen      uint32
	failed   bool
	failErr  error
	loadedAt time.Time
	closed   bool

	rootID  uint32
	nextID  uint32
	streams map[uint32]*Stream

	phase          phase
	cur, eff       uint32
	configReadable bool
	pending        []func()
	flushing       bool

	tickPeriod time.Duration
	tickTimer  *time.Timer

	starting  bool
	startLogs []string

	// StartTime is how long the last start-up sequence took.
	StartTime time.Duration
}

// NewVM instantiates the module and runs Envoy's start-up sequence for one
// plugin: _initialize (restricted), proxy_on_context_create(root, 0),
// proxy_on_vm_start, proxy_on_configure (cpp-host WasmBase::initialize,
// ContextBase::onStart, onConfigure). When the plugin refuses to start, the
// error holds its critical log lines.
func (m *Module) NewVM(ctx context.Context, cfg PluginConfig) (*VM, error) {
	if cfg.ReloadBackoff <= 0 {
		cfg.ReloadBackoff = time.Second
	}
	base := cfg.Name
	if base == "" {
		base = "vm"
	}
	host := m.host
	if cfg.Host != nil {
		host = cfg.Host
	}
	vm := &VM{m: m, host: host, cfg: cfg, base: base, stk: make([]uint64, 8), allocStk: make([]uint64, 2)}
	vm.ctx = context.WithValue(context.WithoutCancel(ctx), vmKey{}, vm)
	vm.ctx = experimental.WithMemoryAllocator(vm.ctx, experimental.MemoryAllocatorFunc(newLinearMemory))
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if err := vm.load(); err != nil {
		vm.closeInstance()
		return nil, err
	}
	return vm, nil
}

// Name returns the instance name, unique in the module ("<name>-<n>").
func (vm *VM) Name() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.name
}

// Config returns the plugin configuration the VM runs.
func (vm *VM) Config() PluginConfig { return vm.cfg }

// Host returns the process-wide state.
func (vm *VM) Host() *Host { return vm.host }

// Failed reports whether the VM has trapped and not been reloaded.
func (vm *VM) Failed() bool {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.failed
}

// MemorySize returns the size in bytes of the VM's linear memory. It never
// shrinks (wasm memory only grows), so it is the VM's peak.
func (vm *VM) MemorySize() uint64 {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.mem == nil {
		return 0
	}
	return uint64(vm.mem.Size())
}

// Generation counts the VM's loads: 1 after NewVM, +1 per reload.
func (vm *VM) Generation() uint32 {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.gen
}

// RootID returns the root context id (1 on every load).
func (vm *VM) RootID() uint32 { return 1 }

// Close stops the VM's timer and releases its instance. It does not run
// the root context's shutdown callbacks.
func (vm *VM) Close() {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.closed = true
	vm.closeInstance()
}

func (vm *VM) closeInstance() {
	if vm.tickTimer != nil {
		vm.tickTimer.Stop()
		vm.tickTimer = nil
	}
	vm.tickPeriod = 0
	if vm.inst != nil {
		_ = vm.inst.Close(context.Background())
		vm.inst = nil
	}
}

// load makes a fresh instance and runs the start-up sequence. Callers hold vm.mu.
func (vm *VM) load() error {
	start := time.Now()
	vm.closeInstance()
	vm.gen++
	vm.name = fmt.Sprintf("%s-%d", vm.base, vm.m.seq.Add(1)-1)
	vm.failed, vm.failErr = false, nil
	vm.loadedAt = start
	vm.streams = map[uint32]*Stream{}
	vm.pending = nil
	vm.rootID, vm.nextID = 1, 2
	vm.starting, vm.startLogs = true, nil
	defer func() { vm.starting = false; vm.StartTime = time.Since(start) }()

	inst, err := vm.m.rt.InstantiateModule(vm.ctx, vm.m.compiled,
		wazero.NewModuleConfig().WithName(vm.name).WithStartFunctions())
	if err != nil {
		vm.failed = true
		return fmt.Errorf("instantiating plugin %q as %q: %w", vm.cfg.Name, vm.name, err)
	}
	vm.inst = inst
	vm.mem = inst.ExportedMemory("memory")
	for i, n := range exportNames {
		vm.fns[i] = inst.ExportedFunction(n)
	}
	// cpp-host WasmBase::getFunctions prefers malloc over
	// proxy_on_memory_allocate; Go only exports the latter.
	if f := inst.ExportedFunction("malloc"); f != nil {
		vm.fns[fnAlloc] = f
	}

	// Step 1: _initialize, or _start when there is no _initialize
	// (cpp-host WasmBase::startVm), restricted to the allowlist of notes 1.4.
	initFn := fnInitialize
	if vm.fns[fnInitialize] == nil {
		initFn = fnStart
	}
	if vm.fns[initFn] != nil {
		vm.phase = phaseInit
		_, ok := vm.call(initFn, 0)
		vm.phase = phaseNormal
		if !ok {
			return vm.startError(exportNames[initFn] + " failed: " + trapMessage(vm.failErr))
		}
	}
	root := uint64(vm.rootID)
	vm.configReadable = true
	if _, ok := vm.call(fnContextCreate, vm.rootID, root, 0); !ok {
		return vm.startError("proxy_on_context_create failed: " + trapMessage(vm.failErr))
	}
	vm.configReadable = false
	r, ok := vm.call(fnVMStart, vm.rootID, root, uint64(len(vm.cfg.VMConfiguration)))
	if !ok {
		return vm.startError("proxy_on_vm_start failed: " + trapMessage(vm.failErr))
	}
	if uint32(r) == 0 {
		vm.failed = true
		return vm.startError("proxy_on_vm_start returned 0")
	}
	vm.configReadable = true
	r, ok = vm.call(fnConfigure, vm.rootID, root, uint64(len(vm.cfg.Configuration)))
	vm.configReadable = false
	if !ok {
		return vm.startError("proxy_on_configure failed: " + trapMessage(vm.failErr))
	}
	if uint32(r) == 0 {
		vm.failed = true
		return vm.startError("proxy_on_configure returned 0")
	}
	vm.flush()
	return nil
}

func (vm *VM) startError(what string) error {
	msg := fmt.Sprintf("plugin %q (root_id %q, vm %s) failed to start: %s", vm.cfg.Name, vm.cfg.RootID, vm.name, what)
	if len(vm.startLogs) > 0 {
		msg += ": " + strings.Join(vm.startLogs, "; ")
	}
	return errors.New(msg)
}

// trapMessage renders a wazero call error the way V8 reports a trap in
// Envoy's log ("Uncaught RuntimeError: unreachable"), first line only.
func trapMessage(err error) string {
	if err == nil {
		return "unknown error"
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, "wasm error: ")
	return "Uncaught RuntimeError: " + s
}

// call runs one exported callback with ctxID as the current and effective
// context and returns its first result. A missing export is a no-op that
// returns 0. A trap marks the VM failed (cpp-host WasmBase::fail) and
// returns ok=false. Callers hold vm.mu.
func (vm *VM) call(fi int, ctxID uint32, args ...uint64) (uint64, bool) {
	if vm.failed || vm.inst == nil {
		return 0, false
	}
	f := vm.fns[fi]
	if f == nil {
		return 0, true
	}
	if vm.cfg.TrapOn != nil && vm.cfg.TrapOn(exportNames[fi]) {
		vm.fail(exportNames[fi], errInjectedTrap)
		return 0, false
	}
	copy(vm.stk, args)
	prevCur, prevEff := vm.cur, vm.eff
	vm.cur, vm.eff = ctxID, ctxID
	err := f.CallWithStack(vm.ctx, vm.stk)
	// The effective context lasts only until the callback returns
	// (cpp-host DeferAfterCallActions / ContextBase scope).
	vm.cur, vm.eff = prevCur, prevEff
	if err != nil {
		vm.fail(exportNames[fi], err)
		return 0, false
	}
	return vm.stk[0], true
}

func (vm *VM) fail(fn string, err error) {
	if vm.failed {
		return
	}
	vm.failed, vm.failErr = true, err
	if vm.tickTimer != nil {
		vm.tickTimer.Stop()
		vm.tickTimer = nil
	}
	vm.tickPeriod = 0
	vm.logAt(LevelError, 0, fmt.Sprintf("Function: %s failed: %s", fn, trapMessage(err)))
	var re *restrictedError
	if errors.As(err, &re) {
		vm.logAt(LevelError, 0, re.Error())
	}
}

// allocate runs the guest allocator for one host call. Like cpp-host
// WasmBase::allocMemory it runs in the VM context with the host restricted
// (notes 1.4, 9.10). A trap in the allocator is re-raised as a trap of the
// calling host function.
func (vm *VM) allocate(size uint32) uint32 {
	f := vm.fns[fnAlloc]
	savedPhase, savedEff := vm.phase, vm.eff
	vm.phase, vm.eff = phaseAlloc, 0
	vm.allocStk[0] = uint64(size)
	err := f.CallWithStack(vm.ctx, vm.allocStk)
	vm.phase, vm.eff = savedPhase, savedEff
	if err != nil {
		panic(fmt.Errorf("%s: %w", exportNames[fnAlloc], err))
	}
	return uint32(vm.allocStk[0])
}

// deferAction queues an after-VM-call action (cpp-host
// addAfterVmCallAction): it runs once the outermost callback has returned.
func (vm *VM) deferAction(f func()) { vm.pending = append(vm.pending, f) }

// flush runs the queued actions; actions queued by callbacks that an action
// triggers run after it, in order.
func (vm *VM) flush() {
	if vm.flushing {
		return
	}
	vm.flushing = true
	for len(vm.pending) > 0 {
		f := vm.pending[0]
		vm.pending = vm.pending[1:]
		f()
	}
	vm.flushing = false
}

// reloadIfDue rebuilds a failed VM under FailReload once the backoff has
// passed since the last load (Envoy PluginConfig::maybeReloadHandleIfNeeded).
// Shared data and metrics live in the Host and are kept.
func (vm *VM) reloadIfDue() {
	if !vm.failed || vm.closed || vm.cfg.FailurePolicy != FailReload {
		return
	}
	if time.Since(vm.loadedAt) < vm.cfg.ReloadBackoff {
		return
	}
	if err := vm.load(); err != nil {
		vm.failed = true
		vm.logAt(LevelError, 0, "reloading the wasm VM failed: "+err.Error())
		return
	}
	vm.logAt(LevelInfo, 0, fmt.Sprintf("wasm VM reloaded as %s", vm.name))
}

// Reload rebuilds the VM now, whatever its state and policy: a fresh
// instance and the full start-up sequence. Streams of the old instance are
// treated as failed.
func (vm *VM) Reload() error {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.load()
}

// Tick runs proxy_on_tick on the root context now, as the timer would.
func (vm *VM) Tick() {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.failed || vm.closed {
		return
	}
	vm.call(fnTick, vm.rootID, uint64(vm.rootID))
	vm.flush()
}

// TickPeriod returns the period the plugin set with
// proxy_set_tick_period_milliseconds (0: no timer).
func (vm *VM) TickPeriod() time.Duration {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.tickPeriod
}

// setTickPeriod arms the root context's timer (Envoy Wasm::setTimerPeriod):
// one timer per root context, replaced on each call, 0 disables it.
func (vm *VM) setTickPeriod(d time.Duration) {
	if vm.tickTimer != nil {
		vm.tickTimer.Stop()
		vm.tickTimer = nil
	}
	vm.tickPeriod = d
	if d > 0 && !vm.cfg.ManualTicks {
		gen := vm.gen
		vm.tickTimer = time.AfterFunc(d, func() { vm.tickFired(gen) })
	}
}

// tickFired delivers one tick and re-arms the timer after the tick
// returns, so the period drifts by the tick's duration, as in Envoy's
// Wasm::tickHandler.
func (vm *VM) tickFired(gen uint32) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.closed || vm.failed || vm.gen != gen || vm.tickPeriod == 0 {
		return
	}
	vm.tickTimer = nil
	vm.call(fnTick, vm.rootID, uint64(vm.rootID))
	vm.flush()
	if !vm.failed && !vm.closed && vm.gen == gen && vm.tickPeriod > 0 && vm.tickTimer == nil {
		vm.tickTimer = time.AfterFunc(vm.tickPeriod, func() { vm.tickFired(gen) })
	}
}

func (vm *VM) queueReady(root, token uint32) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.closed || vm.failed {
		return
	}
	vm.call(fnQueueReady, root, uint64(root), uint64(token))
	vm.flush()
}

// logAt writes a log entry for the context ctxID.
func (vm *VM) logAt(level LogLevel, ctxID uint32, msg string) {
	e := LogEntry{Time: time.Now(), Level: level, PluginName: vm.cfg.Name, VM: vm.name, ContextID: ctxID, Message: msg}
	if ctxID != 0 {
		e.RootID, e.VMID = vm.cfg.RootID, vm.cfg.VMID
		e.Stream = ctxID != vm.rootID
	}
	if vm.starting && level == LevelCritical {
		vm.startLogs = append(vm.startLogs, msg)
	}
	if vm.cfg.LogSink != nil {
		vm.cfg.LogSink(e)
	}
	vm.host.log(e)
}

// stream returns the stream of the effective context, or nil for the root
// and VM contexts.
func (vm *VM) effStream() *Stream {
	if vm.eff == 0 || vm.eff == vm.rootID {
		return nil
	}
	return vm.streams[vm.eff]
}
