package fastpath

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/corazawaf/libinjection-go"

	"github.com/wafguard/wafguard/internal/crscorpus"
)

// TestIsXSS_prefilter checks on libinjection itself the claim isXSS rests
// on: a value with neither '<' nor '=' is never an injection. It takes
// every string of the CRS's regression tests in their decoded forms
// (crscorpus), which libinjection flags often, and asks about each with
// those two bytes removed, or turned into each of the bytes that drive the tokenizer;
// then 200,000 values built from the pieces of HTML the tokenizer reacts
// to (quotes, '>', '/', '!', white space of every kind, blacklisted tag
// and attribute names, URL schemes). isXSS must give libinjection's
// answer on every string of the corpus.
func TestIsXSS_prefilter(t *testing.T) {
	lines, err := crscorpus.Strings()
	if err != nil {
		t.Fatal(err)
	}
	flagged := 0
	check := func(v string) {
		if strings.ContainsAny(v, "<=") {
			t.Fatalf("test value %q holds '<' or '='", v)
		}
		if libinjection.IsXSS(v) {
			t.Errorf("libinjection flags %q, which holds neither '<' nor '='", v)
		}
	}
	for _, l := range lines {
		if got, want := isXSS(l), libinjection.IsXSS(l); got != want {
			t.Errorf("isXSS(%q) = %v, libinjection %v", l, got, want)
		}
		if libinjection.IsXSS(l) {
			flagged++
		}
		check(strings.NewReplacer("<", "", "=", "").Replace(l))
		for _, b := range []string{" ", "\t", "\n", "\f", "\r", "\v", "\x00", ">", "/", "\"", "'", "`", "!", "-", "?", ":", "&"} {
			check(strings.NewReplacer("<", b, "=", b).Replace(l))
		}
	}
	if flagged < 500 {
		t.Fatalf("libinjection flags %d of the %d lines: the corpus is not the XSS tests", flagged, len(lines))
	}
	pieces := []string{" ", "\t", "\n", "\f", "\r", "\v", "\x00", ">", "/", "//", "\"", "'", "`", "!", "!--", "-->", "?", "&", ";", ":", "(", ")", "#",
		"script", "svg", "img", "iframe", "onload", "onerror", "ONMOUSEOVER", "style", "xmlns", "src", "href", "formaction", "xlink:href",
		"javascript:", "data:", "vbscript:", "alert(1)", "expression(", "a", "x", "1", "%3C", "&lt;", "&#60;", "\\u003c", "\xc0\xbc", "\xef\xbc\x9c"}
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i := 0; i < 200000; i++ {
		b.Reset()
		for n := 1 + r.IntN(12); n > 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		check(b.String())
	}
}
