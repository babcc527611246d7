package perf

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// requests are those filter/'s benchmarks send natively: a benign GET, a
// 10 KiB benign JSON POST, and a SQL injection in the query string.
var requests = benchreq.Requests()

// crsConfig is the built-in rule set: recommended settings, blocking, CRS,
// with the rule preselection; PERF_RULE_PRESELECTION=false turns it off,
// to measure the plugin without it beside the plugin with it, and
// PERF_HOLD_HEADERS=1 turns hold_headers_until_inspected on (the VMs then
// get allow_on_headers_stop_iteration, see holdHeaders).
// PERF_PLUGIN_CONFIG replaces the whole plugin configuration, e.g. to
// measure what Coraza costs without the CRS (the answers then differ from
// the CRS's, so the pool benchmarks stop checking them; see ownConfig).
func crsConfig() string {
	if ownConfig() {
		return os.Getenv("PERF_PLUGIN_CONFIG")
	}
	if os.Getenv("PERF_RULE_PRESELECTION") == "false" {
		return `{"rule_preselection": false}`
	}
	if holdHeaders() {
		return `{"hold_headers_until_inspected": true}`
	}
	return `{}`
}

// ownConfig reports whether PERF_PLUGIN_CONFIG sets the plugin
// configuration.
func ownConfig() bool { return os.Getenv("PERF_PLUGIN_CONFIG") != "" }

// holdHeaders reports whether PERF_HOLD_HEADERS asks for the hold mode.
func holdHeaders() bool { return os.Getenv("PERF_HOLD_HEADERS") == "1" }

var info = wasmhost.StreamInfo{SourceAddress: "10.1.2.3:43210", DestinationAddress: "10.0.0.1:8080", Protocol: "HTTP/1.1"}

var upstream = wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
	return &wasmhost.Response{Status: 200, Headers: [][2]string{{"content-type", "text/html"}, {"content-length", "12"}},
		Body: [][]byte{[]byte("<p>hello</p>")}}, nil
})

func wasmRequest(r *benchreq.Request) *wasmhost.Request {
	req := &wasmhost.Request{
		Headers: append([][2]string{{":method", r.Method}, {":path", r.Path}, {":authority", "shop.example.com"}, {":scheme", "https"}}, r.Headers...),
		Info:    info,
	}
	if r.Body != nil {
		req.Body = [][]byte{r.Body}
	}
	return req
}

// cpuTime is the CPU time of this process so far (user and system, every
// thread). On a shared machine it is steadier than wall time: waiting for
// a core does not count.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// guestEnv is $PERF_GUEST_ENV (NAME=value pairs separated by spaces, e.g.
// "GOGC=400") as the VM's environment variables, which the Go runtime of
// the guest reads when it starts.
func guestEnv() [][2]string {
	var env [][2]string
	for _, kv := range strings.Fields(os.Getenv("PERF_GUEST_ENV")) {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, [2]string{k, v})
	}
	return env
}

// startVM compiles the plugin (ctx carries wazero options such as function
// listeners) and starts one VM with the CRS.
func startVM(tb testing.TB, ctx context.Context, cacheDir string) *wasmhost.VM {
	tb.Helper()
	return startVMOf(tb, ctx, cacheDir, plugintest.Read(tb))
}

// startVMOf is startVM with the module given.
func startVMOf(tb testing.TB, ctx context.Context, cacheDir string, wasm []byte) *wasmhost.VM {
	tb.Helper()
	m, err := wasmhost.Compile(ctx, wasm, wasmhost.Options{Concurrency: 1, CacheDir: cacheDir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	vm, err := m.NewVM(ctx, wasmhost.PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(crsConfig()), Env: guestEnv(),
		AllowOnHeadersStopIteration: holdHeaders(),
		LogSink: func(e wasmhost.LogEntry) {
			// Errors (a trap's message among them) show with
			// the failure they explain.
			if e.Level >= wasmhost.LevelError {
				tb.Logf("plugin log: %s", e.Message)
			}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(vm.Close)
	tb.Logf("compile %v, VM start %v", m.CompileTime, vm.StartTime)
	return vm
}

func BenchmarkWasm_request(b *testing.B) {
	vm := startVM(b, context.Background(), "")
	for i := range requests {
		r := &requests[i]
		req := wasmRequest(r)
		b.Run(r.Name, func(b *testing.B) {
			b.ReportAllocs()
			if got := vm.Exchange(context.Background(), req, upstream).Status; got != r.WantStatus {
				b.Fatalf("status %d, want %d", got, r.WantStatus)
			}
			cpu0 := cpuTime()
			for b.Loop() {
				vm.Exchange(context.Background(), req, upstream)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	// The JSON POST again, with values no earlier request had.
	r := requests[1]
	salt := 0
	b.Run("json_post_10kb_fresh", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			salt++
			r.Body = benchreq.FreshJSONBody(10*1024, salt)
			if got := vm.Exchange(context.Background(), wasmRequest(&r), upstream).Status; got != r.WantStatus {
				b.Fatalf("status %d, want %d", got, r.WantStatus)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkWasm_memory reports the VM's linear memory after the CRS is
// loaded (start-MiB) and after b.N requests of a GET/JSON/SQLi rotation
// (end-MiB), every tenth JSON body with fresh values. Linear memory never
// shrinks, so end-MiB is the peak; flat means end-MiB does not move between
// -benchtime 10000x and 100000x.
//
//	go run mage.go build && go test ./perf -run '^$' -bench Wasm_memory -benchtime 10000x
func BenchmarkWasm_memory(b *testing.B) {
	vm := startVM(b, context.Background(), "")
	start := vm.MemorySize()
	i := 0
	for b.Loop() {
		r := requests[i%len(requests)]
		if r.Body != nil && i%10 == 0 {
			r.Body = benchreq.FreshJSONBody(10*1024, i)
		}
		if got := vm.Exchange(context.Background(), wasmRequest(&r), upstream).Status; got != r.WantStatus {
			b.Fatalf("request %d (%s): status %d, want %d", i, r.Name, got, r.WantStatus)
		}
		i++
	}
	b.ReportMetric(float64(start)/(1<<20), "start-MiB")
	b.ReportMetric(float64(vm.MemorySize())/(1<<20), "end-MiB")
}
