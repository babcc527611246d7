package filter

import (
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/wafguard/wafguard/internal/benchreq"
)

// The benchmarks compare one request through the plugin (driven by the
// proxytest emulator, so the numbers include the emulator's own copies of
// headers and bodies) with the same request through Coraza directly, both
// with the full CRS. Compare runs with:
//
//	go test ./filter/ -run '^$' -bench . -benchmem -count 6 > old.txt
//	go test ./filter/ -run '^$' -bench . -benchmem -count 6 -tags coraza.rule.multiphase_evaluation > new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt
//
// TestBenchmarkSetup checks that each request gets the expected verdict.

type benchRequest = benchreq.Request

// benchRequests are the requests perf/ sends to the .wasm too.
var benchRequests = benchreq.Requests()

var benchResponseHeaders = [][2]string{{":status", "200"}, {"content-type", "text/html"}, {"content-length", "12"}}

// emulatorRequest drives one request and response through the plugin and
// returns the status the client sees.
func emulatorRequest(host proxytest.HostEmulator, r *benchRequest, reqHeaders [][2]string) int {
	id := host.InitializeHttpContext()
	defer host.CompleteHttpContext(id)
	host.CallOnRequestHeaders(id, reqHeaders, r.Body == nil)
	if lr := host.GetSentLocalResponse(id); lr != nil {
		return int(lr.StatusCode)
	}
	if r.Body != nil {
		host.CallOnRequestBody(id, r.Body, true)
		if lr := host.GetSentLocalResponse(id); lr != nil {
			return int(lr.StatusCode)
		}
	}
	host.CallOnResponseHeaders(id, benchResponseHeaders, false)
	if host.CallOnResponseBody(id, []byte("<p>hello</p>"), true) != types.ActionContinue {
		return 0
	}
	if lr := host.GetSentLocalResponse(id); lr != nil {
		return int(lr.StatusCode)
	}
	return 200
}

func requestHeaders(r *benchRequest) [][2]string {
	return append([][2]string{
		{":method", r.Method}, {":path", r.Path}, {":authority", "shop.example.com"}, {":scheme", "https"},
	}, r.Headers...)
}

// startBenchPlugin loads the CRS plugin in the emulator.
func startBenchPlugin(tb testing.TB) (proxytest.HostEmulator, func()) {
	return startPluginWith(tb, crsConfig)
}

func startPluginWith(tb testing.TB, config string) (proxytest.HostEmulator, func()) {
	tb.Helper()
	opt := proxytest.NewEmulatorOption().WithVMContext(&testVM{}).WithPluginConfiguration([]byte(config))
	for _, p := range nativeProperties {
		opt = opt.WithProperty(strings.Split(p[0], "\x00"), []byte(p[1]))
	}
	host, reset := proxytest.NewHostEmulator(opt)
	if host.StartPlugin() != types.OnPluginStartStatusOK {
		reset()
		tb.Fatalf("plugin start: %v", host.GetCriticalLogs())
	}
	return host, reset
}

func crsWAF(tb testing.TB) coraza.WAF { return wafFor(tb, crsConfig) }

// wafFor compiles config's rule set as the plugin would, without a host.
func wafFor(tb testing.TB, config string) coraza.WAF {
	tb.Helper()
	cfg, err := parseConfig([]byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	sets, err := buildRuleSets(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return sets["rules"].waf
}

// discardMatchLines drops, for the rest of tb, the match lines that
// compileWAF's WAFs write to the proxy log: the emulator keeps every line it
// is given, each with the request's URI, and a test comparing large requests
// under the CRS would keep gigabytes of them. Such tests read the matches
// from Coraza's transaction instead.
func discardMatchLines(tb testing.TB) {
	write := writeMatchLine
	writeMatchLine = func(string) {}
	tb.Cleanup(func() { writeMatchLine = write })
}

// quietLogs silences the emulator, which prints every proxy log line.
func quietLogs(tb testing.TB) {
	out := log.Writer()
	log.SetOutput(io.Discard)
	tb.Cleanup(func() { log.SetOutput(out) })
}

func TestBenchmarkSetup(t *testing.T) {
	quietLogs(t)
	host, reset := startBenchPlugin(t)
	defer reset()
	waf := crsWAF(t)
	for i := range benchRequests {
		r := &benchRequests[i]
		if got := emulatorRequest(host, r, requestHeaders(r)); got != r.WantStatus {
			t.Errorf("%s through the plugin: got status %d, want %d", r.Name, got, r.WantStatus)
		}
		if got := benchreq.Coraza(waf, r); got != r.WantStatus {
			t.Errorf("%s through Coraza: got status %d, want %d", r.Name, got, r.WantStatus)
		}
	}
	if v, err := host.GetGaugeMetric(metricActive); err != nil || v != 0 {
		t.Errorf("%s: got %d (%v), want 0", metricActive, v, err)
	}
}

func BenchmarkPlugin_request(b *testing.B) {
	quietLogs(b)
	host, reset := startBenchPlugin(b)
	defer reset()
	for i := range benchRequests {
		r := &benchRequests[i]
		headers := requestHeaders(r)
		b.Run(r.Name, func(b *testing.B) {
			b.ReportAllocs()
			if r.Body != nil {
				b.SetBytes(int64(len(r.Body)))
			}
			for b.Loop() {
				emulatorRequest(host, r, headers)
			}
		})
	}
	// The JSON POST again with values no earlier request had, as
	// json_post_10kb_fresh in perf/.
	r := benchRequests[1]
	salt := 0
	b.Run("json_post_10kb_fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			salt++
			r.Body = benchreq.FreshJSONBody(10*1024, salt)
			if got := emulatorRequest(host, &r, requestHeaders(&r)); got != r.WantStatus {
				b.Fatalf("status %d, want %d", got, r.WantStatus)
			}
		}
	})
}

