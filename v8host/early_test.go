package v8host

import (
	"strings"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/earlycases"
)

// TestV8_earlyCases runs the cases of an upstream that answers before the
// request has ended (internal/earlycases, the same as wasmhost's) through
// the "early" test plugin on V8: the callbacks the plugin sees, and what
// the client and the upstream get, follow Envoy's rules
// (docs/envoy-host-rules.md 2.6) as on wazero.
func TestV8_earlyCases(t *testing.T) {
	wasm := testPlugin(t, "early")
	// One idle timeout for every case: only the case that waits for it
	// waits at all.
	e, err := Start(Options{Wasm: wasm, StreamIdleTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	cases, err := earlycases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			vm, err := e.NewVM(PluginConfig{Name: "early", RootID: "early", VMID: "early", Configuration: []byte(c.Words), AllowOnHeadersStopIteration: c.StopIteration})
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Close()
			r, err := vm.Exchange(Exchange{
				Headers:    [][2]string{{":method", "POST"}, {":path", "/"}, {":authority", "localhost"}, {":scheme", "http"}},
				Body:       earlycases.Chunks(c.Body),
				RespStatus: 200, RespBody: earlycases.Chunks(c.RespBody),
				RespAfter: c.RespAfter, RespEndsEarly: c.EndsEarly,
			})
			if err != nil {
				t.Fatal(err)
			}
			logs, err := vm.Logs()
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range logs {
				lines = append(lines, strings.TrimPrefix(l, "info: "))
			}
			if strings.Join(lines, "\n") != strings.Join(c.Callbacks, "\n") {
				t.Errorf("callbacks:\n  %s\nwant:\n  %s", strings.Join(lines, "\n  "), strings.Join(c.Callbacks, "\n  "))
			}
			if r.Status != c.Status || r.LocalReply != c.LocalReply || string(r.Body) != c.Resp || string(r.UpstreamBody) != c.UpstreamBody {
				t.Errorf("client got %d (local reply %v) %q, upstream %q; want %d (%v) %q, upstream %q",
					r.Status, r.LocalReply, r.Body, r.UpstreamBody, c.Status, c.LocalReply, c.Resp, c.UpstreamBody)
			}
		})
	}
}
