package benchreq

import (
	"fmt"
	"sort"
	"strings"

	"github.com/wafguard/wafguard/bench"
)

// Pool returns the requests `go run mage.go bench` replays (seed 1, 200
// requests, the default 70/20/10 mix), in the pool's order, for the
// per-request benchmarks. Names are the bench's classes (benign_get,
// benign_json, attack); benign requests must get 200, attacks 403. The
// Host header becomes :authority, as the drivers set it.
func Pool() ([]Request, error) {
	p, err := bench.NewPool(1, 200, bench.DefaultMix)
	if err != nil {
		return nil, fmt.Errorf("bench pool: %w", err)
	}
	out := make([]Request, 0, len(p.Requests))
	for _, r := range p.Requests {
		q := Request{Name: r.Class.String(), Method: r.Method, Path: r.Target, Body: r.Body, WantStatus: 200}
		if !r.Class.Benign() {
			q.WantStatus = 403
		}
		names := make([]string, 0, len(r.Header))
		for k := range r.Header {
			if !strings.EqualFold(k, "Host") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			for _, v := range r.Header[k] {
				q.Headers = append(q.Headers, [2]string{strings.ToLower(k), v})
			}
		}
		out = append(out, q)
	}
	return out, nil
}

// PoolClasses are the names Pool gives, in report order.
var PoolClasses = []string{"benign_get", "benign_json", "attack"}

// PoolRuns are the sub-benchmarks of the pool benchmarks: each class alone,
// then "mix", the whole pool in its order.
var PoolRuns = append(append([]string(nil), PoolClasses...), "mix")

// Select returns the requests of pool in class, in pool order; "mix"
// selects them all.
func Select(pool []Request, class string) []*Request {
	var out []*Request
	for i := range pool {
		if class == "mix" || pool[i].Name == class {
			out = append(out, &pool[i])
		}
	}
	return out
}
