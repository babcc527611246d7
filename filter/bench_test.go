package filter

import (
	"bytes"
	"io"
	"log"
	"strconv"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
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

type benchRequest struct {
	name       string
	method     string
	path       string
	headers    [][2]string
	body       []byte
	wantStatus int
}

var benchRequests = []benchRequest{
	{
		name: "benign_get", method: "GET", path: "/products/42?page=2&sort=price",
		headers: [][2]string{
			{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "text/html"}, {"accept-language", "en"},
		},
		wantStatus: 200,
	},
	{
		name: "json_post_10kb", method: "POST", path: "/api/orders",
		headers: [][2]string{
			{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "application/json"},
			{"content-type", "application/json"}, {"content-length", "10240"},
		},
		body:       jsonBody(10 * 1024),
		wantStatus: 200,
	},
	{
		name: "sqli_get", method: "GET", path: "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--",
		headers: [][2]string{
			{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "text/html"},
		},
		wantStatus: 403,
	},
}

// jsonBody returns a benign JSON document of n bytes: items with an id and a
// 200-byte description, about 90 arguments for 10 KiB.
func jsonBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items": [`)
	for i := 0; b.Len() < n-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id": ` + strconv.Itoa(i) + `, "description": "` + strings.Repeat("fresh organic produce from local farms ", 5) + `"}`)
	}
	b.WriteString(`], "note": "deliver before noon"`)
	for b.Len() < n-1 {
		b.WriteByte(' ')
	}
	b.WriteByte('}')
	return b.Bytes()
}

var benchResponseHeaders = [][2]string{{":status", "200"}, {"content-type", "text/html"}, {"content-length", "12"}}

// emulatorRequest drives one request and response through the plugin and
// returns the status the client sees.
func emulatorRequest(host proxytest.HostEmulator, r *benchRequest, reqHeaders [][2]string) int {
	id := host.InitializeHttpContext()
	defer host.CompleteHttpContext(id)
	host.CallOnRequestHeaders(id, reqHeaders, r.body == nil)
	if lr := host.GetSentLocalResponse(id); lr != nil {
		return int(lr.StatusCode)
	}
	if r.body != nil {
		host.CallOnRequestBody(id, r.body, true)
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
		{":method", r.method}, {":path", r.path}, {":authority", "shop.example.com"}, {":scheme", "https"},
	}, r.headers...)
}

// corazaRequest runs the same request through Coraza directly, as a connector
// without proxy-wasm would.
func corazaRequest(waf coraza.WAF, r *benchRequest) int {
	tx := waf.NewTransaction()
	defer func() {
		tx.ProcessLogging()
		tx.Close()
	}()
	tx.ProcessConnection("10.1.2.3", 43210, "10.0.0.1", 8080)
	tx.ProcessURI(r.path, r.method, "HTTP/1.1")
	for _, h := range r.headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	tx.AddRequestHeader("Host", "shop.example.com")
	if it := tx.ProcessRequestHeaders(); it != nil {
		return it.Status
	}
	if r.body != nil {
		if it, _, err := tx.WriteRequestBody(r.body); it != nil || err != nil {
			return 413
		}
	}
	if it, err := tx.ProcessRequestBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	for _, h := range benchResponseHeaders[1:] {
		tx.AddResponseHeader(h[0], h[1])
	}
	if it := tx.ProcessResponseHeaders(200, "HTTP/1.1"); it != nil {
		return it.Status
	}
	if tx.IsResponseBodyAccessible() && tx.IsResponseBodyProcessable() {
		if it, _, err := tx.WriteResponseBody([]byte("<p>hello</p>")); it != nil || err != nil {
			return 500
		}
	}
	if it, err := tx.ProcessResponseBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	return 200
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

func crsWAF(tb testing.TB) coraza.WAF {
	tb.Helper()
	cfg, err := ParseConfig([]byte(crsConfig))
	if err != nil {
		tb.Fatal(err)
	}
	sets, err := buildRuleSets(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return sets["rules"].waf
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
		if got := emulatorRequest(host, r, requestHeaders(r)); got != r.wantStatus {
			t.Errorf("%s through the plugin: got status %d, want %d", r.name, got, r.wantStatus)
		}
		if got := corazaRequest(waf, r); got != r.wantStatus {
			t.Errorf("%s through Coraza: got status %d, want %d", r.name, got, r.wantStatus)
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
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			if r.body != nil {
				b.SetBytes(int64(len(r.body)))
			}
			for b.Loop() {
				emulatorRequest(host, r, headers)
			}
		})
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
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			if r.body != nil {
				b.SetBytes(int64(len(r.body)))
			}
			for b.Loop() {
				corazaRequest(waf, r)
			}
		})
	}
}

// BenchmarkPlugin_start measures NewPlugin with the full CRS, without the
// VM's WAF cache (as on a fresh VM).
func BenchmarkPlugin_start(b *testing.B) {
	quietLogs(b)
	b.ReportAllocs()
	for b.Loop() {
		clear(wafCache)
		host, reset := startBenchPlugin(b)
		_ = host
		reset()
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
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				emulatorRequest(host, r, headers)
			}
		})
	}
}

func BenchmarkCoraza_overhead(b *testing.B) {
	cfg, err := ParseConfig([]byte(noRulesConfig))
	if err != nil {
		b.Fatal(err)
	}
	sets, err := buildRuleSets(cfg)
	if err != nil {
		b.Fatal(err)
	}
	waf := sets["rules"].waf
	for i := range benchRequests {
		r := &benchRequests[i]
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				corazaRequest(waf, r)
			}
		})
	}
}
