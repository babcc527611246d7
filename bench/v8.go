package bench

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wafguard/wafguard/v8host"
)

// ServeV8 serves the plugin on V8 (v8host: Node 26 with Envoy's flags, one
// VM) as a reverse proxy to upstream on listen, until ctx ends: the
// wasm-crs-v8 server. The HTTP front runs inside the Node process, beside
// the VM (v8host.VM.Serve), so that what it measures is the plugin and
// Node's HTTP handling, not a hop between processes. It listens only once
// the VM has started. The VM's log lines go to stderr (the server's log
// file in the bench) once a second.
func ServeV8(ctx context.Context, listen, upstream, wasm string, config []byte) error {
	e, err := v8host.Start(v8host.Options{Wasm: wasm, Stderr: os.Stderr})
	if err != nil {
		return err
	}
	defer e.Close()
	vm, err := e.NewVM(v8host.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: config})
	if err != nil {
		return err
	}
	if err := vm.Serve(listen, upstream); err != nil {
		return err
	}
	// The VM keeps its log lines until asked for them: a server that runs
	// for minutes hands them on, as Envoy writes its log, so that they do
	// not pile up in the Node process (a blocked attack logs a line per
	// matched rule).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = drainLogs(vm, os.Stderr)
			return nil
		case <-tick.C:
			if err := drainLogs(vm, os.Stderr); err != nil {
				return err
			}
		}
	}
}

// logSource is what drainLogs reads: a VM's log lines since the last call.
type logSource interface {
	Logs() ([]string, error)
}

// drainLogs writes the lines src holds to w, one a line, in one write.
func drainLogs(src logSource, w io.Writer) error {
	lines, err := src.Logs()
	if err != nil || len(lines) == 0 {
		return err
	}
	_, err = io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}
