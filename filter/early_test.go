package filter

import (
	"bytes"
	"strings"
	"testing"
)

// The upstream answers before the request ended (early.go): the response
// reaches the filter while the request body is still arriving. Nothing of
// the body may reach the upstream before phase 2 has passed all of it, and
// an attack in the part after the answer, or split across it, is blocked
// as it is without the early answer.

// earlyAttacks are request bodies in chunks with an attack in a chunk
// after the first, or split across two; the upstream answers after the
// first chunk.
var earlyAttacks = []struct {
	name        string
	contentType string
	body        [][]byte
}{
	{"form, attack after the answer", "application/x-www-form-urlencoded",
		[][]byte{[]byte("a=1&"), []byte("q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")}},
	{"form, attack split across the answer", "application/x-www-form-urlencoded",
		[][]byte{[]byte("a=1&q=%3Cscr"), []byte("ipt%3Ealert(1)%3C%2Fscript%3E")}},
	{"form, SQL injection in the third chunk", "application/x-www-form-urlencoded",
		[][]byte{[]byte("a=1&"), []byte("b=2&"), []byte("id=1%27%20UNION%20SELECT%20password%20FROM%20users--")}},
	{"JSON, attack after the answer", "application/json",
		[][]byte{[]byte(`{"a": "1", `), []byte(`"q": "<script>alert(1)</script>"}`)}},
	{"JSON, shell command split", "application/json",
		[][]byte{[]byte(`{"cmd": ";cat /e`), []byte(`tc/passwd"}`)}},
	{"multipart, attack in the second part", "multipart/form-data; boundary=XyZ",
		[][]byte{
			[]byte("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"),
			[]byte("--XyZ\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\n<script>alert(1)</script>\r\n--XyZ--\r\n"),
		}},
}

// earlyBenign are the same shapes without an attack.
var earlyBenign = []struct {
	name        string
	contentType string
	body        [][]byte
}{
	{"form", "application/x-www-form-urlencoded", [][]byte{[]byte("a=1&"), []byte("q=hello+world")}},
	{"JSON", "application/json", [][]byte{[]byte(`{"a": "1", `), []byte(`"q": "hello world"}`)}},
	{"multipart", "multipart/form-data; boundary=XyZ", [][]byte{
		[]byte("--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"),
		[]byte("--XyZ\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nhello\r\n--XyZ--\r\n"),
	}},
}

// TestEarlyResponse_CRS sends the attacks above through the shipped
// configuration, with the rule preselection on and off, and Envoy's
// allow_on_headers_stop_iteration on (as envoy/envoy.yaml ships it) and
// off: each is blocked with 403 and the upstream receives no byte of the
// body; the benign bodies reach the upstream whole and its answer reaches
// the client.
func TestEarlyResponse_CRS(t *testing.T) {
	base := shippedConfig(t)
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, preselect := range []bool{true, false} {
			for _, stopIteration := range []bool{true, false} {
				cfg := base
				if !preselect {
					cfg = strings.Replace(cfg, `"default_directives"`, `"rule_preselection": false, "default_directives"`, 1)
				}
				p, err := r.loadEnvoy(t, cfg, envoyConfig{stopIteration: stopIteration})
				if err != nil {
					t.Fatal(err)
				}
				mode := map[bool]string{true: "preselection", false: "every rule"}[preselect] +
					map[bool]string{true: ", stop iteration", false: ", stop all"}[stopIteration]
				for _, c := range earlyAttacks {
					ex := exchange{method: "POST", path: "/t", headers: earlyHeaders(c.contentType), body: c.body,
						respAfter: 1, respHeaders: [][2]string{{"content-type", "text/plain"}}, respBody: [][]byte{[]byte("ok")}}
					out := p.do(t, ex)
					if out.status != 403 || !out.localReply {
						t.Errorf("%s, %s: status %d (local reply %v), want the 403 local reply", mode, c.name, out.status, out.localReply)
					}
					if len(out.upstreamBody) != 0 {
						t.Errorf("%s, %s: the upstream received %q of the body", mode, c.name, out.upstreamBody)
					}
				}
				for _, c := range earlyBenign {
					ex := exchange{method: "POST", path: "/t", headers: earlyHeaders(c.contentType), body: c.body,
						respAfter: 1, respHeaders: [][2]string{{"content-type", "text/plain"}}, respBody: [][]byte{[]byte("ok")}}
					out := p.do(t, ex)
					if out.status != 200 || out.localReply || string(out.body) != "ok" {
						t.Errorf("%s, %s: status %d (local reply %v) body %q, want the upstream's 200 \"ok\"", mode, c.name, out.status, out.localReply, out.body)
					}
					if want := bytes.Join(c.body, nil); !bytes.Equal(out.upstreamBody, want) {
						t.Errorf("%s, %s: the upstream received %q, want %q", mode, c.name, out.upstreamBody, want)
					}
				}
				if n, ok := p.metric(metricEarlyResponses); !ok || n != uint64(len(earlyAttacks)+len(earlyBenign)) {
					t.Errorf("%s: %s = %d (defined %v), want %d", mode, metricEarlyResponses, n, ok, len(earlyAttacks)+len(earlyBenign))
				}
				p.close()
			}
		}
	})
}

