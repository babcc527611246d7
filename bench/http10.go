package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// HTTP10Target is the request target of the HTTP/1.0 run: an XSS probe
// (`a="><script`), as a load tester would send it to see a WAF block.
const HTTP10Target = "/?a=%22%3E%3Cscript"

// HTTP10Options is a run of HTTP/1.0 clients as ApacheBench (ab) makes
// them: each request on a connection of its own, without keep-alive, the
// answer read until the server closes the connection; Conns such clients
// at once, Requests in all.
type HTTP10Options struct {
	// Addr is the server's host:port.
	Addr string
	// Target is the request target; empty means HTTP10Target.
	Target string
	// Host is the Host header; empty means Addr.
	Host     string
	Requests int
	Conns    int
	// Timeout bounds each request, from the dial to the server's close;
	// 0 means 10 s.
	Timeout time.Duration
}

// HTTP10Result is what an HTTP/1.0 run measured.
type HTTP10Result struct {
	Target   string `json:"target"`
	Requests int    `json:"requests"`
	Conns    int    `json:"conns"`
	// Codes counts the answers by status code.
	Codes map[int]int `json:"codes"`
	// Errors are requests without a status line (a refused or reset
	// connection, a timeout before the answer); Unclosed are answered
	// requests whose connection the server had not closed when the
	// timeout ran out (a client like ab waits for that close).
	Errors   int `json:"errors"`
	Unclosed int `json:"unclosed"`
	// Seconds is the run's wall time; Rate the requests completed (closed
	// by the server) per second of it, as ab counts them.
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// Answer is the time from the dial to the status line; Close the time
	// from the dial to the server's close, what each of ab's requests
	// takes.
	Answer Latency `json:"answer_ms"`
	Close  Latency `json:"close_ms"`
}

// RunHTTP10 runs o's HTTP/1.0 clients against one server.
func RunHTTP10(ctx context.Context, o HTTP10Options) (*HTTP10Result, error) {
	if o.Requests <= 0 || o.Conns <= 0 {
		return nil, fmt.Errorf("http10: requests %d and connections %d: want both positive", o.Requests, o.Conns)
	}
	if o.Target == "" {
		o.Target = HTTP10Target
	}
	if o.Host == "" {
		o.Host = o.Addr
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	req := "GET " + o.Target + " HTTP/1.0\r\nHost: " + o.Host + "\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n\r\n"
	res := &HTTP10Result{Target: o.Target, Requests: o.Requests, Conns: min(o.Conns, o.Requests), Codes: map[int]int{}}
	var (
		next          atomic.Int64
		mu            sync.Mutex
		answers, ends []time.Duration
		wg            sync.WaitGroup
	)
	start := time.Now()
	for range res.Conns {
		wg.Go(func() {
			for next.Add(1) <= int64(o.Requests) && ctx.Err() == nil {
				code, answer, end, err := http10Request(ctx, o.Addr, req, o.Timeout)
				mu.Lock()
				switch {
				case code == 0:
					res.Errors++
				case err != nil:
					res.Codes[code]++
					res.Unclosed++
					answers = append(answers, answer)
				default:
					res.Codes[code]++
					answers = append(answers, answer)
					ends = append(ends, end)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.Rate = float64(len(ends)) / res.Seconds
	}
	res.Answer, res.Close = latencyOf(answers), latencyOf(ends)
	return res, ctx.Err()
}

// http10Request sends one request on a new connection and reads until
// the server closes it. code is 0 when no status line came; err is set
// when the connection did not end in a close within timeout.
func http10Request(ctx context.Context, addr, req string, timeout time.Duration) (code int, answer, end time.Duration, err error) {
	t0 := time.Now()
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	if err := c.SetDeadline(t0.Add(timeout)); err != nil {
		return 0, 0, 0, err
	}
	if _, err := io.WriteString(c, req); err != nil {
		return 0, 0, 0, err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, 0, 0, err
	}
	answer = time.Since(t0)
	code, err = statusOf(line)
	if err != nil {
		return 0, 0, 0, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		// A reset after the answer ends the connection too; a timeout
		// does not.
		return code, answer, 0, err
	}
	return code, answer, time.Since(t0), nil
}

// statusOf reads the code of a status line such as "HTTP/1.0 403 Forbidden".
func statusOf(line string) (int, error) {
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return 0, fmt.Errorf("http10: not a status line: %q", line)
	}
	code, err := strconv.Atoi(f[1])
	if err != nil || code < 100 || code > 999 {
		return 0, fmt.Errorf("http10: not a status line: %q", line)
	}
	return code, nil
}
