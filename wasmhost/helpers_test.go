package wasmhost

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	pluginMu    sync.Mutex
	pluginCache = map[string][]byte{}
	pluginDir   string
)

// buildPlugin builds wasmhost/testdata/<name> once per test binary with the
// same toolchain as the product.
func buildPlugin(t testing.TB, name string) []byte {
	t.Helper()
	pluginMu.Lock()
	defer pluginMu.Unlock()
	if b, ok := pluginCache[name]; ok {
		return b
	}
	if pluginDir == "" {
		d, err := os.MkdirTemp("", "wasmhost-plugins-")
		if err != nil {
			t.Fatal(err)
		}
		pluginDir = d
	}
	out := filepath.Join(pluginDir, name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building test plugin %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	pluginCache[name] = b
	return b
}

func testCacheDir() string { return filepath.Join(os.TempDir(), "wasmhost-test-cache") }

// compilePlugin compiles a test plugin for the Envoy profile.
func compilePlugin(t testing.TB, name string, opts Options) *Module {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = testCacheDir()
	}
	m, err := Compile(context.Background(), buildPlugin(t, name), opts)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// logRecorder collects log entries as "level: message".
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) sink(e LogEntry) {
	r.mu.Lock()
	r.lines = append(r.lines, e.Level.String()+": "+e.Message)
	r.mu.Unlock()
}

func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func (r *logRecorder) has(sub string) bool {
	for _, l := range r.all() {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

func newVM(t testing.TB, m *Module, cfg PluginConfig) (*VM, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	cfg.LogSink = rec.sink
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	vm, err := m.NewVM(context.Background(), cfg)
	if err != nil {
		t.Fatalf("starting VM: %v", err)
	}
	t.Cleanup(vm.Close)
	return vm, rec
}

func get(path string) [][2]string {
	return [][2]string{{":method", "GET"}, {":path", path}, {":authority", "localhost"}, {":scheme", "http"}}
}

func post(path string) [][2]string {
	return [][2]string{{":method", "POST"}, {":path", path}, {":authority", "localhost"}, {":scheme", "http"}}
}

// echo is an upstream that answers 200 with the request body, and records
// the request.
type echo struct {
	mu   sync.Mutex
	reqs []*UpstreamRequest
	resp *Response
}

func (e *echo) RoundTrip(_ context.Context, r *UpstreamRequest) (*Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = append(e.reqs, r)
	if e.resp != nil {
		return e.resp, nil
	}
	var body [][]byte
	if len(r.Body) > 0 {
		body = [][]byte{r.Body}
	}
	return &Response{Status: 200, Headers: [][2]string{{"server", "echo"}}, Body: body}, nil
}

func (e *echo) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.reqs)
}

func hdr(h [][2]string, k string) string {
	v, _ := headerGet(h, k)
	return v
}
