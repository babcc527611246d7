package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// newFakeWAF answers 403 to the pool's attacks and 200 to the rest.
func newFakeWAF(t *testing.T, pool *Pool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := pool.Lookup(r.Method, r.URL.RequestURI())
		switch {
		case i < 0:
			w.WriteHeader(http.StatusNotFound)
		case pool.Requests[i].Class == Attack:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoad_closed(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeWAF(t, pool)
	run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 4, Duration: 300 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if run.Answered < 20 || run.Answered != run.Requests || run.Throughput <= 0 {
		t.Fatalf("answered %d of %d, %.0f/s: want at least one pass over the pool, all answered", run.Answered, run.Requests, run.Throughput)
	}
	s := &ServerResult{Closed: run}
	s.Tally()
	if s.FalsePositives != 0 || s.FalseNegatives != 0 || s.Errors != 0 {
		t.Errorf("FP %d FN %d errors %d, want 0", s.FalsePositives, s.FalseNegatives, s.Errors)
	}
	if got := run.Classes[Attack.String()]; got.Blocked == 0 || got.Passed != 0 {
		t.Errorf("attacks: %+v, want all blocked", got)
	}
	if run.Latency.N != run.Answered || run.Latency.P50 <= 0 {
		t.Errorf("latency %+v for %d answers", run.Latency, run.Answered)
	}
	n := 0
	for _, l := range run.Shapes {
		n += l.N
	}
	if n != run.Answered || run.Shapes["benign_get"].N == 0 || run.Shapes["benign_get"].P50 <= 0 {
		t.Errorf("latency per shape %+v: want every one of the %d answers in one, GETs among them", run.Shapes, run.Answered)
	}
}

// TestLoad_shapes: each answer's latency counts under its own shape, so a
// slow shape shows as that shape's, not as the others'.
func TestLoad_shapes(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 60 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost {
			time.Sleep(slow)
		}
	}))
	t.Cleanup(srv.Close)
	run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 4, Duration: 500 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	get, json := run.Shapes["benign_get"], run.Shapes["benign_json"]
	if get.N == 0 || json.N == 0 {
		t.Fatalf("latency per shape %+v: want GETs and JSON POSTs", run.Shapes)
	}
	if ms := float64(slow) / 1e6; json.P50 < ms || get.P50 >= ms {
		t.Errorf("GET p50 %.1f ms, JSON POST p50 %.1f ms: want the POSTs alone at %.0f ms or more", get.P50, json.P50, ms)
	}
}

func TestLoad_open(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeWAF(t, pool)
	run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 2, Rate: 50, Duration: time.Second, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if run.Mode != "open" || run.Requests < 40 || run.Requests > 60 {
		t.Errorf("open loop at 50/s for 1s: %s mode, %d requests, want about 50", run.Mode, run.Requests)
	}
}

func TestLoad_canceled(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakeWAF(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Load(ctx, pool, LoadOptions{BaseURL: srv.URL, Workers: 2, Duration: time.Minute, Timeout: 5 * time.Second})
	if err == nil {
		t.Fatal("got no error after the context ended")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Load returned %s after its context ended, want promptly", d)
	}
}
