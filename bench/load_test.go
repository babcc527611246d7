package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// served counts the requests a test server answered, by the index of
// each in the pool (unknown: not in the pool).
type served struct {
	pool    *Pool
	mu      sync.Mutex
	n       []int
	unknown int
}

func newServed(pool *Pool) *served { return &served{pool: pool, n: make([]int, len(pool.Requests))} }

// count records r and returns its index in the pool, -1 if none.
func (s *served) count(r *http.Request) int {
	i := s.pool.Lookup(r.Method, r.URL.RequestURI())
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 {
		s.unknown++
	} else {
		s.n[i]++
	}
	return i
}

// take returns the counts so far and starts again from zero.
func (s *served) take() (n []int, unknown int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, unknown = s.n, s.unknown
	s.n, s.unknown = make([]int, len(s.pool.Requests)), 0
	return n, unknown
}

// newFakeWAF answers 403 to the pool's attacks and 200 to the rest,
// counting what it answered.
func newFakeWAF(t *testing.T, pool *Pool) (*httptest.Server, *served) {
	got := newServed(pool)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := got.count(r)
		switch {
		case i < 0:
			w.WriteHeader(http.StatusNotFound)
		case pool.Requests[i].Class == Attack:
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// replayed returns how many times a run that sent n requests sent each
// request of the pool: Load replays the pool in order from its first
// request.
func replayed(pool *Pool, n int) []int {
	c := make([]int, len(pool.Requests))
	for k := range n {
		c[k%len(c)]++
	}
	return c
}

// loadPass runs Load and, until a run answered every request of the pool
// at least once, runs it again with twice the duration, five runs at
// most: how many requests a closed loop gets through in a given time
// depends on the machine, what the tests check of the run does not. The
// counts of srv are those of the run returned.
func loadPass(t *testing.T, pool *Pool, opt LoadOptions, srv *served) *Run {
	t.Helper()
	for try := 1; ; try++ {
		run, err := Load(context.Background(), pool, opt)
		if err != nil {
			t.Fatal(err)
		}
		if run.Answered >= len(pool.Requests) {
			return run
		}
		if try == 5 {
			t.Fatalf("%d runs, the last of %s: %d answers, want a pass over the %d requests of the pool", try, opt.Duration, run.Answered, len(pool.Requests))
		}
		srv.take()
		opt.Duration *= 2
	}
}

// checkReplayed checks that the server answered each request of the run
// once, in the pool's order from its first request.
func checkReplayed(t *testing.T, pool *Pool, run *Run, srv *served) {
	t.Helper()
	got, unknown := srv.take()
	if want := replayed(pool, run.Requests); !slices.Equal(got, want) || unknown != 0 {
		t.Errorf("the server answered %v of the pool's requests (%d others), want %v: the %d requests of the run, the pool replayed in order", got, unknown, want, run.Requests)
	}
}

func TestLoad_closed(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv, got := newFakeWAF(t, pool)
	run := loadPass(t, pool, LoadOptions{BaseURL: srv.URL, Workers: 4, Duration: 300 * time.Millisecond, Timeout: 5 * time.Second}, got)
	if run.Mode != "closed" || run.Answered != run.Requests || run.Aborted != 0 || run.Throughput <= 0 {
		t.Fatalf("%s mode, answered %d of %d (%d aborted), %.0f/s: want a closed loop, all answered", run.Mode, run.Answered, run.Requests, run.Aborted, run.Throughput)
	}
	checkReplayed(t, pool, run, got)
	// What the run sent, by class and by shape.
	sent := replayed(pool, run.Requests)
	var byClass [numClasses]int
	byShape := map[string]int{}
	for i, n := range sent {
		byClass[pool.Requests[i].Class] += n
		byShape[shapeOf(&pool.Requests[i])] += n
	}
	s := &ServerResult{Closed: run}
	s.Tally()
	if s.FalsePositives != 0 || s.FalseNegatives != 0 || s.Errors != 0 {
		t.Errorf("FP %d FN %d errors %d, want 0", s.FalsePositives, s.FalseNegatives, s.Errors)
	}
	if got := run.Classes[Attack.String()]; got.Blocked != byClass[Attack] || got.Total() != byClass[Attack] {
		t.Errorf("attacks: %+v, want the %d sent all blocked", got, byClass[Attack])
	}
	for _, c := range []Class{BenignGET, BenignJSON} {
		if got := run.Classes[c.String()]; got.Passed != byClass[c] || got.Total() != byClass[c] {
			t.Errorf("%s: %+v, want the %d sent all passed", c, got, byClass[c])
		}
	}
	if run.Latency.N != run.Answered || run.Latency.P50 <= 0 {
		t.Errorf("latency %+v for %d answers", run.Latency, run.Answered)
	}
	for sh, n := range byShape {
		if l := run.Shapes[sh]; l.N != n || l.P50 <= 0 {
			t.Errorf("latency of %s %+v, want %d answers", sh, l, n)
		}
	}
	if len(run.Shapes) != len(byShape) || byShape["benign_get"] == 0 {
		t.Errorf("latency per shape %+v, want the shapes %v sent, GETs among them", run.Shapes, byShape)
	}
}

// slowPOSTs answers the pool's requests, POSTs only after slow.
func slowPOSTs(t testing.TB, pool *Pool, slow time.Duration) (*httptest.Server, *served) {
	got := newServed(pool)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.count(r)
		if r.Method == http.MethodPost {
			time.Sleep(slow)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// TestLoad_shapes: each answer's latency counts under its own shape, so a
// slow shape shows as that shape's, not as the others': each shape has
// as many latencies as the run sent requests of it, and the shape of the
// slow POSTs has them at least as slow as the server made them.
// BenchmarkLoad/shapes reports the p50 of the fast shape beside it.
func TestLoad_shapes(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 60 * time.Millisecond
	srv, got := slowPOSTs(t, pool, slow)
	run := loadPass(t, pool, LoadOptions{BaseURL: srv.URL, Workers: 4, Duration: 500 * time.Millisecond, Timeout: 5 * time.Second}, got)
	if run.Answered != run.Requests || run.Aborted != 0 {
		t.Fatalf("answered %d of %d (%d aborted), want all", run.Answered, run.Requests, run.Aborted)
	}
	checkReplayed(t, pool, run, got)
	byShape, posts := map[string]int{}, map[string]bool{}
	for i, n := range replayed(pool, run.Requests) {
		r := &pool.Requests[i]
		byShape[shapeOf(r)] += n
		posts[shapeOf(r)] = r.Method == http.MethodPost
	}
	if byShape["benign_get"] == 0 || byShape["benign_json"] == 0 || posts["benign_get"] || !posts["benign_json"] {
		t.Fatalf("the run sent %v (POSTs: %v): want benign GETs and JSON POSTs", byShape, posts)
	}
	if len(run.Shapes) != len(byShape) {
		t.Errorf("latency per shape %+v, want the shapes %v sent", run.Shapes, byShape)
	}
	for sh, n := range byShape {
		l := run.Shapes[sh]
		if l.N != n {
			t.Errorf("%s: %d latencies, want one for each of the %d sent", sh, l.N, n)
		}
		// A POST's answer came after the server's sleep: its latency,
		// and no other's, is that long or longer.
		if ms := float64(slow) / 1e6; posts[sh] && l.P50 < ms {
			t.Errorf("%s (POSTs): p50 %.1f ms, want %.0f ms or more", sh, l.P50, ms)
		}
	}
}

// TestLoad_open: an open loop paces its requests at the rate: in 1 s at
// 50/s it sends at most the 50 the pacer schedules in that second (one
// more where the second ends right on one), where a closed loop sends as
// fast as the server answers; every request it sent was answered, in the
// pool's order. How close it comes to 50 depends on the machine:
// BenchmarkLoad/open reports it.
func TestLoad_open(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv, got := newFakeWAF(t, pool)
	const rate, duration = 50, time.Second
	run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 2, Rate: rate, Duration: duration, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	most := int(rate*duration.Seconds()) + 1
	if run.Mode != "open" || run.TargetRate != rate || run.Requests < 1 || run.Requests > most {
		t.Errorf("open loop at %d/s for %s: %s mode at %.0f/s, %d requests, want 1 to %d", rate, duration, run.Mode, run.TargetRate, run.Requests, most)
	}
	if run.Answered != run.Requests || run.Aborted != 0 {
		t.Errorf("answered %d of %d (%d aborted), want all", run.Answered, run.Requests, run.Aborted)
	}
	checkReplayed(t, pool, run, got)
}

// BenchmarkLoad reports the figures of the load runs that depend on the
// machine: the p50 of the benign GETs and JSON POSTs where the server
// answers POSTs after 60 ms (shapes; the GETs' should stay well under
// it), and the requests an open loop at 50/s sends in 1 s (open; 50 on an
// idle machine).
func BenchmarkLoad(b *testing.B) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("shapes", func(b *testing.B) {
		srv, _ := slowPOSTs(b, pool, 60*time.Millisecond)
		var get, json float64
		for b.Loop() {
			run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 4, Duration: 500 * time.Millisecond, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			get, json = get+run.Shapes["benign_get"].P50, json+run.Shapes["benign_json"].P50
		}
		b.ReportMetric(get/float64(b.N), "get-p50-ms")
		b.ReportMetric(json/float64(b.N), "json-p50-ms")
	})
	b.Run("open", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		b.Cleanup(srv.Close)
		sent := 0
		for b.Loop() {
			run, err := Load(context.Background(), pool, LoadOptions{BaseURL: srv.URL, Workers: 2, Rate: 50, Duration: time.Second, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			sent += run.Requests
		}
		b.ReportMetric(float64(sent)/float64(b.N), "requests/s")
	})
}

func TestLoad_canceled(t *testing.T) {
	pool, err := NewPool(3, 20, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := newFakeWAF(t, pool)
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
