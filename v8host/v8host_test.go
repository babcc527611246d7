package v8host

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wafguard/wafguard/internal/plugintest"
)

// requireNode skips tb when Node 26 is not installed, or fails it with
// WAFGUARD_V8_REQUIRED set, as in CI.
func requireNode(tb testing.TB) {
	tb.Helper()
	if _, err := NodePath(); err != nil {
		if os.Getenv("WAFGUARD_V8_REQUIRED") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
}

// testPlugin builds the wasmhost test plugin wasmhost/testdata/<name> with
// the Go toolchain and returns its path, after requireNode.
func testPlugin(tb testing.TB, name string) string {
	tb.Helper()
	requireNode(tb)
	dir, err := Dir()
	if err != nil {
		tb.Fatal(err)
	}
	wasm := filepath.Join(tb.TempDir(), name+".wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", wasm, "./wasmhost/testdata/"+name)
	build.Dir = filepath.Join(dir, "..")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the test plugin %s: %v\n%s", name, err, out)
	}
	return wasm
}

// startEngine starts Node with build/main.wasm, or skips when Node is not
// installed (fails instead with WAFGUARD_V8_REQUIRED set, as in CI).
func startEngine(t *testing.T) *Engine {
	t.Helper()
	requireNode(t)
	plugintest.Read(t) // skips, or fails with WASM_REQUIRED, without the build
	e, err := Start(Options{Wasm: plugintest.Path()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

const oneRule = `{"directives_map": {"r": ["SecRuleEngine On",
  "SecRule ARGS \"@rx <script\" \"id:1,phase:1,deny,status:403,log,t:lowercase\""]},
  "default_directives": "r", "admission": {"max_inflight": 4}}`

func get(path string) Exchange {
	return Exchange{
		Headers:     [][2]string{{":method", "GET"}, {":path", path}, {":authority", "app.example"}, {":scheme", "http"}},
		RespStatus:  200,
		RespHeaders: [][2]string{{"content-type", "text/plain"}},
		RespBody:    [][]byte{[]byte("ok")},
	}
}

// TestV8_exchange: the plugin on V8 passes a benign request, blocks an
// attack with a local reply that went through its own response callbacks,
// logs the match, counts in shared metrics, and refuses a bad configuration
// with its critical log line.
func TestV8_exchange(t *testing.T) {
	e := startEngine(t)
	vm, err := e.NewVM(PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(oneRule)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := vm.Exchange(get("/?q=hello"))
	if err != nil || r.Status != 200 || r.LocalReply || !r.Upstream || string(r.Body) != "ok" {
		t.Fatalf("benign: %+v, %v", r, err)
	}
	r, err = vm.Exchange(get("/?q=%3CScript%3E"))
	if err != nil || r.Status != 403 || !r.LocalReply || r.Upstream {
		t.Fatalf("attack: %+v, %v", r, err)
	}
	logs, err := vm.Logs()
	if err != nil || !strings.Contains(strings.Join(logs, "\n"), `[id "1"]`) {
		t.Errorf("logs %q (%v), want the match of rule 1", logs, err)
	}
	m, err := e.Metrics()
	if err != nil || m["wafguard_admission_admitted"] != 2 || m["wafguard_admission_inflight"] != 0 {
		t.Errorf("metrics: admitted %d, inflight %d (%v); want 2 and 0", m["wafguard_admission_admitted"], m["wafguard_admission_inflight"], err)
	}
	if n, err := vm.MemorySize(); err != nil || n == 0 || n > 1<<30 {
		t.Errorf("linear memory %d (%v)", n, err)
	}
	_, err = e.NewVM(PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(`{"admission": {"max_inflight": -1}}`)})
	if err == nil || !strings.Contains(err.Error(), "admission.max_inflight: got -1") {
		t.Errorf("bad configuration: %v, want the critical log line", err)
	}
}

// TestV8_serve: the HTTP front in the Node process proxies what the
// plugin lets through, with the upstream's headers and body, and answers
// the rest itself, without asking the upstream.
func TestV8_serve(t *testing.T) {
	e := startEngine(t)
	vm, err := e.NewVM(PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(oneRule)})
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	var mu sync.Mutex
	var ids, protos []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mu.Lock()
		ids, protos = append(ids, r.Header.Get("x-request-id")), append(protos, r.Header.Get("x-forwarded-proto"))
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("content-type", "text/plain")
		w.Header().Set("x-upstream", r.Method)
		io.WriteString(w, "from upstream "+r.URL.Query().Get("q")+string(b))
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := vm.Serve(addr, up.URL); err != nil {
		t.Fatal(err)
	}
	if err := vm.Serve(addr, up.URL); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("a second front on %s: %v, want an error naming the address", addr, err)
	}
	for _, tc := range []struct {
		method, q, body string
		status          int
		want            string
		hits            int32
	}{
		{"GET", "hello", "", 200, "from upstream hello", 1},
		{"POST", "x", " and a body", 200, "from upstream x and a body", 2},
		{"GET", "%3Cscript%3E", "", 403, "", 2},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+"/?q="+tc.q, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.want != "" && string(b) != tc.want) || hits.Load() != tc.hits {
			t.Errorf("%s q=%s: %d %q, upstream hits %d; want %d %q, %d", tc.method, tc.q, resp.StatusCode, b, hits.Load(), tc.status, tc.want, tc.hits)
		}
		if tc.status == 200 && resp.Header.Get("x-upstream") != tc.method {
			t.Errorf("%s q=%s: upstream header %q", tc.method, tc.q, resp.Header.Get("x-upstream"))
		}
	}
	// As Envoy's HCM does, the front adds x-request-id (fresh for each
	// request) and x-forwarded-proto when the client sent none, and the
	// upstream gets them as the filter saw them.
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || len(ids[0]) != 36 || ids[0] == ids[1] || protos[0] != "http" || protos[1] != "http" {
		t.Errorf("upstream x-request-id %q, x-forwarded-proto %q: want two distinct UUIDs and http", ids, protos)
	}
}

