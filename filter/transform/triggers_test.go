package transform

import (
	"math/rand/v2"
	"testing"

	"github.com/wafguard/wafguard/internal/crscorpus"
)

// TestTriggers: every value without a transformation's trigger bytes comes
// back as it is, "changed" false: the regression corpus with those bytes
// deleted, and random values of the other bytes (ASCII, and multi-byte
// runes and stray bytes where the set leaves them out). The sets are not
// empty guesses either: each has a value holding its bytes that the
// transformation changes.
func TestTriggers(t *testing.T) {
	corpus, err := crscorpus.Strings()
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]string{
		"lowercase": "A", "removenulls": "a\x00", "removewhitespace": "a b", "compresswhitespace": "a  b",
		"trim": " a", "trimleft": " a", "trimright": "a ", "urldecode": "%41", "urldecodeuni": "%u0041",
		"htmlentitydecode": "&lt;", "jsdecode": `\x41`, "cssdecode": `\41`, "escapeseqdecode": `\x41`,
		"replacecomments": "a/*b*/", "removecommentschar": "a--b", "removecomments": "a#b",
		"normalizepath": "a//b", "normalisepath": "a/./b", "normalizepathwin": `a\b`, "normalisepathwin": "a. ",
		"utf8tounicode": "é", "cmdline": "A'b",
	}
	r := rand.New(rand.NewPCG(3, 4))
	for name, set := range triggers {
		fn, ok := Lookup(name)
		if !ok {
			t.Fatalf("%s: no such transformation here", name)
		}
		if v, ok := changes[name]; !ok {
			t.Errorf("%s: no value that it changes", name)
		} else if out, changed, _ := fn(v); out == v && !changed {
			t.Errorf("%s leaves %q as it is", name, v)
		}
		var other []byte // the bytes out of the set
		for c := range 256 {
			if !set[c] {
				other = append(other, byte(c))
			}
		}
		values := make([]string, 0, len(corpus)+5000)
		for _, v := range corpus {
			b := make([]byte, 0, len(v))
			for i := 0; i < len(v); i++ {
				if !set[v[i]] {
					b = append(b, v[i])
				}
			}
			values = append(values, string(b))
		}
		// Every value of one and two of the other bytes ("." alone is
		// the one path normalizePath changes without a slash).
		for _, a := range other {
			values = append(values, string([]byte{a}))
			for _, b := range other {
				values = append(values, string([]byte{a, b}))
			}
		}
		for range 5000 {
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = other[r.IntN(len(other))]
			}
			if !set[0xc3] && r.IntN(2) == 0 {
				b = append(b, "é\u00a0\u2028ſ"...)
			}
			values = append(values, string(b))
		}
		for _, v := range values {
			out, changed, err := fn(v)
			if out != v || changed || err != nil {
				t.Errorf("%s(%q) = %q, changed %v, %v: the value holds none of its trigger bytes", name, v, out, changed, err)
				break
			}
		}
	}
}
