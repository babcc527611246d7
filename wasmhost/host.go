package wasmhost

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// LogLevel is a proxy-wasm log level (proxy_log's first argument).
type LogLevel uint32

// Log levels, in the order of the proxy-wasm ABI.
const (
	LevelTrace LogLevel = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
	LevelCritical
)

var levelNames = [...]string{"trace", "debug", "info", "warn", "error", "critical"}

// String returns the spdlog name of the level ("info", "warn", ...).
func (l LogLevel) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", uint32(l))
}

// ParseLogLevel parses a level name as String writes it.
func ParseLogLevel(s string) (LogLevel, error) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return LogLevel(i), nil
		}
	}
	return 0, fmt.Errorf("log level %q: want one of %s", s, strings.Join(levelNames[:], ", "))
}

// LogEntry is one log line written by a plugin (proxy_log, or WASI fd_write
// to fd 1/2) or by the host about a plugin (VM failures).
type LogEntry struct {
	Time       time.Time
	Level      LogLevel
	PluginName string
	RootID     string
	VMID       string
	VM         string // the VM instance name, for example "waf-0"
	ContextID  uint32
	// Stream is true when the message came from a stream context, which
	// makes Envoy add the plugin name to the prefix.
	Stream  bool
	Message string
}

// Line renders the entry the way Envoy's Context::log does, without the
// spdlog header: "wasm log <plugin name> <root_id> <vm_id>: <message>" for
// stream contexts and "wasm log <root_id> <vm_id>: <message>" for root and
// VM contexts, leaving out each empty part.
func (e LogEntry) Line() string {
	var b strings.Builder
	b.WriteString("wasm log")
	if e.Stream && e.PluginName != "" {
		b.WriteString(" " + e.PluginName)
	}
	if e.RootID != "" {
		b.WriteString(" " + e.RootID)
	}
	if e.VMID != "" {
		b.WriteString(" " + e.VMID)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// HostOptions configures a Host.
type HostOptions struct {
	// Log receives log lines at or above LogLevel, in Envoy's shape
	// "[time][thread][level][wasm] wasm log ...". Nil discards them.
	Log io.Writer
	// LogLevel is the least level written to Log; the default is info,
	// Envoy's default level for the wasm logger.
	LogLevel LogLevel
	// StatsTags are applied to custom metric names when rendering
	// Prometheus text; nil means DefaultStatsTags.
	StatsTags []StatsTag
}

// Host is the process-wide state that Envoy shares between all VMs: shared
// data and queues (per vm_id), metrics and the log sink.
//
// # Notes
//
// A Host is safe for concurrent use. Shared data and metrics outlive VM
// reloads, like Envoy's process-wide SharedData and stats store.
type Host struct {
	logMu    sync.Mutex
	logOut   io.Writer
	logLevel LogLevel
	sinks    []func(LogEntry)

	sharedMu sync.Mutex
	shared   map[string]map[string]*sharedEntry
	casNext  uint32

	queueMu     sync.Mutex
	queues      []*sharedQueue
	queueByName map[[2]string]uint32

	metrics metricStore
	tags    []StatsTag
}

type sharedEntry struct {
	value []byte
	cas   uint32
}

type sharedQueue struct {
	vmID, name string
	items      [][]byte
	target     *VM
	rootID     uint32
}

// NewHost returns an empty Host.
func NewHost(opts HostOptions) *Host {
	h := &Host{
		logOut:      opts.Log,
		logLevel:    opts.LogLevel,
		shared:      map[string]map[string]*sharedEntry{},
		casNext:     1,
		queueByName: map[[2]string]uint32{},
		tags:        opts.StatsTags,
	}
	if opts.LogLevel == 0 && opts.Log != nil {
		h.logLevel = LevelInfo
	}
	if h.tags == nil {
		h.tags = DefaultStatsTags()
	}
	h.metrics.init()
	return h
}

// AddLogSink registers f to receive every log entry of every level, in the
// order written. f runs on the VM's goroutine and must not call into a VM.
func (h *Host) AddLogSink(f func(LogEntry)) {
	h.logMu.Lock()
	h.sinks = append(h.sinks, f)
	h.logMu.Unlock()
}

// SetLogLevel changes the least level written to the log writer.
func (h *Host) SetLogLevel(l LogLevel) {
	h.logMu.Lock()
	h.logLevel = l
	h.logMu.Unlock()
}

func (h *Host) log(e LogEntry) {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	for _, f := range h.sinks {
		f(e)
	}
	if h.logOut == nil || e.Level < h.logLevel {
		return
	}
	// Envoy's default log format: [%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v.
	fmt.Fprintf(h.logOut, "[%s][%s][%s][wasm] [wasmhost] %s\n",
		e.Time.UTC().Format("2006-01-02 15:04:05.000"), e.VM, e.Level, e.Line())
}

// GetSharedData reads a shared-data entry the way proxy_get_shared_data does.
func (h *Host) GetSharedData(vmID, key string) (value []byte, cas uint32, ok bool) {
	h.sharedMu.Lock()
	defer h.sharedMu.Unlock()
	e, ok := h.shared[vmID][key]
	if !ok {
		return nil, 0, false
	}
	return append([]byte(nil), e.value...), e.cas, true
}

// SetSharedData writes a shared-data entry with the semantics of
// proxy-wasm-cpp-host src/shared_data.cc (SharedData::set): cas 0 writes
// unconditionally, a cas that differs from the entry's gives CasMismatch,
// and a missing key is written whatever the cas. Each write takes a new cas
// from one process-wide counter that starts at 1 and skips 0.
func (h *Host) SetSharedData(vmID, key string, value []byte, cas uint32) Status {
	h.sharedMu.Lock()
	defer h.sharedMu.Unlock()
	m := h.shared[vmID]
	if m == nil {
		m = map[string]*sharedEntry{}
		h.shared[vmID] = m
	}
	e, ok := m[key]
	if ok && cas != 0 && cas != e.cas {
		return StatusCasMismatch
	}
	if !ok {
		e = &sharedEntry{}
		m[key] = e
	}
	e.value = append(e.value[:0], value...)
	e.cas = h.casNext
	h.casNext++
	if h.casNext == 0 {
		h.casNext = 1
	}
	return StatusOK
}

// registerQueue creates or opens the queue (vmID, name) and makes vm's root
// context its only receiver (cpp-host SharedQueue::registerQueue overwrites
// the target on each call).
func (h *Host) registerQueue(vmID, name string, vm *VM, rootID uint32) uint32 {
	h.queueMu.Lock()
	defer h.queueMu.Unlock()
	k := [2]string{vmID, name}
	id, ok := h.queueByName[k]
	if !ok {
		h.queues = append(h.queues, &sharedQueue{vmID: vmID, name: name})
		id = uint32(len(h.queues))
		h.queueByName[k] = id
	}
	q := h.queues[id-1]
	q.target, q.rootID = vm, rootID
	return id
}

func (h *Host) resolveQueue(vmID, name string) (uint32, bool) {
	h.queueMu.Lock()
	defer h.queueMu.Unlock()
	id, ok := h.queueByName[[2]string{vmID, name}]
	return id, ok
}

func (h *Host) enqueue(id uint32, data []byte) Status {
	h.queueMu.Lock()
	if id == 0 || int(id) > len(h.queues) {
		h.queueMu.Unlock()
		return StatusNotFound
	}
	q := h.queues[id-1]
	q.items = append(q.items, append([]byte(nil), data...))
	target, root := q.target, q.rootID
	h.queueMu.Unlock()
	if target != nil {
		// cpp-host posts onQueueReady to the registrant's dispatcher: it
		// runs later, never inside the enqueue call.
		go target.queueReady(root, id)
	}
	return StatusOK
}

func (h *Host) dequeue(id uint32) ([]byte, Status) {
	h.queueMu.Lock()
	defer h.queueMu.Unlock()
	if id == 0 || int(id) > len(h.queues) {
		return nil, StatusNotFound
	}
	q := h.queues[id-1]
	if len(q.items) == 0 {
		return nil, StatusEmpty
	}
	v := q.items[0]
	q.items = q.items[1:]
	return v, StatusOK
}
