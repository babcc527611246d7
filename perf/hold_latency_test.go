package perf

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// TestHoldLatency measures what hold_headers_until_inspected costs the
// bench's JSON POSTs through cmd/wafhost's server (wasmhost.Handler, one VM,
// the built-in CRS) over loopback, to an upstream that reads the body and
// answers at once: per mode, the client's latency (request sent to
// response read) and when the request headers reached the upstream,
// counted from the start of the request, one request at a time. It runs
// only with PERF_HOLD_LATENCY=1; PERF_HOLD_N sets the measured requests
// per mode (default 300), each mode stops after 2 minutes whatever the
// count.
func TestHoldLatency(t *testing.T) {
	if os.Getenv("PERF_HOLD_LATENCY") != "1" {
		t.Skip("set PERF_HOLD_LATENCY=1 to measure")
	}
	n := 300
	if v, err := strconv.Atoi(os.Getenv("PERF_HOLD_N")); err == nil && v > 0 {
		n = v
	}
	pool, err := benchreq.DefaultPool()
	if err != nil {
		t.Fatal(err)
	}
	posts := benchreq.Select(pool, "benign_json")
	if len(posts) == 0 {
		t.Fatal("no JSON POSTs in the pool")
	}
	var upHeaders atomic.Int64 // unix ns when the last request's headers arrived
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upHeaders.Store(time.Now().UnixNano())
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	up, err := wasmhost.NewHTTPUpstream(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wasmhost.Compile(context.Background(), plugintest.Read(t), wasmhost.Options{Concurrency: 1, CacheDir: os.TempDir() + "/wasmhost-perf-cache"})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
	for _, hold := range []bool{false, true} {
		cfg := `{}`
		if hold {
			cfg = `{"hold_headers_until_inspected": true}`
		}
		p, err := m.NewPool(context.Background(), wasmhost.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf",
			Configuration: []byte(cfg), AllowOnHeadersStopIteration: hold})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(&wasmhost.Handler{Pool: p, Upstream: up})
		do := func(r *benchreq.Request) (total, toUpstream time.Duration) {
			req, _ := http.NewRequest(r.Method, srv.URL+r.Path, bytes.NewReader(r.Body))
			req.Header = r.HTTPHeader()
			req.Host = benchreq.Host
			req.ContentLength = int64(len(r.Body))
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			total = time.Since(start)
			if resp.StatusCode != r.WantStatus {
				t.Fatalf("%s: status %d, want %d", r.Name, resp.StatusCode, r.WantStatus)
			}
			return total, time.Duration(upHeaders.Load() - start.UnixNano())
		}
		for i := 0; i < 50; i++ {
			do(posts[i%len(posts)])
		}
		var lat, toUp []time.Duration
		deadline := time.Now().Add(2 * time.Minute)
		for i := 0; i < n && time.Now().Before(deadline); i++ {
			a, b := do(posts[i%len(posts)])
			lat, toUp = append(lat, a), append(toUp, b)
		}
		srv.Close()
		p.Close()
		t.Logf("hold_headers_until_inspected %v: %d JSON POSTs (%d distinct, %d..%d bytes): client latency p50 %v p99 %v; request headers at the upstream after p50 %v p99 %v",
			hold, len(lat), len(posts), minLen(posts), maxLen(posts), pct(lat, 50), pct(lat, 99), pct(toUp, 50), pct(toUp, 99))
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i].Round(time.Microsecond)
}

func minLen(rs []*benchreq.Request) int {
	m := len(rs[0].Body)
	for _, r := range rs {
		m = min(m, len(r.Body))
	}
	return m
}

func maxLen(rs []*benchreq.Request) int {
	m := 0
	for _, r := range rs {
		m = max(m, len(r.Body))
	}
	return m
}
