package transform

import (
	"bytes"
	"slices"
	"testing"

	"github.com/wafguard/wafguard/internal/crscorpus"
)

// TestInto: each transformation with an Into gives through it what its
// function gives (result and "changed" flag) on the CRS corpus and the
// edge cases, after a prefix it leaves as it was, whether the buffer has
// room to spare or not, and reports the input itself exactly when the
// function returns it without a copy of its own.
func TestInto(t *testing.T) {
	corpus, err := crscorpus.Strings()
	if err != nil {
		t.Fatal(err)
	}
	corpus = append(corpus, whitespaceEdgeCases...)
	corpus = append(corpus, cmdLineEdgeCases...)
	corpus = append(corpus, base64EdgeCases...)
	if len(intos) < 4 {
		t.Fatalf("%d transformations have an Into, want lowercase, removeWhitespace, cmdLine and base64Decode", len(intos))
	}
	for name, into := range intos {
		fn, ok := Lookup(name)
		if !ok {
			t.Fatalf("%s has an Into but no function", name)
		}
		for _, in := range corpus {
			want, wantChanged, err := fn(in)
			if err != nil {
				t.Fatalf("%s(%q): %v", name, in, err)
			}
			for _, dst := range [][]byte{[]byte("prefix"), append(make([]byte, 0, 4096), "prefix"...)} {
				before := slices.Clone(dst)
				out, unchanged, changed := into(dst, in)
				got := in
				if !unchanged {
					got = string(out[len(before):])
				} else if len(out) != len(before) {
					t.Errorf("%s(%q): unchanged, but the buffer grew from %d to %d bytes", name, in, len(before), len(out))
				}
				if !bytes.Equal(out[:len(before)], before) {
					t.Errorf("%s(%q): the prefix became %q", name, in, out[:len(before)])
				}
				if got != want || changed != wantChanged {
					t.Errorf("%s(%q): into gives %q changed=%v, the function %q changed=%v", name, in, got, changed, want, wantChanged)
				}
				// The function hands back its input when the Into
				// says unchanged, and only then (or when the result
				// happens to equal it).
				if unchanged && want != in {
					t.Errorf("%s(%q): unchanged, but the function gives %q", name, in, want)
				}
			}
		}
	}
}
