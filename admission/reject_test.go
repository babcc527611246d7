package admission

import (
	"reflect"
	"testing"
)

func TestParseConfig_reject(t *testing.T) {
	c, err := ParseConfig([]byte(`{"max_inflight": 1, "reject_body": "{\"error\":\"busy\"}", "reject_content_type": "application/json",
		"reject_headers": {"X-Reason": "overload", "cache-control": "no-store"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.RejectBody) != `{"error":"busy"}` || c.RejectContentType != "application/json" ||
		!reflect.DeepEqual(c.RejectHeaders, [][2]string{{"x-reason", "overload"}, {"cache-control", "no-store"}}) &&
			!reflect.DeepEqual(c.RejectHeaders, [][2]string{{"cache-control", "no-store"}, {"x-reason", "overload"}}) {
		t.Errorf("got body %q, type %q, headers %q", c.RejectBody, c.RejectContentType, c.RejectHeaders)
	}
	c, err = ParseConfig([]byte(`{"reject_body": ""}`))
	if err != nil || c.RejectBody == nil || len(c.RejectBody) != 0 {
		t.Errorf(`reject_body "": got %q, %v; want an empty, non-nil body`, c.RejectBody, err)
	}
}

func TestParseConfig_rejectErrors(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"reject_body": 1}`, `admission.reject_body: got 1, want a string`},
		{`{"reject_content_type": ""}`, `admission.reject_content_type: got "", want a media type such as "application/json"`},
		{`{"reject_headers": []}`, `admission.reject_headers: got [], want an object of header names to string values`},
		{`{"reject_headers": {"x-a": 1}}`, `admission.reject_headers["x-a"]: got 1, want a string`},
		{`{"reject_headers": {"Retry-After": "5"}}`, `admission.reject_headers["Retry-After"]: the guard sets this header (use reject_content_type for the type); remove it`},
		{`{"reject_headers": {"content-length": "5"}}`, `admission.reject_headers["content-length"]: Envoy sets this header; remove it`},
		{`{"reject_headers": {"a b": "5"}}`, "admission.reject_headers: name \"a b\": want a header name of letters, digits and !#$%&'*+-.^_`|~"},
		{`{"reject_headers": {"x-a": "1\n2"}}`, `admission.reject_headers["x-a"]: value "1\n2": want printable characters without CR or LF`},
	} {
		_, err := ParseConfig([]byte(tc.raw))
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseConfig(%s):\ngot  %v\nwant %s", tc.raw, err, tc.want)
		}
	}
}

func TestGuard_customReject(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	h := &fakeHost{}
	cfg := `{"max_inflight": 1, "reject_body": "{\"error\":\"busy\"}", "reject_content_type": "application/json",
		"reject_headers": {"x-reason": "overload"}}`
	g := newTestGuard(t, cfg, p.store(""), m, h, clk)
	inner := &innerFactory{}
	a := g.Wrap(2, inner.new)
	a.OnHttpRequestHeaders(1, true)
	b := g.Wrap(3, inner.new)
	b.OnHttpRequestHeaders(1, true)
	if len(h.replies) != 1 {
		t.Fatalf("replies %+v, want one 429", h.replies)
	}
	r := h.replies[0]
	if r.status != 429 || string(r.body) != `{"error":"busy"}` || len(r.headers) != 3 || r.headers[0][0] != "retry-after" ||
		r.headers[1] != [2]string{"content-type", "application/json"} || r.headers[2] != [2]string{"x-reason", "overload"} {
		t.Errorf("reply %d %q %q", r.status, r.headers, r.body)
	}
	b.OnHttpStreamDone()
	a.OnHttpStreamDone()

	// An empty reject_body sends no body and no content-type.
	h2 := &fakeHost{}
	g2 := newTestGuard(t, `{"max_inflight": 1, "reject_body": ""}`, p.store("k2"), m, h2, clk)
	g2.Wrap(2, inner.new).OnHttpRequestHeaders(1, true)
	g2.Wrap(3, inner.new).OnHttpRequestHeaders(1, true)
	if len(h2.replies) != 1 || len(h2.replies[0].body) != 0 || len(h2.replies[0].headers) != 1 {
		t.Errorf("empty body reply %+v, want Retry-After only", h2.replies)
	}
}

// The custom 429 keeps the reject path allocation-free.
func TestGuard_customRejectAllocs(t *testing.T) {
	p, m, clk := newFakeProcess(), newFakeMetrics(), newFakeClock()
	h := &nopHost{}
	full := newTestGuard(t, `{"max_inflight": 1, "retry_after_seconds": 1, "retry_after_max_seconds": 1, "reject_body": "busy",
		"reject_headers": {"x-reason": "overload"}}`, p.store("full"), m, h, clk)
	full.acquire(-1)
	checkRejectAllocs(t, full)
}
