package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/benchreq"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// The tests of this file answer what only a real Envoy can: they start
// their own Envoy processes (E2E_ENVOY=1), each from the shipped
// envoy/envoy.yaml with its addresses and module localized, and with a
// second listener or another plugin configuration where a test needs one.

// needEnvoy skips the test unless the suite runs against real Envoy.
func needEnvoy(t *testing.T) {
	t.Helper()
	if os.Getenv(envEnvoy) != "1" {
		t.Skipf("real Envoy only: %s=1 go test ./e2e/ (go run mage.go e2eEnvoy)", envEnvoy)
	}
	if _, err := os.Stat(plugintest.Path()); err != nil {
		t.Fatalf("%v; build it with: %s", err, buildCommand)
	}
}

// shippedBootstrap is the operator's bootstrap these tests run.
const shippedBootstrap = "../envoy/envoy.yaml"

// testUpstream is the upstream of these tests: /slow/ answers after
// slowFor and counts the requests it holds at once; /leak answers a body
// the response rule blocks; everything else is echoed. It records the
// paths and bodies it got.
type testUpstream struct {
	srv     *http.Server
	addr    string
	slowFor time.Duration

	inflight, peak atomic.Int64
	mu             sync.Mutex
	got            []string // "METHOD path body"
}

func startUpstream(t *testing.T, slowFor time.Duration) *testUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &testUpstream{addr: ln.Addr().String(), slowFor: slowFor}
	echo := wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20)
	u.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, r.Method+" "+r.URL.Path+" "+string(body))
		u.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/slow/"):
			n := u.inflight.Add(1)
			for {
				p := u.peak.Load()
				if n <= p || u.peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(u.slowFor)
			u.inflight.Add(-1)
			w.Write([]byte("slow"))
		case r.URL.Path == "/leak":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("account 42: secret-leak\n"))
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			echo.ServeHTTP(w, r)
		}
	})}
	go u.srv.Serve(ln)
	t.Cleanup(func() { u.srv.Close() })
	return u
}

// received reports whether the upstream got a request whose record
// contains s.
func (u *testUpstream) received(s string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.ContainsFunc(u.got, func(g string) bool { return strings.Contains(g, s) })
}

