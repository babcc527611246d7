package perf

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// depthMeter counts the wasm call frames of the plugin: wazero calls it
// before and after every function of the module.
type depthMeter struct {
	depth, max int
	stack      []string // the functions called and not returned, outermost first
	// deepest are the functions on the stack when max was reached, the
	// innermost first.
	deepest []string
}

func (d *depthMeter) NewFunctionListener(api.FunctionDefinition) experimental.FunctionListener {
	return d
}

func (d *depthMeter) Before(_ context.Context, _ api.Module, def api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	d.depth++
	d.stack = append(d.stack, def.DebugName())
	if d.depth <= d.max {
		return
	}
	d.max = d.depth
	d.deepest = d.deepest[:0]
	for i := len(d.stack) - 1; i >= 0; i-- {
		d.deepest = append(d.deepest, d.stack[i])
	}
}

func (d *depthMeter) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {
	d.depth--
	d.stack = d.stack[:len(d.stack)-1]
}

func (d *depthMeter) Abort(context.Context, api.Module, api.FunctionDefinition, error) {
	d.depth--
	d.stack = d.stack[:len(d.stack)-1]
}

// reset starts a new measurement.
func (d *depthMeter) reset() { d.max, d.deepest = d.depth, nil }

// where summarises the deepest stack: its innermost frames and how many
// frames each function takes in it.
func (d *depthMeter) where() string {
	count := map[string]int{}
	for _, f := range d.deepest {
		count[f]++
	}
	var top []string
	for f, n := range count {
		if n >= 8 {
			top = append(top, fmt.Sprintf("%s x%d", f, n))
		}
	}
	inner := d.deepest[:min(6, len(d.deepest))]
	return "innermost: " + strings.Join(inner, " < ") + "; repeated: " + strings.Join(top, ", ")
}

// Stack depth bounds: the deepest wasm call stack of the plugin with the
// CRS, in frames, at the VM start and per request (TestStackDepth). The
// measured depths are in docs/deployment.md ("Wasm runtimes"); a change
// that deepens the stack past these fails the test, and is worth knowing
// of: runtimes with a fixed wasm stack (WAMR in proxy-wasm-cpp-host)
// overflow past theirs.
const (
	maxStartFrames   = 96
	maxRequestFrames = 96
)

// TestStackDepth measures the deepest wasm call stack the plugin reaches
// on wazero (frames; wazero grows its stack, so nothing fails there) at
// the VM start with the CRS and over the bench's pool, and holds them
// under the bounds above.
func TestStackDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the module with function listeners: about a minute")
	}
	d := &depthMeter{}
	ctx := experimental.WithFunctionListenerFactory(context.Background(), d)
	m, err := wasmhost.Compile(ctx, plugintest.Read(t), wasmhost.Options{Concurrency: 1, CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	vm, err := m.NewVM(ctx, wasmhost.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(crsConfig())})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	start := d.max
	if d.depth != 0 {
		t.Fatalf("%d calls still open after the VM start: the meter lost calls", d.depth)
	}
	if f := os.Getenv("PERF_STACK_DUMP"); f != "" {
		// The deepest stack of the start, one function a line, the
		// innermost first.
		if err := os.WriteFile(f, []byte(strings.Join(d.deepest, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("VM start with the CRS: %d frames deep (%s)", start, d.where())
	if start > maxStartFrames {
		t.Errorf("the VM start reaches %d wasm frames, over the bound of %d", start, maxStartFrames)
	}
	pool, err := benchreq.DefaultPool()
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range benchreq.PoolClasses {
		d.reset()
		for _, r := range benchreq.Select(pool, class) {
			if got := vm.Exchange(ctx, wasmRequest(r), upstream).Status; got != r.WantStatus {
				t.Fatalf("%s %s: status %d, want %d", r.Method, r.Path, got, r.WantStatus)
			}
		}
		t.Logf("%s: %d frames deep (%s)", class, d.max, d.where())
		if d.max > maxRequestFrames {
			t.Errorf("%s requests reach %d wasm frames, over the bound of %d", class, d.max, maxRequestFrames)
		}
	}
}
