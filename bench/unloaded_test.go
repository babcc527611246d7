package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureUnloaded: each block of the pool goes to every target in
// turn, each target's latency counts under its own shapes, and a target
// that stops answering is taken out while the others go on.
func TestMeasureUnloaded(t *testing.T) {
	pool, err := NewPool(3, 2*UnloadedBlock, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	serve := func(name string, postDelay time.Duration) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if r.Method == http.MethodPost {
				time.Sleep(postDelay)
			}
			if i := pool.Lookup(r.Method, r.URL.RequestURI()); i >= 0 && pool.Requests[i].Class == Attack {
				w.WriteHeader(http.StatusForbidden)
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	const slow = 30 * time.Millisecond
	fast, slowPosts := serve("fast", 0), serve("slow", slow)
	gone := serve("gone", 0)
	gone.Close()
	targets := []UnloadedTarget{{BaseURL: fast.URL, WAF: true}, {BaseURL: gone.URL, WAF: true}, {BaseURL: slowPosts.URL, WAF: true}}
	us, errs, err := MeasureUnloaded(context.Background(), pool, targets, 2, time.Minute, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || us[1] != nil {
		t.Fatalf("errors %v: want one for the closed server alone", errs)
	}
	if len(order) != 2*2*len(pool.Requests) {
		t.Fatalf("%d requests answered, want 2 passes over %d requests to 2 servers", len(order), len(pool.Requests))
	}
	// Each block of 20 requests goes to one server, then to the other.
	for i, got := range order {
		if want := []string{"fast", "slow"}[i/UnloadedBlock%2]; got != want {
			t.Fatalf("request %d went to %s, want %s: each block of the pool to every server in turn", i, got, want)
		}
	}
	ms := float64(slow) / 1e6
	for k, u := range []*Unloaded{us[0], us[2]} {
		if u.Passes != 2 || u.Unexpected != 0 {
			t.Errorf("target %d: %d passes, %d unexpected answers; want 2 and 0", k, u.Passes, u.Unexpected)
		}
	}
	if got := us[0].Shapes["benign_json"].P50; got >= ms {
		t.Errorf("fast server's JSON p50 %.1f ms, want under %.0f", got, ms)
	}
	if got := us[2].Shapes["benign_json"].P50; got < ms {
		t.Errorf("slow server's JSON p50 %.1f ms, want %.0f or more", got, ms)
	}
	if got := us[2].Shapes["benign_get"].P50; got >= ms {
		t.Errorf("slow server's GET p50 %.1f ms, want under %.0f: only its POSTs are slow", got, ms)
	}
}

// TestMeasureUnloaded_budget: a pass starts only while the budget lasts;
// with none left, no request is sent and no pass is counted.
func TestMeasureUnloaded_budget(t *testing.T) {
	pool, err := NewPool(3, UnloadedBlock, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sent.Add(1)
	}))
	t.Cleanup(srv.Close)
	targets := []UnloadedTarget{{BaseURL: srv.URL}}
	for _, c := range []struct {
		budget time.Duration
		passes int
	}{{time.Minute, 3}, {0, 0}} {
		sent.Store(0)
		us, errs, err := MeasureUnloaded(context.Background(), pool, targets, 3, c.budget, 5*time.Second)
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs[0])
		}
		if us[0].Passes != c.passes || int(sent.Load()) != c.passes*len(pool.Requests) {
			t.Errorf("budget %v: %d passes, %d requests; want %d passes of %d", c.budget, us[0].Passes, sent.Load(), c.passes, len(pool.Requests))
		}
	}
}

// TestPoolOfShapes: the pool of some classes alone holds every request of
// those classes, in pool order, and nothing else; a class that is not a
// shape, or that the pool has no request of, is an error naming it.
func TestPoolOfShapes(t *testing.T) {
	pool, err := NewPool(1, 200, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := PoolOfShapes(pool, []string{"benign_get", "json_attack"})
	if err != nil {
		t.Fatal(err)
	}
	var want []Request
	for _, r := range pool.Requests {
		if sh := shapeOf(&r); sh == "benign_get" || sh == "json_attack" {
			want = append(want, r)
		}
	}
	if len(alone.Requests) != len(want) || len(want) == len(pool.Requests) {
		t.Fatalf("%d requests alone, want %d of the pool's %d", len(alone.Requests), len(want), len(pool.Requests))
	}
	for i := range want {
		if got := alone.Requests[i]; got.Method != want[i].Method || got.Path != want[i].Path || string(got.Body) != string(want[i].Body) {
			t.Fatalf("request %d is %s %s, want %s %s: the pool's order", i, got.Method, got.Path, want[i].Method, want[i].Path)
		}
	}
	if _, err := PoolOfShapes(pool, []string{"benign_get", "get"}); err == nil || !strings.Contains(err.Error(), `"get"`) {
		t.Errorf("unknown class: error %v, want one naming \"get\"", err)
	}
	first := slices.IndexFunc(alone.Requests, func(r Request) bool { return shapeOf(&r) == "benign_get" })
	gets := &Pool{Requests: alone.Requests[first : first+1]}
	if _, err := PoolOfShapes(gets, []string{"json_attack"}); err == nil || !strings.Contains(err.Error(), `"json_attack"`) {
		t.Errorf("a class the pool lacks: error %v, want one naming it", err)
	}
}
