package bench

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// http10Server answers each connection by its request line: 403 to a
// target with "script", closing after linger (as Envoy does after a reply
// of its own, waiting for the client to close first); 200 otherwise,
// closing at once; hold never closes; drop closes without an answer.
type http10Server struct {
	ln     net.Listener
	linger time.Duration
	mu     sync.Mutex
	lines  []string
}

func startHTTP10Server(t *testing.T, linger time.Duration) *http10Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http10Server{ln: ln, linger: linger}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *http10Server) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if h == "\r\n" {
			break
		}
		line += h
	}
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
	switch {
	case strings.Contains(line, "/drop"):
		return
	case strings.Contains(line, "/hold"):
		c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nheld"))
		time.Sleep(time.Second)
	case strings.Contains(line, "script"):
		c.Write([]byte("HTTP/1.0 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
		time.Sleep(s.linger)
	default:
		c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhello"))
	}
}

func TestRunHTTP10(t *testing.T) {
	const linger = 300 * time.Millisecond
	s := startHTTP10Server(t, linger)
	addr := s.ln.Addr().String()
	ctx := context.Background()

	res, err := RunHTTP10(ctx, HTTP10Options{Addr: addr, Host: "waf.example", Requests: 20, Conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes[403] != 20 || res.Errors != 0 || res.Unclosed != 0 {
		t.Fatalf("the XSS probe: codes %v, errors %d, unclosed %d; want 20 answers 403", res.Codes, res.Errors, res.Unclosed)
	}
	// Each request lasts until the server's close: 4 at a time, 5 rounds.
	if res.Close.P50 < float64(linger.Milliseconds()) || res.Answer.P50 >= float64(linger.Milliseconds()) {
		t.Errorf("answer p50 %.1f ms, close p50 %.1f ms; want the answer before the %v linger and the close after it", res.Answer.P50, res.Close.P50, linger)
	}
	if max := 4 / linger.Seconds(); res.Rate > max || res.Rate <= 0 {
		t.Errorf("rate %.1f/s, want at most %.1f (4 clients, each request %v until the close)", res.Rate, max, linger)
	}
	s.mu.Lock()
	first := s.lines[0]
	s.mu.Unlock()
	if !strings.HasPrefix(first, "GET "+HTTP10Target+" HTTP/1.0\r\n") || !strings.Contains(first, "\r\nHost: waf.example\r\n") {
		t.Errorf("the server read %q; want an HTTP/1.0 GET of %s with the Host header", first, HTTP10Target)
	}

	res, err = RunHTTP10(ctx, HTTP10Options{Addr: addr, Target: "/ok", Requests: 3, Conns: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes[200] != 3 || res.Conns != 3 || res.Close.Max >= float64(linger.Milliseconds()) {
		t.Errorf("benign: codes %v, conns %d, close max %.1f ms; want 3 answers 200 on 3 connections, each closed at once", res.Codes, res.Conns, res.Close.Max)
	}

	res, err = RunHTTP10(ctx, HTTP10Options{Addr: addr, Target: "/drop", Requests: 2, Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 2 || len(res.Codes) != 0 || res.Rate != 0 {
		t.Errorf("no answer: errors %d, codes %v, rate %.1f; want 2 errors and nothing else", res.Errors, res.Codes, res.Rate)
	}

	res, err = RunHTTP10(ctx, HTTP10Options{Addr: addr, Target: "/hold", Requests: 1, Conns: 1, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes[200] != 1 || res.Unclosed != 1 || res.Rate != 0 {
		t.Errorf("never closed: codes %v, unclosed %d, rate %.1f; want the answer counted, the request not completed", res.Codes, res.Unclosed, res.Rate)
	}

	for _, o := range []HTTP10Options{{Addr: addr, Requests: 0, Conns: 1}, {Addr: addr, Requests: 1, Conns: 0}} {
		if _, err := RunHTTP10(ctx, o); err == nil || !strings.Contains(err.Error(), "want both positive") {
			t.Errorf("requests %d, conns %d: err %v, want a refusal", o.Requests, o.Conns, err)
		}
	}
}

func TestStatusOf(t *testing.T) {
	for in, want := range map[string]int{"HTTP/1.0 403 Forbidden\r\n": 403, "HTTP/1.1 200\r\n": 200, "garbage\r\n": 0, "HTTP/1.0 abc\r\n": 0, "": 0} {
		got, err := statusOf(in)
		if got != want || (want == 0) != (err != nil) {
			t.Errorf("statusOf(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