// launch starts Envoy with the shipped bootstrap in front of the upstream
// at host:port upstream, stopped at the test's end. edit changes the
// localized bootstrap.
func launch(t *testing.T, workers int, upstream string, edit func(b *bootstrapv3.Bootstrap) error, log io.Writer) *envoy.Launched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), envoyStartTimeout)
	defer cancel()
	e, err := envoy.Launch(ctx, envoy.Setup{
		Bootstrap: shippedBootstrap, Module: plugintest.Path(), Upstream: upstream,
		Workers: workers, Edit: edit, Log: log, Wait: envoyStartTimeout,
		BaseID: 200 + os.Getpid()%1000 + workers,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// addListener appends a copy of the bootstrap's first listener on a free
// loopback port, its wasm filter set by edit, and returns the port's
// host:port. Both listeners share one VM per worker: the VM configuration
// is the same; only the plugin configuration differs.
func addListener(b *bootstrapv3.Bootstrap, edit func(pc *wasmv3.PluginConfig) error) (string, error) {
	ls := b.GetStaticResources().GetListeners()
	ln := proto.Clone(ls[0]).(*listenerv3.Listener)
	ln.Name += "_test" + strconv.Itoa(len(ls))
	addr := envoy.FreePort()
	only := &bootstrapv3.Bootstrap{StaticResources: &bootstrapv3.Bootstrap_StaticResources{Listeners: []*listenerv3.Listener{ln}}}
	if err := envoy.Localize(only, envoy.Local{Listen: addr}); err != nil {
		return "", err
	}
	if _, err := envoy.EditPlugins(only, edit); err != nil {
		return "", err
	}
	b.StaticResources.Listeners = append(ls, ln)
	return addr, nil
}

// balanced gives every listener Envoy's exact connection balance, so that
// n connections opened at once land on n different workers.
func balanced(b *bootstrapv3.Bootstrap) {
	for _, ln := range b.GetStaticResources().GetListeners() {
		ln.ConnectionBalanceConfig = &listenerv3.Listener_ConnectionBalanceConfig{
			BalanceType: &listenerv3.Listener_ConnectionBalanceConfig_ExactBalance_{ExactBalance: &listenerv3.Listener_ConnectionBalanceConfig_ExactBalance{}},
		}
	}
}

// capConfig is a plugin configuration with a process-wide cap of n
// streams in flight and a small rule set.
func capConfig(n int) string {
	return fmt.Sprintf(`{"directives_map":{"t":["SecRuleEngine On"]},"default_directives":"t",
"admission":{"max_inflight":%d,"retry_after_seconds":1,"shared_data_key":"wafguard.e2e.cap"}}`, n)
}

// TestEnvoy_workers starts Envoy with 1, 2 and 4 workers and reports,
// for each, the time until every VM served, the RSS and the first
// request's latency on each worker (one connection per worker, exact
// balance), and where the memory goes after the start and once the
// traffic pool went through every worker (each verdict checked). On a
// second listener with a cap of 4 in flight and an upstream that holds
// each request for 400 ms, 12 requests at once from as many connections
// (spread over the workers): the upstream never holds more than 4, at
// least 4 pass, and the rest get 429 with Retry-After.
func TestEnvoy_workers(t *testing.T) {
	needEnvoy(t)
	const limit, tries = 4, 12
	pool, err := benchreq.NewPool(1, 200, benchreq.DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("concurrency_%d", workers), func(t *testing.T) {
			up := startUpstream(t, 400*time.Millisecond)
			var capAddr string
			e := launch(t, workers, up.addr, func(b *bootstrapv3.Bootstrap) error {
				var err error
				capAddr, err = addListener(b, func(pc *wasmv3.PluginConfig) error { return envoy.SetConfiguration(pc, capConfig(limit)) })
				balanced(b)
				return err
			}, nil)
			rss, _ := e.RSS()
			var first []time.Duration
			for i, a := range together(t, workers, func(int) string { return "http://" + e.Listen + "/anything" }) {
				if a.code != 200 {
					t.Errorf("first request %d: status %d, want 200", i, a.code)
				}
				first = append(first, a.took)
			}
			vms, err := envoy.AdminStat(&http.Client{Timeout: 5 * time.Second}, e.AdminURL(), "wasm.envoy.wasm.runtime.v8.active")
			if err != nil {
				t.Errorf("VMs active: %v", err)
			}
			t.Logf("Envoy %s, --concurrency %d: /ready LIVE after %s, serving with %d VMs active after %s; RSS %d MiB; first request per worker %v",
				e.Version, workers, e.Ready.Round(time.Millisecond), vms, e.Serving.Round(time.Millisecond), rss>>20, first)
			// The bootstrap's memory_allocator_manager gives back, every
			// second, the pages V8's compiler freed (30-54 MiB without it).
			free := int64(-1)
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				if free = pageheapFree(t, e.AdminURL()); free <= freePagesKept || time.Now().After(end) {
					break
				}
			}
			if free > freePagesKept {
				t.Errorf("Envoy's /memory pageheap_free: %d MiB 10 s after the start, want at most %d: the bootstrap's memory_allocator_manager gives free pages back", free>>20, freePagesKept>>20)
			}
			rss2, _ := e.RSS()
			t.Logf("--concurrency %d: pageheap_free %d MiB, RSS %d MiB once freed pages were given back", workers, free>>20, rss2>>20)
			mem, err := envoy.ReadMemory(&http.Client{Timeout: 5 * time.Second}, e.PID(), e.Binary, e.AdminURL())
			if err != nil {
				t.Errorf("memory breakdown: %v", err)
			}
			t.Logf("--concurrency %d: %s", workers, mem)

			// What an operator sees once traffic went through: the traffic
			// pool on every worker, every verdict checked.
			throughEveryWorker(t, e.Listen, workers, pool)
			if mem, err = envoy.ReadMemory(&http.Client{Timeout: 5 * time.Second}, e.PID(), e.Binary, e.AdminURL()); err != nil {
				t.Errorf("memory breakdown: %v", err)
			}
			t.Logf("--concurrency %d, after the traffic pool's %d requests through every worker: %s", workers, len(pool.Requests), mem)

			codes, retryAfter := map[int]int{}, 0
			for _, a := range together(t, tries, func(i int) string { return fmt.Sprintf("http://%s/slow/%d", capAddr, i) }) {
				codes[a.code]++
				if a.code == 429 && a.retryAfter {
					retryAfter++
				}
			}
			if p := up.peak.Load(); p > limit {
				t.Errorf("the upstream held %d requests at once, want at most the cap %d", p, limit)
			}
			if codes[200] < limit || codes[429] == 0 || codes[200]+codes[429] != tries {
				t.Errorf("status counts %v over %d requests, want at least %d 200 and the rest 429", codes, tries, limit)
			}
			if retryAfter != codes[429] {
				t.Errorf("%d of %d 429 answers carry Retry-After", retryAfter, codes[429])
			}
			t.Logf("cap %d: %v; the upstream held at most %d at once", limit, codes, up.peak.Load())
		})
	}
}

