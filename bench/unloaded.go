package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Shapes are the kinds of request the unloaded run reports on: the pool's
// classes, with attacks split by where they are (the query string of a
// GET, or a JSON body).
var Shapes = []string{"benign_get", "get_attack", "benign_json", "json_attack"}

// shapeOf is the shape of a pool request.
func shapeOf(r *Request) string {
	switch {
	case r.Class == BenignGET:
		return "benign_get"
	case r.Class == BenignJSON:
		return "benign_json"
	case r.Method == http.MethodGet:
		return "get_attack"
	}
	return "json_attack"
}

// Unloaded is the latency of an idle server, one request at a time over
// one kept-alive connection, as an operator measures a proxy with nothing
// else to do: per shape, in milliseconds.
type Unloaded struct {
	Passes int                `json:"passes"`
	Shapes map[string]Latency `json:"shapes"`
	// Unexpected counts, for a WAF, answers that were not the one the
	// request's class wants (2xx for benign, 403 for attacks).
	Unexpected int `json:"unexpected"`
}

// MeasureUnloaded sends the pool passes times in order (no new pass after
// budget), one request at a time, and returns the latency per shape. waf
// says whether attacks should get 403.
func MeasureUnloaded(ctx context.Context, pool *Pool, baseURL string, waf bool, passes int, budget, timeout time.Duration) (*Unloaded, error) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	defer client.CloseIdleConnections()
	lat := map[string][]time.Duration{}
	u := &Unloaded{Shapes: map[string]Latency{}}
	deadline := time.Now().Add(budget)
	for u.Passes < passes && time.Now().Before(deadline) {
		for i := range pool.Requests {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r := &pool.Requests[i]
			req, err := httpRequest(ctx, baseURL, r)
			if err != nil {
				return nil, err
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return nil, fmt.Errorf("unloaded: %s %s: %w", r.Method, r.Path, err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("unloaded: %s %s: reading the answer: %w", r.Method, r.Path, err)
			}
			ok := resp.StatusCode/100 == 2
			if !r.Class.Benign() {
				ok = resp.StatusCode == http.StatusForbidden
			}
			if !ok && (waf || r.Class.Benign()) {
				u.Unexpected++
			}
			lat[shapeOf(r)] = append(lat[shapeOf(r)], d)
		}
		u.Passes++
	}
	for s, d := range lat {
		u.Shapes[s] = latencyOf(d)
	}
	return u, nil
}
