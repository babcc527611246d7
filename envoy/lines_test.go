package envoy

import (
	"slices"
	"strings"
	"testing"
)

// TestLineWriter: lines come out whole whatever the pieces they were
// written in; an unfinished line waits for its end; one at the bound is
// kept, one over it dropped.
func TestLineWriter(t *testing.T) {
	var got []string
	w := NewLineWriter(func(l string) { got = append(got, l) })
	for _, piece := range []string{"[info] a", "bc\n[warn", "ing] d\n\n[crit", "ical] e"} {
		if n, err := w.Write([]byte(piece)); n != len(piece) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", piece, n, err)
		}
	}
	if want := []string{"[info] abc", "[warning] d", ""}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q (the last one unfinished)", got, want)
	}
	w.Write([]byte("\n"))
	if got[len(got)-1] != "[critical] e" {
		t.Errorf("the unfinished line once ended: %q", got[len(got)-1])
	}
	got = nil
	w.Write([]byte(strings.Repeat("x", maxPartialLine)))
	w.Write([]byte("\n"))
	if len(got) != 1 || len(got[0]) != maxPartialLine {
		t.Errorf("an unfinished line at the bound: %d lines, want it whole", len(got))
	}
	got = nil
	w.Write([]byte(strings.Repeat("x", maxPartialLine+1)))
	w.Write([]byte("tail\n"))
	if !slices.Equal(got, []string{"tail"}) {
		t.Errorf("after an unfinished line over the bound: %d lines, want only %q", len(got), "tail")
	}
}
