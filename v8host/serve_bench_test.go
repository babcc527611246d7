package v8host

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"
)

// BenchmarkServe_passThrough measures what the HTTP front (VM.Serve) adds
// to a request: each iteration sends one GET straight to a trivial
// upstream and one through the front with the pass-through plugin
// (wasmhost/testdata/passthrough, the bench's wasm-pass-v8) to the same
// upstream, one at a time, each over its own kept-alive connection, so
// that both see the same moment of a shared machine. It reports the p50
// and mean latency of both, the front's own cost (the difference of the
// means) and the Node process's CPU per request through the front.
//
//	go test ./v8host -run '^$' -bench Serve_passThrough -benchtime 2000x
//
// It skips without Node, as the tests do; the plugin is built with the Go
// toolchain (GOOS=wasip1).
func BenchmarkServe_passThrough(b *testing.B) {
	wasm := testPlugin(b, "passthrough")
	e, err := Start(Options{Wasm: wasm, Stderr: os.Stderr})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	vm, err := e.NewVM(PluginConfig{Name: "pass", RootID: "pass", VMID: "pass", Configuration: []byte("{}")})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("ok")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "text/plain")
		w.Write(body)
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := vm.Serve(addr, up.URL); err != nil {
		b.Fatal(err)
	}

	// One client, and so one kept-alive connection, per path.
	newClient := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	}
	direct, front := newClient(), newClient()
	defer direct.CloseIdleConnections()
	defer front.CloseIdleConnections()
	get := func(c *http.Client, url string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
		}
		return d
	}
	directURL, frontURL := up.URL+"/bench?q=1", "http://"+addr+"/bench?q=1"
	// Warm both paths: connections, and V8's compilation of the front and
	// the plugin's callbacks.
	for range 300 {
		get(direct, directURL)
		get(front, frontURL)
	}

	d := make([]time.Duration, 0, b.N)
	f := make([]time.Duration, 0, b.N)
	cpu0, err := e.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		d = append(d, get(direct, directURL))
		f = append(f, get(front, frontURL))
	}
	b.StopTimer()
	cpu1, err := e.CPU()
	if err != nil {
		b.Fatal(err)
	}
	ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
	mean := func(l []time.Duration) time.Duration {
		var s time.Duration
		for _, x := range l {
			s += x
		}
		return s / time.Duration(len(l))
	}
	p50 := func(l []time.Duration) time.Duration {
		slices.Sort(l)
		return l[len(l)/2]
	}
	dm, fm := mean(d), mean(f)
	b.ReportMetric(ms(p50(d)), "direct-p50-ms")
	b.ReportMetric(ms(dm), "direct-mean-ms")
	b.ReportMetric(ms(p50(f)), "front-p50-ms")
	b.ReportMetric(ms(fm), "front-mean-ms")
	b.ReportMetric(ms(fm-dm), "front-cost-ms")
	b.ReportMetric(float64(cpu1-cpu0)/1e3/float64(b.N), "node-cpu-us/req")
}
