package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
)

// earlyUpstream answers every request the way streaming and full-duplex
// servers do: its response headers go out as soon as it has the request
// headers, then it reads the body, records it under the request's path,
// and ends the response with "ok". Under /complete/ it sends its whole
// response ("ok", with a Content-Length) before it reads the body, as a
// server that refuses a request from its headers does.
type earlyUpstream struct {
	addr string
	mu   sync.Mutex
	got  map[string]string
}

func startEarlyUpstream(t *testing.T) *earlyUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &earlyUpstream{addr: ln.Addr().String(), got: map[string]string{}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.EnableFullDuplex()
		w.Header().Set("Content-Type", "text/plain")
		complete := strings.HasPrefix(r.URL.Path, "/complete/")
		if complete {
			w.Header().Set("Content-Length", "2")
		}
		w.WriteHeader(200)
		if complete {
			w.Write([]byte("ok"))
		}
		rc.Flush()
		body, _ := io.ReadAll(r.Body) // what arrived, even when the request was reset
		u.mu.Lock()
		u.got[r.URL.Path] = string(body)
		u.mu.Unlock()
		if !complete {
			w.Write([]byte("ok"))
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

// body returns what the upstream read of the request to path, and
// whether the request reached it.
func (u *earlyUpstream) body(path string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.got[path]
	return b, ok
}

// pausedPost sends a POST over a raw connection: the headers and the
// first part of the body, a pause long enough for the upstream's early
// answer to reach Envoy, then the rest (with Content-Length, or chunked,
// one chunk per part). It returns the status line's code and the body.
func pausedPost(addr, path, contentType string, parts []string, chunked bool, pause time.Duration) (int, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	framing := "Content-Length: " + strconv.Itoa(len(strings.Join(parts, "")))
	if chunked {
		framing = "Transfer-Encoding: chunked"
	}
	head := "POST " + path + " HTTP/1.1\r\nHost: waftest.example\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n" +
		"Content-Type: " + contentType + "\r\n" + framing + "\r\nConnection: close\r\n\r\n"
	frame := func(i int) string {
		if !chunked {
			return parts[i]
		}
		s := fmt.Sprintf("%x\r\n%s\r\n", len(parts[i]), parts[i])
		if i == len(parts)-1 {
			s += "0\r\n\r\n"
		}
		return s
	}
	if _, err := io.WriteString(conn, head+frame(0)); err != nil {
		return 0, "", err
	}
	for i := 1; i < len(parts); i++ {
		time.Sleep(pause)
		if _, err := io.WriteString(conn, frame(i)); err != nil {
			break // Envoy may have answered and closed already
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestEnvoy_earlyResponse: in front of an upstream that answers before it
// reads the body, a body whose attack comes after the upstream's answer,
// or is split across it, gets 403 and the upstream receives no byte of it:
// form, JSON, multipart, with Content-Length and chunked, over HTTP/1.1
// and HTTP/2, with the rule
// preselection on (the shipped configuration) and off (a second listener),
// and with allow_on_headers_stop_iteration off (a third). A benign body
// reaches the upstream whole and its answer reaches the client.
func TestEnvoy_earlyResponse(t *testing.T) {
	needEnvoy(t)
	up := startEarlyUpstream(t)
	var everyRule, stopAll string
	e := launch(t, 2, up.addr, func(b *bootstrapv3.Bootstrap) error {
		var err error
		everyRule, err = addListener(b, func(pc *wasmv3.PluginConfig) error {
			return editConfiguration(pc, func(m map[string]any) { m["rule_preselection"] = false })
		})
		if err != nil {
			return err
		}
		stopAll, err = addListener(b, func(pc *wasmv3.PluginConfig) error {
			pc.AllowOnHeadersStopIteration = wrapperspb.Bool(false)
			return nil
		})
		return err
	}, nil)
	const multipart = "multipart/form-data; boundary=XyZ"
	attacks := []struct {
		name, contentType string
		parts             []string
		attack            string // a part of the attack that must not reach the upstream
		status            int    // 0: 403
	}{
		{"form", "application/x-www-form-urlencoded", []string{"a=1&", "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"}, "script", 0},
		{"form split", "application/x-www-form-urlencoded", []string{"a=1&q=%3Cscr", "ipt%3Ealert(1)%3C%2Fscript%3E"}, "ipt", 0},
		{"form SQL injection", "application/x-www-form-urlencoded", []string{"a=1&", "id=1%27%20UNION%20SELECT%20password%20FROM%20users--"}, "UNION", 0},
		{"form shell command", "application/x-www-form-urlencoded", []string{"a=1&", "cmd=%3Bcat%20%2Fetc%2Fpasswd"}, "passwd", 0},
		{"JSON", "application/json", []string{`{"a": "1", `, `"q": "<script>alert(1)</script>"}`}, "script", 0},
		// Coraza's JSON processor refuses a second document: 400 (rule 200002).
		{"concatenated JSON", "application/json", []string{`{"a": "1"}`, `{"q": "<script>alert(1)</script>"}`}, "script", 400},
		{"multipart", multipart, []string{"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n",
			"--XyZ\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\n<script>alert(1)</script>\r\n--XyZ--\r\n"}, "script", 0},
	}
	benign := []struct{ name, contentType, body string }{
		{"form", "application/x-www-form-urlencoded", "a=1&q=hello+world"},
		{"JSON", "application/json", `{"a": "1", "q": "hello world"}`},
	}
	n := 0
	for _, l := range []struct{ name, addr string }{{"shipped", e.Listen}, {"every rule", everyRule}, {"stop all", stopAll}} {
		for _, chunked := range []bool{false, true} {
			for _, c := range attacks {
				n++
				path := fmt.Sprintf("/early/%d", n)
				what := fmt.Sprintf("%s, %s, chunked %v", l.name, c.name, chunked)
				code, _, err := pausedPost(l.addr, path, c.contentType, c.parts, chunked, 400*time.Millisecond)
				want := c.status
				if want == 0 {
					want = 403
				}
				if err != nil || code != want {
					t.Errorf("%s: %d, %v; want %d", what, code, err, want)
				}
				if got, ok := up.body(path); ok && strings.Contains(got, c.attack) {
					t.Errorf("%s: the upstream received %q", what, got)
				}
			}
			for _, c := range benign {
				n++
				path := fmt.Sprintf("/early/%d", n)
				what := fmt.Sprintf("%s, benign %s, chunked %v", l.name, c.name, chunked)
				parts := []string{c.body[:4], c.body[4:]}
				code, body, err := pausedPost(l.addr, path, c.contentType, parts, chunked, 400*time.Millisecond)
				if err != nil || code != 200 || body != "ok" {
					t.Errorf("%s: %d %q, %v; want 200 \"ok\"", what, code, body, err)
				}
				if got, _ := up.body(path); got != c.body {
					t.Errorf("%s: the upstream received %q, want %q", what, got, c.body)
				}
			}
		}
	}
	// An upstream that sends its whole response before it reads the body:
	// Envoy then gives no more of the request to any filter and resets the
	// upstream request. The client gets the upstream's answer; no byte of
	// the attack after it reaches the upstream.
	for _, c := range attacks[:2] {
		path := fmt.Sprintf("/complete/%d", n)
		code, body, err := pausedPost(e.Listen, path, c.contentType, c.parts, false, 400*time.Millisecond)
		if err != nil || code != 200 || body != "ok" {
			t.Errorf("complete answer first, %s: %d %q, %v; want the upstream's 200 \"ok\"", c.name, code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
		if got, _ := up.body(path); strings.Contains(got, c.attack) {
			t.Errorf("complete answer first, %s: the upstream received %q", c.name, got)
		}
		n++
	}

	// The same over HTTP/2 (h2c): the body streams as DATA frames.
	h2 := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer h2.CloseIdleConnections()
	for _, c := range attacks[:3] {
		n++
		path := fmt.Sprintf("/early/%d", n)
		code, err := pausedPostH2(h2, "http://"+e.Listen+path, c.contentType, c.parts, 400*time.Millisecond)
		if err != nil || code != 403 {
			t.Errorf("HTTP/2, %s: %d, %v; want 403", c.name, code, err)
		}
		if got, ok := up.body(path); ok && strings.Contains(got, c.attack) {
			t.Errorf("HTTP/2, %s: the upstream received %q", c.name, got)
		}
	}

	// Every request took the path: the upstream answered each before its
	// body ended.
	held, err := envoy.AdminStat(&http.Client{Timeout: 5 * time.Second}, e.AdminURL(), "wasmcustom.waf_filter.tx.early_responses_env=prod")
	if err != nil || held != n {
		t.Errorf("waf_filter.tx.early_responses: %d, %v; want %d", held, err, n)
	}
}

// pausedPostH2 is pausedPost over HTTP/2: the request body is a pipe
// written in parts, with a pause after each but the last.
func pausedPostH2(tr *http2.Transport, url, contentType string, parts []string, pause time.Duration) (int, error) {
	pr, pw := io.Pipe()
	go func() {
		for i, p := range parts {
			if i > 0 {
				time.Sleep(pause)
			}
			if _, err := io.WriteString(pw, p); err != nil {
				return
			}
		}
		pw.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Mozilla/5.0")
	req.Header.Set("Accept", "*/*")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// editConfiguration changes the plugin configuration of pc as JSON.
func editConfiguration(pc *wasmv3.PluginConfig, edit func(m map[string]any)) error {
	js, err := envoy.Configuration(pc)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return err
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return envoy.SetConfiguration(pc, string(b))
}
