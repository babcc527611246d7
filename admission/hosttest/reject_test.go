package hosttest

import (
	"context"
	"testing"

	"github.com/wafguard/wafguard/wasmhost"
)

// TestAdmission_customReject: reject_body, reject_content_type and
// reject_headers shape the 429 the built plugin sends.
func TestAdmission_customReject(t *testing.T) {
	m := compile(t, 1)
	vm, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "reject",
		Configuration: pluginConfig(`{"max_inflight": 1, "reject_body": "{\"error\":\"busy\"}",
			"reject_content_type": "application/json", "reject_headers": {"X-Reason": "overload"}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Close)
	req := [][2]string{{":method", "GET"}, {":path", "/"}, {":authority", "app.example"}, {":scheme", "http"}}
	held := vm.NewStream(wasmhost.StreamInfo{})
	if a := held.RequestHeaders(req, true); a != wasmhost.ActionContinue {
		t.Fatalf("first stream: %v %+v", a, held.Result())
	}
	defer held.End()
	s := vm.NewStream(wasmhost.StreamInfo{})
	s.RequestHeaders(req, true)
	r := s.LocalReply()
	s.End()
	if r == nil || r.Status != 429 || string(r.Body) != `{"error":"busy"}` {
		t.Fatalf("second stream: %+v, want 429 with the custom body", r)
	}
	want := map[string]string{"content-type": "application/json", "x-reason": "overload"}
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h[0]] = h[1]
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s: got %q, want %q (headers %q)", k, got[k], v, r.Headers)
		}
	}
	if got["retry-after"] == "" {
		t.Errorf("no retry-after (headers %q)", r.Headers)
	}
}
