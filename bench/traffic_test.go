package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corazahttp "github.com/corazawaf/coraza/v3/http"
	"github.com/corazawaf/coraza/v3/types"
)

func TestNewPool_deterministic(t *testing.T) {
	a, err := NewPool(7, 100, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPool(7, 100, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Requests {
		ra, rb := &a.Requests[i], &b.Requests[i]
		if ra.Key() != rb.Key() || !bytes.Equal(ra.Body, rb.Body) || fmt.Sprint(ra.Header) != fmt.Sprint(rb.Header) {
			t.Fatalf("request %d differs between two pools of the same seed", i)
		}
	}
	if got, want := a.Counts(), [numClasses]int{70, 20, 10}; got != want {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	if _, lo, hi := a.JSONBytes(); lo < 5*1024 || hi > 25*1024 {
		t.Errorf("JSON sizes: got %d..%d bytes, want within 5..25 KB", lo, hi)
	}
	for i := range a.Requests {
		r := &a.Requests[i]
		if got := a.Lookup(r.Method, "http://127.0.0.1:8080"+r.Target); got != i {
			t.Errorf("Lookup(%q): got %d, want %d", r.Key(), got, i)
		}
	}
}

func TestNewPool_badArgs(t *testing.T) {
	if _, err := NewPool(1, 5, DefaultMix); err == nil || err.Error() != "pool size: got 5, want at least 10" {
		t.Errorf("got %v", err)
	}
	if _, err := NewPool(1, 100, Mix{50, 20, 10}); err == nil || err.Error() != "mix: got 50/20/10, want three non-negative shares that add up to 100" {
		t.Errorf("got %v", err)
	}
}

// TestPool_crs sends every request of a pool through CRS in process: benign
// requests must pass and attacks must be blocked, the same check the bench
// makes against the native Coraza server before it measures anything.
func TestPool_crs(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles CRS; skipped in -short")
	}
	var matched []string
	waf, err := NewCRSWAF(func(m types.MatchedRule) {
		matched = append(matched, fmt.Sprintf("%d", m.Rule().ID()))
	})
	if err != nil {
		t.Fatal(err)
	}
	h := corazahttp.WrapHandler(waf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(UpstreamBody))
	}))
	pool, err := NewPool(1, 400, DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pool.Requests {
		r := &pool.Requests[i]
		req := httptest.NewRequest(r.Method, "http://"+Host+r.Target, bytes.NewReader(r.Body))
		req.Header = r.Header.Clone()
		req.Host = Host
		req.RemoteAddr = "127.0.0.1:40000"
		matched = matched[:0]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		blocked := rec.Code == http.StatusForbidden
		if blocked == r.Class.Benign() || (rec.Code != 200 && rec.Code != 403) {
			body := ""
			if len(r.Body) > 0 {
				body = string(r.Body[:min(len(r.Body), 200)])
			}
			t.Errorf("request %d (%s) %s: got status %d, rules %s; body %s", i, r.Kind, r.Key(), rec.Code, strings.Join(matched, ","), body)
		}
	}
}
