package wasmhost

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func newServer(t *testing.T, plugin string, up Upstream) (*httptest.Server, *Module) {
	t.Helper()
	m := compilePlugin(t, plugin, Options{Concurrency: 2})
	pool, err := m.NewPool(context.Background(), PluginConfig{Name: "srv"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &Handler{Pool: pool, Upstream: up}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnContext = h.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, m
}

// The HTTP server applies the plugin's header edits both ways and proxies
// to a real upstream over loopback.
func TestHandler_proxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "backend")
		_, _ = io.WriteString(w, r.URL.RequestURI()+" "+r.Header.Get("X-Added"))
	}))
	defer backend.Close()
	up, err := NewHTTPUpstream(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newServer(t, "headers", up)
	resp, err := http.Get(srv.URL + "/orig?q=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(body) != "/rewritten req" || resp.Header.Get("X-Resp") != "1" || resp.Header.Get("Server") != "" {
		t.Errorf("status %d body %q headers %v", resp.StatusCode, body, resp.Header)
	}
}

// The built-in upstream echoes /anything and follows the albedo /reflect
// protocol go-ftw uses.
func TestEchoUpstream(t *testing.T) {
	srv, _ := newServer(t, "passthrough", EchoUpstream{})
	resp, err := http.Post(srv.URL+"/anything/x?a=1&a=2&b=3", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	var got echoReply
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Method != "POST" || got.Path != "/anything/x" || got.Body != "hello" || got.Args["b"] != "3" || got.Headers["content-type"] != "text/plain" {
		t.Errorf("echo %+v", got)
	}
	spec := `{"status":418,"headers":{"X-Reflected":"yes"},"encodedBody":"dGVhcG90"}`
	resp, err = http.Post(srv.URL+"/reflect", "application/json", strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 418 || string(b) != "teapot" || resp.Header.Get("X-Reflected") != "yes" {
		t.Errorf("reflect: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	resp, err = http.Get(srv.URL + "/status/404")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/status/404 gave %d", resp.StatusCode)
	}
}

// /stats/prometheus has Envoy's shape: tags extracted by the stats_tags
// regexes (group 1 cut, group 2 the value), "wasmcustom." stripped, "." as
// "_", untagged series as "{}".
func TestHost_WritePrometheus(t *testing.T) {
	h := NewHost(HostOptions{})
	id := h.metrics.define(MetricCounter, "waf_filter.tx.interruptions_env=prod_ruleid=949110_phase=http_request_headers")
	h.metrics.increment(id, 2)
	h.metrics.increment(h.metrics.define(MetricCounter, "waf_filter.tx.total_env=prod"), 5)
	g := h.metrics.define(MetricGauge, "waf_filter.tx.active")
	h.metrics.increment(g, -1)
	var b bytes.Buffer
	if err := h.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	want := `# TYPE waf_filter_tx_active gauge
waf_filter_tx_active{} -1
# TYPE waf_filter_tx_interruptions counter
waf_filter_tx_interruptions{env="prod",rule_id="949110",phase="http_request_headers"} 2
# TYPE waf_filter_tx_total counter
waf_filter_tx_total{env="prod"} 5
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// Envoy Context::defineMetric: same name and type, same id.
	if again := h.metrics.define(MetricGauge, "waf_filter.tx.active"); again != g {
		t.Errorf("redefine gave id %d, want %d", again, g)
	}
	// Status codes the Go SDK turns into panics (notes 5).
	if st := h.metrics.increment(id, 0); st != StatusBadArgument {
		t.Errorf("counter += 0: %d, want BadArgument", st)
	}
	hist := h.metrics.define(MetricHistogram, "lat")
	if _, st := h.metrics.value(hist); st != StatusBadArgument {
		t.Errorf("histogram get: %d, want BadArgument", st)
	}
	if _, st := h.metrics.value(12345); st != StatusNotFound {
		t.Errorf("unknown id: %d, want NotFound", st)
	}
	rec := httptest.NewRecorder()
	AdminHandler(h, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/stats/prometheus", nil))
	if !regexp.MustCompile(`waf_filter_tx_total\{env="prod"\} 5`).MatchString(rec.Body.String()) {
		t.Errorf("admin: %q", rec.Body.String())
	}
}

// Many goroutines doing get + CAS-set increments on one existing key never
// lose an update (SharedData::set under cpp-host's mutex). The key is written
// first: a missing key reads as cas 0, and a set with cas 0 (or on a missing
// key) is unconditional in Envoy, so a stalled writer that read "missing"
// would overwrite whatever the others counted meanwhile.
func TestHost_SetSharedData_hammer(t *testing.T) {
	h := NewHost(HostOptions{})
	p, n := 8, 500
	if testing.Short() {
		p, n = 4, 100
	}
	if st := h.SetSharedData("vm", "k", []byte("0"), 0); st != StatusOK {
		t.Fatalf("seed: %d", st)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < p; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for j := 0; j < n; j++ {
				for {
					v, cas, _ := h.GetSharedData("vm", "k")
					n, _ := strconv.Atoi(string(v))
					if h.SetSharedData("vm", "k", []byte(strconv.Itoa(n+1)), cas) == StatusOK {
						break
					}
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	v, cas, _ := h.GetSharedData("vm", "k")
	if string(v) != strconv.Itoa(p*n) || cas != uint32(p*n+1) {
		t.Errorf("value %s cas %d after %d increments", v, cas, p*n)
	}
}

// A bad guest pointer gives InvalidMemoryAccess, never a host panic.
func TestVM_badPointer(t *testing.T) {
	m := compilePlugin(t, "passthrough", Options{})
	vm, _ := newVM(t, m, PluginConfig{})
	bad := uint64(0xfffffff0)
	for name, call := range map[string]func([]uint64){
		"proxy_log":             vm.hProxyLog,
		"proxy_get_shared_data": vm.hGetSharedData,
		"proxy_set_shared_data": vm.hSetSharedData,
		"proxy_define_metric":   vm.hDefineMetric,
		"proxy_get_property":    vm.hGetProperty,
		"proxy_send_local_resp": vm.hSendLocalResponse,
	} {
		s := []uint64{2, bad, 100, bad, bad, bad, bad, 0}
		call(s)
		if Status(s[0]) != StatusInvalidMemoryAccess {
			t.Errorf("%s: status %d, want InvalidMemoryAccess", name, s[0])
		}
	}
	// Out-pointers are checked before anything is allocated.
	s := []uint64{bufVMConfig, 0, 10, bad, bad}
	vm.hGetBufferBytes(s)
	if Status(s[0]) != StatusInvalidMemoryAccess {
		t.Errorf("get_buffer_bytes with bad out pointers: %d", s[0])
	}
}

// A pause on request headers holds the body back (StopAllIteration): no
// body callback until the plugin resumes, then one callback with all of it
// (Envoy FilterManager, notes 2.2).
func TestStream_pauseHoldsBody(t *testing.T) {
	m := compilePlugin(t, "tick", Options{})
	vm, _ := newVM(t, m, PluginConfig{ManualTicks: true})
	s := vm.NewStream(StreamInfo{})
	if a := s.RequestHeaders(post("/"), false); a != ActionPause {
		t.Fatalf("headers action %d", a)
	}
	if a := s.RequestBody([]byte("abc"), false); a != NotCalled {
		t.Errorf("body while headers paused: action %d, want NotCalled", a)
	}
	s.RequestBody([]byte("def"), true)
	if _, _, _, done := s.UpstreamRequest(); done {
		t.Fatal("request released while paused")
	}
	vm.Tick() // resumes through proxy_set_effective_context + proxy_continue_stream
	h, body, _, done := s.UpstreamRequest()
	if !done || string(body) != "abcdef" || hdr(h, ":method") != "POST" {
		t.Errorf("upstream %v %q done %v", h, body, done)
	}
	s.End()
}
