package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Mismatch is a request whose answer contradicts its class.
type Mismatch struct {
	Index  int    `json:"index"`
	Kind   string `json:"kind"`
	Key    string `json:"request"`
	Status int    `json:"status"`
}

// Verification is the answer of one server to every request of a pool.
type Verification struct {
	Kinds      map[string]Outcome `json:"kinds"`
	Mismatches []Mismatch         `json:"mismatches,omitempty"`
}

// Verify sends every request of the pool once, one at a time, and checks that
// benign requests get 2xx and attacks 403. Each request has timeout.
func Verify(ctx context.Context, baseURL string, pool *Pool, timeout time.Duration) (*Verification, error) {
	client := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	v := &Verification{Kinds: map[string]Outcome{}}
	for i := range pool.Requests {
		r := &pool.Requests[i]
		req, err := httpRequest(ctx, baseURL, r)
		if err != nil {
			return nil, err
		}
		var o Outcome
		status := 0
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			o.Errors++
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
			switch {
			case status >= 200 && status < 300:
				o.Passed++
			case status == http.StatusForbidden:
				o.Blocked++
			case status == http.StatusTooManyRequests:
				o.Limited++
			default:
				o.Other++
			}
		}
		k := v.Kinds[r.Kind]
		k.add(o)
		v.Kinds[r.Kind] = k
		if ok := (r.Class.Benign() && o.Passed == 1) || (!r.Class.Benign() && o.Blocked == 1); !ok {
			v.Mismatches = append(v.Mismatches, Mismatch{Index: i, Kind: r.Kind, Key: r.Key(), Status: status})
		}
	}
	return v, nil
}

// Err returns an error naming the first mismatches, or nil.
func (v *Verification) Err(server string) error {
	if len(v.Mismatches) == 0 {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %d of the pool's requests got the wrong answer (want benign 2xx, attacks 403):", server, len(v.Mismatches))
	for i, m := range v.Mismatches {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ...")
			break
		}
		fmt.Fprintf(&b, "\n  #%d %s: status %d for %.160s", m.Index, m.Kind, m.Status, m.Key)
	}
	return fmt.Errorf("%s", b.String())
}

// httpRequest is pool request r to the server at baseURL, with the pool's
// Host.
func httpRequest(ctx context.Context, baseURL string, r *Request) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, baseURL+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	req.Header = r.HTTPHeader()
	req.Host = Host
	return req, nil
}