// TestV8_serveUpstream: the front's client to the upstream frames and
// reads what Node's would: a chunked request body, HEAD, 204, a
// close-delimited body, a large streamed body, requests in turn over
// kept-alive connections and several at once; an upstream that is down
// is Envoy's 503, one that goes away mid-response a reset of the
// client's stream.
func TestV8_serveUpstream(t *testing.T) {
	e := startEngine(t)
	// No admission cap: the clients at once are not turned away.
	noCap := `{"directives_map": {"r": ["SecRuleEngine On"]}, "default_directives": "r"}`
	vm, err := e.NewVM(PluginConfig{Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(noCap)})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("x-te", strings.Join(r.TransferEncoding, ","))
			w.Write(b)
		case "/head":
			w.Header().Set("content-length", "5")
		case "/nocontent":
			w.WriteHeader(204)
		case "/close":
			// No length: the body ends with the connection.
			writeAndClose(w, "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
		case "/big":
			for i := 0; i < len(big); i += 1 << 14 {
				w.Write([]byte(big[i : i+1<<14]))
			}
		case "/cut":
			writeAndClose(w, "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
		default:
			io.WriteString(w, "ok")
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	serve := func(upstream string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if err := vm.Serve(addr, upstream); err != nil {
			t.Fatal(err)
		}
		return "http://" + addr
	}
	base := serve(up.URL)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	do := func(method, path string, body io.Reader) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, base+path, body)
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), err
	}
	for i := 0; i < 20; i++ {
		if resp, b, err := do("GET", "/", nil); err != nil || resp.StatusCode != 200 || b != "ok" {
			t.Fatalf("GET %d: %v %q %v", i, resp, b, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 GETs one at a time took %d upstream connections, want 1", n)
	}
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "a chunked ")
		io.WriteString(pw, "body")
		pw.Close()
	}()
	if resp, b, err := do("POST", "/echo", pr); err != nil || resp.StatusCode != 200 || b != "a chunked body" || resp.Header.Get("x-te") != "chunked" {
		t.Errorf("chunked POST: %v %q %v", resp, b, err)
	}
	if resp, b, err := do("POST", "/echo", strings.NewReader("sized")); err != nil || b != "sized" || resp.Header.Get("x-te") != "" {
		t.Errorf("POST with a length: %v %q %v", resp, b, err)
	}
	if resp, b, err := do("HEAD", "/head", nil); err != nil || resp.StatusCode != 200 || b != "" || resp.ContentLength != 5 {
		t.Errorf("HEAD: %v %q %v", resp, b, err)
	}
	if resp, b, err := do("GET", "/nocontent", nil); err != nil || resp.StatusCode != 204 || b != "" {
		t.Errorf("204: %v %q %v", resp, b, err)
	}
	if resp, b, err := do("GET", "/close", nil); err != nil || resp.StatusCode != 200 || b != "until the end" {
		t.Errorf("close-delimited: %v %q %v", resp, b, err)
	}
	if resp, b, err := do("GET", "/big", nil); err != nil || resp.StatusCode != 200 || b != big {
		t.Errorf("1 MiB streamed: %v, %d bytes, %v", resp, len(b), err)
	}
	if _, _, err := do("GET", "/cut", nil); err == nil {
		t.Errorf("an upstream gone mid-response: no error, want the stream reset")
	}
	if resp, b, err := do("GET", "/", nil); err != nil || b != "ok" {
		t.Errorf("GET after the others: %v %q %v", resp, b, err)
	}
	// Concurrent streams, each on a connection of its own.
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if resp, b, err := do("POST", "/echo", strings.NewReader("sized")); err != nil || resp.StatusCode != 200 || b != "sized" {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("16 clients at once: %d of 160 requests failed", n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	base = serve(down)
	if resp, b, err := do("GET", "/", nil); err != nil || resp.StatusCode != 503 || b != "upstream connect error" {
		t.Errorf("upstream down: %v %q %v, want 503", resp, b, err)
	}
}

// writeAndClose takes the connection of w over, writes raw on it and
// closes it.
func writeAndClose(w http.ResponseWriter, raw string) {
	c, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	buf.WriteString(raw)
	buf.Flush()
	c.Close()
}
