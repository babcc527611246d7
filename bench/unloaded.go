package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
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

// PoolOfShapes returns the requests of pool whose shape is one of shapes,
// in pool order: the pool of an unloaded run of those classes alone, where
// each request follows requests of those classes, not the mix's others.
// It fails on a name that is not one of Shapes, or a shape the pool has
// no request of.
func PoolOfShapes(pool *Pool, shapes []string) (*Pool, error) {
	for _, sh := range shapes {
		if !slices.Contains(Shapes, sh) {
			return nil, fmt.Errorf("unknown class %q, want some of %s", sh, strings.Join(Shapes, ","))
		}
	}
	out := &Pool{Seed: pool.Seed}
	for _, r := range pool.Requests {
		if slices.Contains(shapes, shapeOf(&r)) {
			out.Requests = append(out.Requests, r)
		}
	}
	for _, sh := range shapes {
		if !slices.ContainsFunc(out.Requests, func(r Request) bool { return shapeOf(&r) == sh }) {
			return nil, fmt.Errorf("class %q: the pool has no request of it", sh)
		}
	}
	return out, nil
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

// UnloadedTarget is one server of an unloaded run.
type UnloadedTarget struct {
	BaseURL string
	// WAF says whether attacks should get 403.
	WAF bool
}

// UnloadedBlock is how many requests of the pool a target gets in a row
// in the unloaded run. Request by request, each target would wake from
// idle for every request with its caches cold (the pass-through host's
// GET took 0.69 ms that way against 0.27 ms alone): an operator's idle
// proxy answering requests one after the other is warm. In blocks, only
// a block's first request is cold, and a change of the machine's speed
// still reaches every target within seconds.
const UnloadedBlock = 20

// MeasureUnloaded sends the pool passes times in order (no new pass after
// budget), one request at a time, to each target in turn, UnloadedBlock
// requests at a time: a block of the pool goes to the first target, then
// to the second, and so on, so that a change of the machine's speed
// during the passes reaches every target alike and their ratios hold. It
// returns the latency per shape of each target, or the error that took
// it out: a target that fails one request gets no more, the others go
// on. ctx ending stops all.
func MeasureUnloaded(ctx context.Context, pool *Pool, targets []UnloadedTarget, passes int, budget, timeout time.Duration) ([]*Unloaded, []error, error) {
	n := len(targets)
	clients := make([]*http.Client, n)
	lat := make([]map[string][]time.Duration, n)
	out := make([]*Unloaded, n)
	errs := make([]error, n)
	for i := range targets {
		clients[i] = &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
		defer clients[i].CloseIdleConnections()
		lat[i] = map[string][]time.Duration{}
		out[i] = &Unloaded{Shapes: map[string]Latency{}}
	}
	deadline := time.Now().Add(budget)
	for pass := 0; pass < passes && time.Now().Before(deadline); pass++ {
		for b := 0; b < len(pool.Requests); b += UnloadedBlock {
			block := pool.Requests[b:min(b+UnloadedBlock, len(pool.Requests))]
			for i, t := range targets {
				for k := range block {
					if err := ctx.Err(); err != nil {
						return nil, nil, err
					}
					if errs[i] != nil {
						break
					}
					r := &block[k]
					d, status, err := unloadedRequest(ctx, clients[i], t.BaseURL, r)
					if err != nil {
						errs[i] = err
						break
					}
					ok := status/100 == 2
					if !r.Class.Benign() {
						ok = status == http.StatusForbidden
					}
					if !ok && (t.WAF || r.Class.Benign()) {
						out[i].Unexpected++
					}
					lat[i][shapeOf(r)] = append(lat[i][shapeOf(r)], d)
				}
			}
		}
		for i := range targets {
			if errs[i] == nil {
				out[i].Passes++
			}
		}
	}
	for i := range targets {
		if errs[i] != nil {
			out[i] = nil
			continue
		}
		for s, d := range lat[i] {
			out[i].Shapes[s] = latencyOf(d)
		}
	}
	return out, errs, nil
}

// unloadedRequest sends r and reads the whole answer: its latency and
// status.
func unloadedRequest(ctx context.Context, client *http.Client, baseURL string, r *Request) (time.Duration, int, error) {
	req, err := httpRequest(ctx, baseURL, r)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("unloaded: %s %s: %w", r.Method, r.Path, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("unloaded: %s %s: reading the answer: %w", r.Method, r.Path, err)
	}
	return d, resp.StatusCode, nil
}
