package faults

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// trapConfig holds one stream in flight per process, with a fast heartbeat
// so that a dead VM's slot comes back quickly.
const trapConfig = `{"directives_map": {"rules": [
  "Include @recommended-conf",
  "SecRuleEngine On",
  "SecResponseBodyAccess On",
  "SecResponseBodyMimeType text/plain",
  "SecRule ARGS \"@contains attack\" \"id:9001,phase:2,deny,status:403,log\""
]}, "default_directives": "rules",
"admission": {"max_inflight": 1, "tick_period_ms": 100, "stale_after_ms": 400}}`

// TestFaults_trapEachCallback traps the real plugin (through the host's
// PluginConfig.TrapOn, which fails the VM exactly where a guest trap would)
// in each stream callback of an admitted request on one of two VMs, under
// FAIL_RELOAD. What must hold, as in Envoy: the client of the trapped stream
// never gets the upstream's answer past a failed request phase (503 before
// the response started, a reset after); the other VM gets the process's only
// slot back within stale_after_ms + tick_period_ms, even when the dead VM
// had taken it and can no longer release it; and the trapped VM serves
// again after its reload.
func TestFaults_trapEachCallback(t *testing.T) {
	b := plugintest.Read(t)
	cases := []struct {
		export string
		// want checks what the client of the trapped stream saw.
		want func(r wasmhost.Result, upstreamCalls int32) bool
		desc string
	}{
		{"proxy_on_request_headers", func(r wasmhost.Result, n int32) bool { return r.Status == 503 && n == 0 }, "503, upstream not called"},
		{"proxy_on_request_body", func(r wasmhost.Result, n int32) bool { return r.Status == 503 && n == 0 }, "503, upstream not called"},
		{"proxy_on_response_headers", func(r wasmhost.Result, n int32) bool { return r.Status == 503 || r.Reset }, "503 or a reset"},
		{"proxy_on_response_body", func(r wasmhost.Result, n int32) bool { return r.Reset || r.Status == 503 }, "a reset (headers already sent) or 503"},
		{"proxy_on_log", func(r wasmhost.Result, n int32) bool { return r.Status == 200 && n == 1 }, "200: the response was complete"},
	}
	for _, tc := range cases {
		t.Run(tc.export, func(t *testing.T) {
			var armed atomic.Bool
			m, err := wasmhost.Compile(context.Background(), b, wasmhost.Options{
				Concurrency: 2, Host: wasmhost.NewHost(wasmhost.HostOptions{}),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			pool, err := m.NewPool(context.Background(), wasmhost.PluginConfig{
				Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(trapConfig),
				FailurePolicy: wasmhost.FailReload, ReloadBackoff: 200 * time.Millisecond,
				TrapOn: func(export string) bool { return export == tc.export && armed.CompareAndSwap(true, false) },
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			vm0, vm1 := pool.VMs()[0], pool.VMs()[1]

			var calls atomic.Int32
			up := wasmhost.UpstreamFunc(func(ctx context.Context, r *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
				calls.Add(1)
				return okUpstream.RoundTrip(ctx, r)
			})
			armed.Store(true)
			r := vm0.Exchange(context.Background(), request("POST", "/form", [][]byte{[]byte("a=1")},
				[2]string{"content-type", "application/x-www-form-urlencoded"}), up)
			if armed.Load() {
				t.Fatalf("%s was never called", tc.export)
			}
			if !tc.want(r, calls.Load()) {
				t.Errorf("trapped stream: status %d reset %v details %q, upstream calls %d; want %s",
					r.Status, r.Reset, r.Details, calls.Load(), tc.desc)
			}
			if !vm0.Failed() {
				t.Errorf("vm0 not marked failed after the trap")
			}

			// The only slot comes back to the live VM within the repair bound.
			trapped := time.Now()
			bound := 500*time.Millisecond + time.Second // stale + tick, plus scheduling slack
			for {
				r := vm1.Exchange(context.Background(), request("GET", "/", nil), okUpstream)
				if r.Status == 200 {
					break
				}
				if r.Status != 429 {
					t.Fatalf("live VM: got %d (%s), want 200 or 429 while the slot is repaired", r.Status, r.Details)
				}
				if time.Since(trapped) > bound {
					t.Fatalf("live VM still answered 429 %v after the trap (bound %v): the dead VM's slot leaked", time.Since(trapped), bound)
				}
				time.Sleep(20 * time.Millisecond)
			}

			// After the reload backoff the trapped VM serves again.
			time.Sleep(250 * time.Millisecond)
			if r := vm0.Exchange(context.Background(), request("GET", "/", nil), okUpstream); r.Status != 200 {
				t.Errorf("vm0 after reload: got %d (%s), want 200", r.Status, r.Details)
			}
			if vm0.Generation() < 2 {
				t.Errorf("vm0 generation %d, want a reload", vm0.Generation())
			}
		})
	}
}
