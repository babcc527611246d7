package wasmhost

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A local reply from the request phase goes back through the plugin's own
// response callbacks and the upstream is never contacted; one from the
// response phase bypasses the plugin (Envoy FilterManager::sendLocalReply,
// notes 2.5).
func TestStream_localReply(t *testing.T) {
	m := compilePlugin(t, "localreply", Options{})
	cases := []struct {
		phase        string
		wantUpstream int
		wantLogs     []string
	}{
		{"request_headers", 0, []string{"on_request_headers", "on_response_headers 403", "on_response_body 6 true", "on_log"}},
		{"request_body", 0, []string{"on_request_headers", "on_request_body 4 true", "on_response_headers 403", "on_response_body 6 true", "on_log"}},
		{"response_headers", 1, []string{"on_request_headers", "on_request_body 4 true", "on_response_headers 200", "on_log"}},
		{"response_body", 1, []string{"on_request_headers", "on_request_body 4 true", "on_response_headers 200", "on_response_body 2 true", "on_log"}},
	}
	for _, c := range cases {
		t.Run(c.phase, func(t *testing.T) {
			vm, rec := newVM(t, m, PluginConfig{Configuration: []byte(c.phase)})
			up := &echo{resp: &Response{Status: 200, Body: [][]byte{[]byte("ok")}}}
			r := vm.Exchange(context.Background(), &Request{Headers: post("/"), Body: [][]byte{[]byte("data")}}, up)
			if up.count() != c.wantUpstream {
				t.Errorf("upstream calls %d, want %d", up.count(), c.wantUpstream)
			}
			if c.phase == "response_body" {
				// Response headers were already sent: Envoy resets.
				if !r.Reset {
					t.Errorf("result %+v, want a reset", r)
				}
			} else if r.Status != 403 || !r.LocalReply || string(r.Body) != "denied" || hdr(r.Headers, "x-reply") != c.phase {
				t.Errorf("result %+v", r)
			}
			var got []string
			for _, l := range rec.all() {
				got = append(got, strings.TrimPrefix(l, "info: "))
			}
			if strings.Join(got, "|") != strings.Join(c.wantLogs, "|") {
				t.Errorf("callbacks %q, want %q", got, c.wantLogs)
			}
		})
	}
}

// A plugin whose on_configure returns 0 does not start; the error carries
// its critical log lines (Envoy rejects the configuration).
func TestModule_NewVM_refused(t *testing.T) {
	m := compilePlugin(t, "localreply", Options{})
	_, err := m.NewVM(context.Background(), PluginConfig{Name: "lr", RootID: "r", Configuration: []byte("refuse")})
	want := `plugin "lr" (root_id "r", vm lr-0) failed to start: proxy_on_configure returned 0: refusing to start: configuration says refuse`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

// Shared data is one map per vm_id for all VMs, with a process-wide CAS
// counter (cpp-host src/shared_data.cc): a write with a stale CAS fails.
func TestHost_sharedDataCAS(t *testing.T) {
	m := compilePlugin(t, "shared", Options{})
	a, recA := newVM(t, m, PluginConfig{Name: "a", VMID: "cap"})
	b, recB := newVM(t, m, PluginConfig{Name: "b", VMID: "cap"})
	sa := a.NewStream(StreamInfo{})
	sa.RequestHeaders(post("/"), false) // reads counter (missing) with cas 0
	sb := b.NewStream(StreamInfo{})
	sb.RequestHeaders(post("/"), false)
	sb.RequestBody(nil, true) // writes 1 unconditionally (cas 0)
	sb.End()
	sc := b.NewStream(StreamInfo{})
	sc.RequestHeaders(post("/"), false) // reads 1 with its cas
	sa.RequestBody(nil, true)           // cas 0: unconditional, writes 1 again
	sa.End()
	sc.RequestBody(nil, true) // stale cas: mismatch
	sc.End()
	if !recB.has("set counter=1 cas=0: <nil>") || !recA.has("set counter=1 cas=0: <nil>") {
		t.Errorf("logs a %q b %q", recA.all(), recB.all())
	}
	if !recB.has("set counter=2 cas=1: error status returned by host: cas mismatch") {
		t.Errorf("logs b %q, want a cas mismatch", recB.all())
	}
	v, cas, ok := m.Host().GetSharedData("cap", "counter")
	if !ok || string(v) != "1" || cas != 2 {
		t.Errorf("counter %q cas %d ok %v, want 1 cas 2", v, cas, ok)
	}
	if _, _, ok := m.Host().GetSharedData("other", "counter"); ok {
		t.Error("shared data leaked into another vm_id")
	}
	// A missing key with cas != 0 is written (SharedData::set).
	if st := m.Host().SetSharedData("cap", "new", []byte("x"), 12345); st != StatusOK {
		t.Errorf("set missing key with cas: %d", st)
	}
}

// A trap fails the whole VM (cpp-host WasmBase::fail): fail-closed gives
// 503 wasm_fail_stream to the stream and to later ones, and no more
// on_log; fail-reload rebuilds the VM after the backoff and keeps shared data.
func TestVM_trap(t *testing.T) {
	m := compilePlugin(t, "trap", Options{})
	t.Run("fail_closed", func(t *testing.T) {
		vm, rec := newVM(t, m, PluginConfig{VMID: "t1"})
		up := &echo{}
		r := vm.Exchange(context.Background(), &Request{Headers: get("/panic")}, up)
		if r.Status != 503 || r.Details != "wasm_fail_stream" || up.count() != 0 || !vm.Failed() {
			t.Fatalf("result %+v failed %v", r, vm.Failed())
		}
		if !rec.has("error: Function: proxy_on_request_headers failed: Uncaught RuntimeError: unreachable") || !rec.has("error: boom") {
			t.Errorf("logs %q", rec.all())
		}
		r = vm.Exchange(context.Background(), &Request{Headers: get("/")}, up)
		if r.Status != 503 || up.count() != 0 {
			t.Errorf("after failure: %+v", r)
		}
	})
	t.Run("fail_open", func(t *testing.T) {
		vm, _ := newVM(t, m, PluginConfig{VMID: "t2", FailurePolicy: FailOpen})
		up := &echo{}
		vm.Exchange(context.Background(), &Request{Headers: get("/panic")}, up)
		r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, up)
		if r.Status != 200 || !vm.Failed() {
			t.Errorf("after failure: %+v", r)
		}
	})
	t.Run("response_phase", func(t *testing.T) {
		vm, _ := newVM(t, m, PluginConfig{VMID: "t3"})
		up := &echo{resp: &Response{Status: 200, Headers: [][2]string{{"x-panic", "1"}}, Body: [][]byte{[]byte("x")}}}
		r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, up)
		// Response headers already went out: the 503 becomes a reset.
		if !r.Reset {
			t.Errorf("result %+v, want reset", r)
		}
	})
	t.Run("fail_reload", func(t *testing.T) {
		vm, _ := newVM(t, m, PluginConfig{VMID: "t4", FailurePolicy: FailReload, ReloadBackoff: 1500 * time.Millisecond})
		up := &echo{}
		vm.Exchange(context.Background(), &Request{Headers: get("/panic")}, up)
		if r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, up); r.Status != 503 {
			t.Errorf("inside backoff: %+v, want 503", r)
		}
		time.Sleep(1600 * time.Millisecond)
		if r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, up); r.Status != 200 {
			t.Errorf("after backoff: %+v, want 200", r)
		}
		if vm.Generation() != 2 {
			t.Errorf("generation %d, want 2", vm.Generation())
		}
		if v, _, _ := m.Host().GetSharedData("t4", "starts"); string(v) != "2" {
			t.Errorf("starts %q, want 2 (shared data kept across the reload)", v)
		}
	})
}

