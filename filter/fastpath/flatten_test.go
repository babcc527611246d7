package fastpath

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"rsc.io/binaryregexp"
	bsyntax "rsc.io/binaryregexp/syntax"
)

// TestFlatten_sameMatches: a pattern with its counted repeats flattened
// matches exactly the values the pattern matches: the CRS's byte patterns
// (which byteRx compiles flattened) over the regression-test corpus, and
// small patterns with every kind of repeat over random strings. The CRS's
// other patterns go through the automaton, which compiles them flattened
// too: TestDFA_crs compares it with the regexp.
func TestFlatten_sameMatches(t *testing.T) {
	corpus := sampled(attackCorpus(t))
	n := 0
	for _, p := range crsPatterns(t) {
		if !needsByteRegexp("(?sm)" + p) {
			continue
		}
		n++
		orig := binaryregexp.MustCompile(p)
		re, err := bsyntax.Parse(p, bsyntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		flat := binaryregexp.MustCompile(flattenByteRepeats(re).String())
		for _, v := range corpus {
			if orig.MatchString(v) != flat.MatchString(v) {
				t.Errorf("%q on %q: %v as written, %v flattened", p, v, orig.MatchString(v), flat.MatchString(v))
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d CRS byte patterns, want more", n)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range []string{`a{2,9}b`, `^(?:ab){0,6}$`, `x[a-c]{1,12}?y`, `(?:a|bc){3,8}\b`, `^.{0,5}$`, `(?i)k{4,10}`, `(a{0,5}){2,7}c`} {
		orig := regexp.MustCompile(p)
		re, err := syntaxParse(p)
		if err != nil {
			t.Fatal(err)
		}
		prog := flattenRepeats(re)
		flat := regexp.MustCompile(prog.String())
		for range 3000 {
			var b strings.Builder
			for range r.IntN(24) {
				b.WriteByte("abcxyk K-"[r.IntN(9)])
			}
			v := b.String()
			if orig.MatchString(v) != flat.MatchString(v) {
				t.Errorf("%q on %q: %v as written, %v flattened (%s)", p, v, orig.MatchString(v), flat.MatchString(v), prog)
			}
		}
	}
}

func syntaxParse(p string) (*syntax.Regexp, error) { return syntax.Parse(p, syntax.Perl) }
