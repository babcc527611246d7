package wasmhost

import (
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkExchange_passthrough measures one whole exchange (headers, a
// small body, response) through the host with a plugin that does nothing:
// the host's own cost per request. Compare runs with
//
//	go test -run '^$' -bench Exchange -count 10 ./wasmhost > new.txt && benchstat old.txt new.txt
func BenchmarkExchange_passthrough(b *testing.B) {
	m := compilePlugin(b, "passthrough", Options{})
	vm, _ := newVM(b, m, PluginConfig{})
	up := UpstreamFunc(func(context.Context, *UpstreamRequest) (*Response, error) {
		return &Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: [][]byte{[]byte("ok")}}, nil
	})
	req := &Request{Headers: append(post("/anything?x=1"), [2]string{"content-type", "text/plain"}), Body: [][]byte{[]byte("hello")}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := vm.Exchange(context.Background(), req, up); r.Status != 200 {
			b.Fatalf("status %d", r.Status)
		}
	}
}

// TestExchange_passthroughCheck keeps the benchmark's setup honest: the
// exchange reaches the upstream and returns its answer.
func TestExchange_passthroughCheck(t *testing.T) {
	m := compilePlugin(t, "passthrough", Options{})
	vm, _ := newVM(t, m, PluginConfig{})
	up := &echo{}
	r := vm.Exchange(context.Background(), &Request{Headers: post("/"), Body: [][]byte{[]byte("hello")}}, up)
	if r.Status != 200 || string(r.Body) != "hello" || !r.Upstream {
		t.Fatalf("result %+v", r)
	}
}

// TestNumbers_startTime reports VM start times for build/main.wasm with the
// CRS configuration, with and without the compilation cache. It only runs
// when WASMHOST_NUMBERS=1 (a cold compile takes about a minute).
func TestNumbers_startTime(t *testing.T) {
	if os.Getenv("WASMHOST_NUMBERS") == "" {
		t.Skip("set WASMHOST_NUMBERS=1 to measure start-up times")
	}
	wasm, err := os.ReadFile("../build/main.wasm")
	if err != nil {
		t.Skipf("build/main.wasm: %v", err)
	}
	cfg, err := os.ReadFile("../config/default.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, run := range []string{"cold cache", "warm cache"} {
		start := time.Now()
		m, err := Compile(context.Background(), wasm, Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		compiled := time.Since(start)
		vm, err := m.NewVM(context.Background(), PluginConfig{Name: "waf", VMID: "waf", Configuration: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: compile %v, VM start (CRS) %v, total %v", run, compiled.Round(time.Millisecond), vm.StartTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		vm.Close()
		m.Close(context.Background())
	}
}
