package benchreq

import "fmt"

// DefaultPool returns the requests `go run mage.go bench` replays (seed 1,
// 200 requests, DefaultMix), in the pool's order, for the per-request
// benchmarks. Names are the classes (benign_get, benign_json, attack);
// benign requests must get 200, attacks 403.
func DefaultPool() ([]Request, error) {
	p, err := NewPool(1, 200, DefaultMix)
	if err != nil {
		return nil, fmt.Errorf("bench pool: %w", err)
	}
	return p.Requests, nil
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
