package bench

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// UpstreamBody is what the upstream answers to every request: a small HTML
// page, so the response-body rules of every WAF see the same short body.
const UpstreamBody = "<!doctype html><html><head><title>shop</title></head><body><p>ok</p></body></html>\n"

// Upstream is the origin every server under test forwards to: it answers
// 200 with UpstreamBody and drains the request body.
type Upstream struct {
	URL string
	srv *http.Server
}

// StartUpstream listens on a free loopback port.
func StartUpstream() (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	body := []byte(UpstreamBody)
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = drain(r)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", length)
		_, _ = w.Write(body)
	})
	u := &Upstream{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	// Serve returns when Close shuts the server down; a broken listener
	// shows up as requests without an answer in the results.
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// Close stops the upstream.
func (u *Upstream) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return u.srv.Shutdown(ctx)
}

func drain(r *http.Request) (int64, error) {
	var buf [16 << 10]byte
	var n int64
	for {
		m, err := r.Body.Read(buf[:])
		n += int64(m)
		if err != nil {
			return n, nil
		}
	}
}
