package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWAF_http10 sends HTTP/1.0 requests as load testers (ab) and old
// clients do, one per connection, and reads each answer to the close.
// The suite's Envoy accepts HTTP/1.0 (accept_http_10, as the shipped
// bootstraps do), so the WAF inspects them: a benign GET and POST pass,
// the XSS probe of ab's usual test and an SQL injection in a form body
// get the WAF's 403. Through Envoy, an HTTP/1.0 request without a Host
// header gets Envoy's own 400 (missing_host_header) and reaches no
// upstream.
func TestWAF_http10(t *testing.T) {
	tg := need(t)
	addr := strings.TrimPrefix(tg.base, "http://")
	head := "Host: e2e\r\nUser-Agent: ApacheBench/2.3\r\nAccept: */*\r\n"
	form := "user=" + "admin%27+UNION+SELECT+password+FROM+users+--+" + "&pass=x"
	cases := []struct {
		name, req string
		want      int
	}{
		{"benign GET", "GET /anything/http10?q=red+shoes HTTP/1.0\r\n" + head + "\r\n", http.StatusOK},
		{"benign POST", "POST /anything/http10 HTTP/1.0\r\n" + head + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 12\r\n\r\nname=alice&a", http.StatusOK},
		{"ab's XSS probe", "GET /?a=%22%3E%3Cscript HTTP/1.0\r\n" + head + "\r\n", http.StatusForbidden},
		{"SQL injection in a form body", fmt.Sprintf("POST /anything/login HTTP/1.0\r\n%sContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s", head, len(form), form), http.StatusForbidden},
	}
	if tg.logs != nil && strings.HasPrefix(tg.name, "Envoy") {
		cases = append(cases, struct {
			name, req string
			want      int
		}{"no Host header", "GET /anything/http10-nohost HTTP/1.0\r\nUser-Agent: ApacheBench/2.3\r\n\r\n", http.StatusBadRequest})
	}
	for _, c := range cases {
		proto, code, took, err := http10(addr, c.req)
		switch {
		case err != nil:
			tg.failf(t, "%s: %v", c.name, err)
		case code != c.want:
			tg.failf(t, "%s: %d, want %d", c.name, code, c.want)
		case proto != "HTTP/1.0" && proto != "HTTP/1.1":
			t.Errorf("%s: answered in %q", c.name, proto)
		default:
			t.Logf("%s: %s %d, the connection closed after %s", c.name, proto, code, took.Round(time.Millisecond))
		}
	}
}

// http10 sends one raw request on a connection of its own and reads the
// answer until the server closes, as an HTTP/1.0 client without
// keep-alive does; it returns the status line's protocol and code, and
// how long the close took from the request.
func http10(addr, req string) (string, int, time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", 0, 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	t0 := time.Now()
	if _, err := io.WriteString(conn, req); err != nil {
		return "", 0, 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", 0, 0, fmt.Errorf("status line: %w", err)
	}
	var proto string
	var code int
	if _, err := fmt.Sscanf(line, "%s %d", &proto, &code); err != nil {
		return "", 0, 0, fmt.Errorf("status line %q: %w", line, err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return proto, code, 0, fmt.Errorf("reading to the close: %w", err)
	}
	return proto, code, time.Since(t0), nil
}
