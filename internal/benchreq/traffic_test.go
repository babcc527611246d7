package benchreq

import (
	"bytes"
	"fmt"
	"testing"
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
		if ra.Key() != rb.Key() || !bytes.Equal(ra.Body, rb.Body) || fmt.Sprint(ra.Headers) != fmt.Sprint(rb.Headers) {
			t.Fatalf("request %d differs between two pools of the same seed", i)
		}
	}
	if got, want := a.Counts(), [NumClasses]int{70, 20, 10}; got != want {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	if _, lo, hi := a.JSONBytes(); lo < 5*1024 || hi > 25*1024 {
		t.Errorf("JSON sizes: got %d..%d bytes, want within 5..25 KB", lo, hi)
	}
	for i := range a.Requests {
		r := &a.Requests[i]
		if got := a.Lookup(r.Method, "http://127.0.0.1:8080"+r.Path); got != i {
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