func earlyHeaders(contentType string) [][2]string {
	return [][2]string{{"content-type", contentType}, {"user-agent", "Mozilla/5.0"}, {"accept", "*/*"}}
}

// TestEarlyResponse_phases runs the response's own phases on a response
// that waited for the request. A clean response passes with its body. A
// response body that leaks an SQL error is blocked in phase 4: with
// allow_on_headers_stop_iteration (as shipped) the filter holds the body
// it was given while it waited, reads it when the request ends and
// answers with the deny response, which replaces the held response;
// whether the benign request body went upstream first depends on whether
// the response ended before the request did (then the reply comes from
// the request's last callback, and the request goes no further) or after
// (then the body was released and the reply comes from the response's
// last callback). Without it Envoy holds
// the body until the headers continue, which they do once phases 2 and 3
// passed, and a block in phase 4 then resets the stream, as for any
// response when the headers are not held. A request body attack is
// blocked before the response is looked at.
func TestEarlyResponse_phases(t *testing.T) {
	body := [][]byte{[]byte(`{"item": "wool`), []byte(` jacket"}`)}
	type want struct {
		status   int
		respText string
		upstream int // the upstream got the whole request body (1), nothing (0), either (-1)
	}
	cases := []struct {
		name              string
		reqBody           [][]byte
		respBody          []byte
		stopIter, stopAll want
	}{
		{"clean response", body, htmlPage,
			want{200, string(htmlPage), 1}, want{200, string(htmlPage), 1}},
		{"SQL error leak", body, sqlErrPage,
			want{403, "blocked by the WAF", -1}, want{0, "", 1}},
		{"request attack", [][]byte{sqliJSON[:8], sqliJSON[8:]}, htmlPage,
			want{403, "blocked by the WAF", 0}, want{403, "blocked by the WAF", 0}},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, stopIteration := range []bool{true, false} {
			p, err := r.loadEnvoy(t, holdConfig(false, nil), envoyConfig{stopIteration: stopIteration})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				w := c.stopAll
				if stopIteration {
					w = c.stopIter
				}
				ex := exchange{method: "POST", headers: jsonHeaders, body: c.reqBody, respAfter: 1,
					respHeaders: htmlHeaders, respBody: [][]byte{c.respBody[:10], c.respBody[10:]}}
				out := p.do(t, ex)
				if out.status != w.status || string(out.body) != w.respText {
					t.Errorf("stop iteration %v, %s: status %d body %q, want %d %q", stopIteration, c.name, out.status, out.body, w.status, w.respText)
				}
				var wantBody []byte
				if w.upstream == 1 {
					wantBody = bytes.Join(c.reqBody, nil)
				}
				whole := bytes.Join(c.reqBody, nil)
				if w.upstream < 0 && len(out.upstreamBody) != 0 && !bytes.Equal(out.upstreamBody, whole) {
					t.Errorf("stop iteration %v, %s: the upstream received part of the body: %q", stopIteration, c.name, out.upstreamBody)
				}
				if w.upstream >= 0 && !bytes.Equal(out.upstreamBody, wantBody) {
					t.Errorf("stop iteration %v, %s: the upstream received %q, want %q", stopIteration, c.name, out.upstreamBody, wantBody)
				}
			}
			p.close()
		}
	})
}