// Ticks come from a per-root-context timer, re-armed after each tick
// (Envoy Wasm::tickHandler); a tick may resume a stream through
// proxy_set_effective_context + proxy_continue_stream.
func TestVM_tick(t *testing.T) {
	m := compilePlugin(t, "tick", Options{})
	vm, _ := newVM(t, m, PluginConfig{})
	if p := vm.TickPeriod(); p != 20*time.Millisecond {
		t.Fatalf("tick period %v", p)
	}
	up := &echo{}
	r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, up)
	if r.Status != 200 || up.count() != 1 {
		t.Fatalf("result %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := m.Host().Metric("tick_plugin.ticks")
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks %d after 10s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Host calls other than the allowlist trap during _initialize (cpp-host
// WasmBase::startVm with the restricted callback), so the plugin fails to
// load.
func TestModule_NewVM_initHostCall(t *testing.T) {
	m := compilePlugin(t, "initcall", Options{})
	_, err := m.NewVM(context.Background(), PluginConfig{Name: "ic"})
	if err == nil || !strings.Contains(err.Error(), "_initialize failed") {
		t.Fatalf("error %v, want an _initialize failure", err)
	}
}

// poll_oneoff per Envoy version (notes 8.2, 8.4): with the #427 host Go's
// runtime aborts on its ENOSYS and the VM dies; with #533 it works.
func TestWASI_pollOneoff(t *testing.T) {
	for _, c := range []struct {
		envoy      EnvoyVersion
		wantStatus int
	}{{Envoy133, 503}, {Envoy139, 200}} {
		t.Run(string(c.envoy), func(t *testing.T) {
			m := compilePlugin(t, "gc", Options{Envoy: c.envoy})
			vm, rec := newVM(t, m, PluginConfig{})
			r := vm.Exchange(context.Background(), &Request{Headers: get("/")}, &echo{})
			if r.Status != c.wantStatus {
				t.Errorf("status %d, want %d; logs %q", r.Status, c.wantStatus, rec.all())
			}
			if c.envoy == Envoy133 && !rec.has("poll_oneoff") {
				t.Errorf("logs %q, want the runtime's poll_oneoff failure", rec.all())
			}
		})
	}
}

// A module importing a WASI function the host lacks fails to load with
// Envoy's message (cpp-host src/v8/v8.cc).
func TestCompile_missingImport(t *testing.T) {
	_, err := Compile(context.Background(), buildPlugin(t, "files"), Options{Envoy: Envoy133, CacheDir: testCacheDir()})
	if err == nil || !strings.HasPrefix(err.Error(), "Failed to load Wasm module due to a missing import: wasi_snapshot_preview1.") {
		t.Fatalf("error %v", err)
	}
	m := compilePlugin(t, "files", Options{Envoy: Envoy139})
	_, rec := newVM(t, m, PluginConfig{})
	if !rec.has("info: stat: stat /etc/hostname:") {
		t.Errorf("logs %q", rec.all())
	}
}

// A stream an earlier filter rejected never sees request headers; Envoy
// still creates its context on demand in Context::log and runs on_log,
// on_done, on_delete with no HTTP callbacks (notes 1.3).
func TestStream_End_withoutHeaders(t *testing.T) {
	m := compilePlugin(t, "localreply", Options{})
	vm, rec := newVM(t, m, PluginConfig{Configuration: []byte("none")})
	s := vm.NewStream(StreamInfo{})
	s.End()
	if got := rec.all(); len(got) != 1 || got[0] != "info: on_log" {
		t.Errorf("logs %q, want only on_log", got)
	}
}