// throughEveryWorker sends the pool's requests on workers keep-alive
// connections opened at once (the listener's exact balance gives each to
// a worker of its own), each connection all of them in turn from its own
// offset, and checks each answer against the pool's WantStatus (200 for a
// benign request, 403 for an attack).
func throughEveryWorker(t *testing.T, listen string, workers int, pool *benchreq.Pool) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		bad  int
		seen = map[string]int{}
	)
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Timeout: 30 * time.Second, Transport: tr}
			<-start
			n := len(pool.Requests)
			for i := range n {
				r := &pool.Requests[(i+w*n/workers)%n]
				req, err := http.NewRequest(r.Method, "http://"+listen+r.Path, bytes.NewReader(r.Body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header = r.HTTPHeader()
				code := 0
				if resp, err := c.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				seen[fmt.Sprintf("%s %d", r.Class, code)]++
				if code != r.WantStatus {
					if bad++; bad <= 5 {
						t.Errorf("%s %s (%s): status %d (0: no answer), want %d", r.Method, r.Path, r.Class, code, r.WantStatus)
					}
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d of %d answers not as expected: %v", bad, workers*len(pool.Requests), seen)
	}
}

// answer is what one request of together got.
type answer struct {
	code       int
	retryAfter bool
	took       time.Duration
}

// together sends n GETs at once, request i to url(i), each on its own
// connection, and returns what each got.
func together(t *testing.T, n int, url func(i int) string) []answer {
	t.Helper()
	out := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			<-start
			t0 := time.Now()
			resp, err := c.Get(url(i))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out[i] = answer{resp.StatusCode, resp.Header.Get("Retry-After") != "", time.Since(t0).Round(100 * time.Microsecond)}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// holdConfig blocks "evil" in any argument (phase 2) and "secret-leak"
// in a response body (phase 4), with held headers.
const holdConfig = `{"directives_map":{"t":[
"SecRuleEngine On","SecRequestBodyAccess On","SecResponseBodyAccess On","SecResponseBodyMimeType text/plain application/json",
"SecRule REQUEST_HEADERS:Content-Type \"^application/json\" \"id:1000,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"",
"SecRule ARGS \"@contains evil\" \"id:1001,phase:2,deny,status:403,log\"",
"SecRule RESPONSE_BODY \"@contains secret-leak\" \"id:1002,phase:4,deny,status:403,log\""]},
"default_directives":"t","hold_headers_until_inspected":true,"hold_headers_timeout_ms":1000}`

// TestEnvoy_holdHeaders: with hold_headers_until_inspected and the
// shipped allow_on_headers_stop_iteration: true, a blocked JSON POST is a
// 403 that never reaches the upstream (its access log entry, in the
// shipped json_format, carries the plugin's waf_* filter state), a benign one reaches it, and a
// response the phase-4 rule blocks is a 403, not a reset. On a second
// listener without the flag, a held request is answered 500 after
// hold_headers_timeout_ms, with the log line that names the flag, and it
// does not reach the upstream either.
func TestEnvoy_holdHeaders(t *testing.T) {
	needEnvoy(t)
	up := startUpstream(t, 0)
	var noFlag string
	e := launch(t, 2, up.addr, func(b *bootstrapv3.Bootstrap) error {
		if _, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error { return envoy.SetConfiguration(pc, holdConfig) }); err != nil {
			return err
		}
		var err error
		noFlag, err = addListener(b, func(pc *wasmv3.PluginConfig) error {
			pc.AllowOnHeadersStopIteration = wrapperspb.Bool(false)
			return nil
		})
		return err
	}, nil)
	base := "http://" + e.Listen
	post := func(base, path, body string) (int, error) {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	id := fmt.Sprintf("e2e-hold-%d", time.Now().UnixNano())
	req, _ := http.NewRequest(http.MethodPost, base+"/blocked/"+id, strings.NewReader(`{"q":"an evil value"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err != nil {
		t.Errorf("blocked JSON POST: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("blocked JSON POST: %d, want 403", resp.StatusCode)
		}
	}
	// The access log entry carries the plugin's filter state.
	if entry := accessEntry(e, id); entry == nil {
		t.Errorf("no access log entry for /blocked/%s", id)
	} else {
		for k, want := range map[string]string{"response_code": "403", "waf_action": "block", "waf_status": "403", "waf_rule_id": "1001", "waf_phase": "http_request_body", "upstream_host": "<nil>", "response_code_details": "wafguard_block_1001"} {
			if got := fmt.Sprint(entry[k]); got != want {
				t.Errorf("access log %s = %q, want %q (entry %v)", k, got, want, entry)
			}
		}
	}
	if code, err := post(base, "/benign", `{"q":"a fine value"}`); err != nil || code != 200 {
		t.Errorf("benign JSON POST: %d, %v; want 200", code, err)
	}
	if up.received("/blocked") {
		t.Error("the blocked POST reached the upstream")
	}
	if !up.received(`/benign {"q":"a fine value"}`) {
		t.Error("the benign POST did not reach the upstream with its body")
	}
	resp, err := client.Get(base + "/leak")
	if err != nil {
		t.Fatalf("GET /leak: %v (a reset instead of a 403?)", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || strings.Contains(string(body), "secret-leak") {
		t.Errorf("GET /leak: %d %q; want 403 without the blocked body", resp.StatusCode, body)
	}

	t0 := time.Now()
	code, err := post("http://"+noFlag, "/noflag", `{"q":"a fine value"}`)
	if err != nil || code != 500 {
		t.Errorf("held POST without allow_on_headers_stop_iteration: %d, %v; want 500", code, err)
	}
	if d := time.Since(t0); d < 900*time.Millisecond {
		t.Errorf("the 500 came after %s, want it after hold_headers_timeout_ms (1 s)", d)
	}
	if up.received("/noflag") {
		t.Error("the held POST without the flag reached the upstream")
	}
	if !waitLog(e, "allow_on_headers_stop_iteration is true in the wasm filter's plugin config", 5*time.Second) {
		t.Errorf("no log line naming allow_on_headers_stop_iteration; log:\n%s", tailLines(e.Log(), 20))
	}
}

// TestEnvoy_badConfig: a plugin configuration with a bad value makes
// Envoy refuse the bootstrap at start (it exits), and its log carries the
// plugin's critical line naming the key.
func TestEnvoy_badConfig(t *testing.T) {
	needEnvoy(t)
	up := startUpstream(t, 0)
	var log bytes.Buffer
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), envoyStartTimeout)
	defer cancel()
	e, err := envoy.Launch(ctx, envoy.Setup{
		Bootstrap: shippedBootstrap, Module: plugintest.Path(), Upstream: up.addr, Workers: 1, Wait: envoyStartTimeout,
		BaseID: 300 + os.Getpid()%1000, Log: lockedWriter{&mu, &log},
		Edit: func(b *bootstrapv3.Bootstrap) error {
			_, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error {
				return envoy.SetConfiguration(pc, `{"directives_map":{"t":["SecRuleEngine On"]},"default_directives":"t","admission":{"max_inflight":-5}}`)
			})
			return err
		},
	})
	if err == nil {
		e.Stop()
		t.Fatal("Envoy served with admission.max_inflight -5")
	}
	mu.Lock()
	out := log.String()
	mu.Unlock()
	if !strings.Contains(err.Error(), "exited") {
		t.Errorf("Launch: %v; want Envoy to exit", err)
	}
	var crit string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "][critical][wasm]") && strings.Contains(l, "admission.max_inflight") {
			crit = l
		}
	}
	if crit == "" {
		t.Fatalf("no critical wasm line naming admission.max_inflight; log:\n%s", tailLines(out, 20))
	}
	t.Logf("refused: %s", crit)
}

// accessEntry waits for the access log entry (the shipped json_format)
// of the request whose path holds id, and returns it. (Envoy replaces an
// external client's X-Request-Id.)
func accessEntry(e *envoy.Launched, id string) map[string]any {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, l := range strings.Split(e.Log(), "\n") {
			if i := strings.Index(l, "{"); i >= 0 && strings.Contains(l, id) {
				var m map[string]any
				if json.Unmarshal([]byte(l[i:]), &m) == nil && strings.Contains(fmt.Sprint(m["path"]), id) {
					return m
				}
			}
		}
	}
	return nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// waitLog waits until Envoy's log holds s.
func waitLog(e *envoy.Launched, s string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(e.Log(), s) {
			return true
		}
	}
	return false
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestEnvoy_badInput sends hostile input through the suite's Envoy
// (e2e/envoy.yaml): invalid and deeply nested JSON, an oversized header, a
// body over the limit without Content-Length, a client that resets in the
// middle of a body, and one that sends its body a byte at a time and
// gives up. Each gets a clear refusal (none reaches the upstream as a
// pass); afterwards Envoy serves, with every VM alive and no critical
// line in its log.
func TestEnvoy_badInput(t *testing.T) {
	needEnvoy(t)
	tg := need(t)
	if tg.logs == nil || !strings.HasPrefix(tg.name, "Envoy") {
		t.Skip("real Envoy only")
	}
	adminC := &http.Client{Timeout: 5 * time.Second}
	vms := func() int {
		n, err := envoy.AdminStat(adminC, tg.admin, "wasm.envoy.wasm.runtime.v8.active")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := vms()
	post := func(body io.Reader, contentType string, size int64) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, tg.base+"/submit", body)
		req.Header.Set("Content-Type", contentType)
		req.ContentLength = size
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	for _, c := range []struct {
		name, body, contentType string
		chunked                 bool
		want                    []int
	}{
		{"invalid JSON", `{"q": "unterminated`, "application/json", false, []int{400, 403}},
		{"deep JSON", deep, "application/json", false, []int{400, 403}},
		{"body over the limit, chunked", strings.Repeat("a=b&", 40000), "application/x-www-form-urlencoded", true, []int{413}},
	} {
		size := int64(len(c.body))
		var r io.Reader = strings.NewReader(c.body)
		if c.chunked {
			size, r = -1, io.MultiReader(r) // no length: sent chunked
		}
		code, err := post(r, c.contentType, size)
		if err != nil || !slices.Contains(c.want, code) {
			tg.failf(t, "%s: %d, %v; want one of %v", c.name, code, err, c.want)
		}
	}
	// A 100 KB header: Envoy's own limit (60 KiB of headers) answers 431.
	req, _ := http.NewRequest(http.MethodGet, tg.base+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	if resp, err := client.Do(req); err != nil {
		t.Errorf("oversized header: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Errorf("oversized header: %d, want 431", resp.StatusCode)
		}
	}
	// A client that resets in the middle of its body, and one that sends
	// its body a byte at a time for two seconds and then goes away.
	addr := strings.TrimPrefix(tg.base, "http://")
	for _, slow := range []bool{false, true} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /submit HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 60000\r\n\r\n")
		if slow {
			for i := 0; i < 20; i++ {
				conn.Write([]byte("a"))
				time.Sleep(100 * time.Millisecond)
			}
		} else {
			conn.Write([]byte(strings.Repeat("a=b&", 1000)))
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not a close
		}
		conn.Close()
	}
	if err := waitReady(tg.base+"/anything", 10*time.Second); err != nil {
		tg.failf(t, "after the bad input: %v", err)
	}
	if after := vms(); after != before {
		tg.failf(t, "VMs active: %d before the bad input, %d after", before, after)
	}
	if strings.Contains(tg.logs(), "][critical][") {
		tg.failf(t, "Envoy logged a critical line")
	}
}

// freePagesKept is the most free memory Envoy's allocator may keep with
// the shipped bootstraps' memory_allocator_manager (3-6 MiB measured).
const freePagesKept = 16 << 20

// pageheapFree returns pageheap_free from Envoy's /memory.
func pageheapFree(t *testing.T, admin string) int64 {
	t.Helper()
	m, err := envoy.ReadAllocator(&http.Client{Timeout: 5 * time.Second}, admin)
	if err != nil {
		t.Fatal(err)
	}
	return m.Free
}