// TestEarlyResponse_reset: a client that goes away after the upstream's
// early answer, before its body ended, leaves the upstream with no byte of
// the body, the client with no response, and no transaction open.
func TestEarlyResponse_reset(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.loadEnvoy(t, holdConfig(false, nil), envoyConfig{stopIteration: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		out := p.do(t, exchange{method: "POST", headers: jsonHeaders, body: [][]byte{benignJSON[:10], benignJSON[10:]},
			reset: true, respAfter: 1, respHeaders: htmlHeaders, respBody: [][]byte{htmlPage}})
		if out.status != 0 || len(out.upstreamBody) != 0 {
			t.Errorf("status %d, the upstream received %q; want no response and nothing", out.status, out.upstreamBody)
		}
		if v, ok := p.metric(metricActive); !ok || v != 0 {
			t.Errorf("%s = %d (defined %v), want 0: a transaction was left open", metricActive, v, ok)
		}
	})
}

// TestEarlyResponse_endsFirst: an upstream whose whole response arrives
// before the request ended. Envoy then delivers no more of the request
// to any filter and resets the upstream request, so the rest of the body
// never reaches the upstream; the filter runs phase 2 on the part that
// arrived (an attack in it is blocked, the local reply replacing the
// response) and lets the response go on after phases 3 and 4. Envoy's
// allow_on_headers_stop_iteration (as shipped) shows the filter the end
// of the response body; a response without a body shows its end on the
// headers in either mode.
func TestEarlyResponse_endsFirst(t *testing.T) {
	textHeaders := [][2]string{{"content-type", "text/plain"}}
	cases := []struct {
		name     string
		body     [][]byte
		respBody [][]byte
		status   int
		local    bool
	}{
		{"attack after the answer", [][]byte{[]byte(`{"a": "1", `), []byte(`"q": "1' OR '1'='1' --"}`)}, [][]byte{[]byte("ok")}, 200, false},
		{"attack before the answer", [][]byte{sqliJSON, []byte("  ")}, [][]byte{[]byte("ok")}, 403, true},
		{"answer without a body, attack after it", [][]byte{[]byte(`{"a": "1", `), []byte(`"q": "1' OR '1'='1' --"}`)}, nil, 200, false},
		{"answer without a body, attack before it", [][]byte{sqliJSON, []byte("  ")}, nil, 403, true},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.loadEnvoy(t, holdConfig(false, nil), envoyConfig{stopIteration: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		for _, c := range cases {
			out := p.do(t, exchange{method: "POST", headers: jsonHeaders, body: c.body,
				respAfter: 1, respEndsEarly: true, respHeaders: textHeaders, respBody: c.respBody})
			if out.status != c.status || out.localReply != c.local {
				t.Errorf("%s: status %d (local reply %v), want %d (local reply %v)", c.name, out.status, out.localReply, c.status, c.local)
			}
			if len(out.upstreamBody) != 0 {
				t.Errorf("%s: the upstream received %q", c.name, out.upstreamBody)
			}
			if !c.local && c.respBody != nil && string(out.body) != "ok" {
				t.Errorf("%s: the client got %q, want the upstream's \"ok\"", c.name, out.body)
			}
		}
		if v, ok := p.metric(metricActive); !ok || v != 0 {
			t.Errorf("%s = %d (defined %v), want 0: a transaction was left open", metricActive, v, ok)
		}
	})
}