// poolPlugin returns the bench's pool and the CRS plugin in the emulator,
// with its logs quiet.
func poolPlugin(b *testing.B) ([]benchreq.Request, proxytest.HostEmulator, func()) {
	b.Helper()
	quietLogs(b)
	pool, err := benchreq.DefaultPool()
	if err != nil {
		b.Fatal(err)
	}
	host, reset := startBenchPlugin(b)
	return pool, host, reset
}

// BenchmarkPlugin_pool is perf's BenchmarkWasm_pool natively: the bench's
// traffic through the plugin, per class and as the mix.
func BenchmarkPlugin_pool(b *testing.B) {
	pool, host, reset := poolPlugin(b)
	defer reset()
	for _, class := range benchreq.PoolRuns {
		reqs := benchreq.Select(pool, class)
		var headers [][][2]string
		for _, r := range reqs {
			headers = append(headers, requestHeaders(r))
		}
		b.Run(class, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if got := emulatorRequest(host, reqs[i], headers[i]); got != reqs[i].WantStatus {
					b.Fatalf("%s %s: status %d, want %d", reqs[i].Method, reqs[i].Path, got, reqs[i].WantStatus)
				}
				i = (i + 1) % len(reqs)
			}
		})
	}
}

// BenchmarkPlugin_requestID is the pool's GETs as Envoy hands them to the
// filter: each with a fresh x-request-id (the HTTP connection manager
// adds one to every request that lacks it), a header value seen once.
func BenchmarkPlugin_requestID(b *testing.B) {
	pool, host, reset := poolPlugin(b)
	defer reset()
	reqs := benchreq.Select(pool, "benign_get")
	b.ReportAllocs()
	i, n := 0, uint64(0)
	for b.Loop() {
		n++
		h := append(requestHeaders(reqs[i]), [2]string{"x-request-id", fmt.Sprintf("%08x-5b1e-4c3a-9f2d-%012x", uint32(n*2654435761), n)})
		if got := emulatorRequest(host, reqs[i], h); got != reqs[i].WantStatus {
			b.Fatalf("%s %s: status %d, want %d", reqs[i].Method, reqs[i].Path, got, reqs[i].WantStatus)
		}
		i = (i + 1) % len(reqs)
	}
}

func BenchmarkCoraza_request(b *testing.B) {
	quietLogs(b)
	// The WAF's error callback logs through proxywasm, which needs a host.
	_, reset := startBenchPlugin(b)
	defer reset()
	waf := crsWAF(b)
	for i := range benchRequests {
		r := &benchRequests[i]
		b.Run(r.Name, func(b *testing.B) {
			b.ReportAllocs()
			if r.Body != nil {
				b.SetBytes(int64(len(r.Body)))
			}
			for b.Loop() {
				benchreq.Coraza(waf, r)
			}
		})
	}
}

// BenchmarkPlugin_start measures NewPlugin with the full CRS as on a fresh
// VM: without the VM's WAF cache, and with the WAFs closed first so that
// Coraza's memoizer, which outlives a WAF in the process, holds none of
// their compiled operators (a VM starts with it empty).
func BenchmarkPlugin_start(b *testing.B) {
	quietLogs(b)
	b.ReportAllocs()
	for b.Loop() {
		closeWAFs()
		host, reset := startBenchPlugin(b)
		_ = host
		reset()
	}
	closeWAFs()
}

// closeWAFs closes and forgets every WAF of the VM's cache.
func closeWAFs() {
	for key, waf := range wafCache {
		closeWAF(waf)
		delete(wafCache, key)
	}
}

// noRulesConfig has the engine on and no rules, so that Coraza's own work is
// minimal and the filter's (plus the emulator's) overhead shows.
var noRulesConfig = ruleConfig("SecRuleEngine On", "SecRequestBodyAccess On", "SecResponseBodyAccess On")

// BenchmarkPlugin_overhead is BenchmarkPlugin_request without rules; compare
// it with BenchmarkCoraza_overhead to see what the filter and the emulator add
// per request.
func BenchmarkPlugin_overhead(b *testing.B) {
	quietLogs(b)
	host, reset := startPluginWith(b, noRulesConfig)
	defer reset()
	for i := range benchRequests {
		r := &benchRequests[i]
		headers := requestHeaders(r)
		b.Run(r.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				emulatorRequest(host, r, headers)
			}
		})
	}
}

func BenchmarkCoraza_overhead(b *testing.B) {
	waf := wafFor(b, noRulesConfig)
	for i := range benchRequests {
		r := &benchRequests[i]
		b.Run(r.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchreq.Coraza(waf, r)
			}
		})
	}
}
