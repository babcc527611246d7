package fastpath

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func compileDFA(t testing.TB, expr string) (*regexp.Regexp, *dfa) {
	t.Helper()
	re, err := regexp.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	return re, newLazyDFA(expr)
}

// checkSame fails when the automaton and the regexp disagree on v.
func checkSame(t testing.TB, expr string, re *regexp.Regexp, d *dfa, v string) {
	t.Helper()
	m, ok := d.match(v)
	if !ok {
		return // the cache ran out: the caller asks the regexp
	}
	if want := re.MatchString(v); m != want {
		t.Errorf("pattern %q on %q: automaton says %v, regexp %v", expr, v, m, want)
	}
}

func TestDFA_assertions(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		values []string
	}{
		{`(?sm)^abc$`, []string{"abc", "x\nabc\ny", "xabc", "abc\n", "\nabc", "ab\nc", ""}},
		{`\bfoo\b`, []string{"foo", "a foo b", "afoo", "foo_", "foo.", "é foo", "foo\n", "xfoo bar foo"}},
		{`\Bfoo\B`, []string{"foo", "afoob", "a foo", "_foo_"}},
		{`\Aab|cd\z`, []string{"ab", "xab", "cd", "cdx", "xcd", "ab\ncd"}},
		{`(?i)kelvin|ſelect`, []string{"\u212aELVIN", "KELVIN", "SELECT", "ſelect", "select"}},
		{`(?s)a.b`, []string{"a\nb", "axb", "a\xffb", "a\u00e9b", "ab"}},
		{`a.b`, []string{"a\nb", "axb"}},
		{`^$`, []string{"", "\n", "x", "x\n\ny"}},
		{`(?m)^$`, []string{"", "\n", "x", "x\n\ny", "xy"}},
		{`[^a-z]{3}`, []string{"ab", "12", "123", "\xff\xfe\xfd", "日本語"}},
		{`\x{FFFD}`, []string{"\xff", "a", "\uFFFD"}},
		{`(a|ab)(c|bcd)(d*)`, []string{"abcd", "abc", "acd", "xx"}},
		{`x*`, []string{"", "y"}},
	} {
		re, d := compileDFA(t, tc.expr)
		for range 2 { // the second time through cached transitions
			for _, v := range tc.values {
				checkSame(t, tc.expr, re, d, v)
			}
		}
	}
}

// TestDFA_crs runs every CRS @rx pattern, through the automaton and through
// the regexp, over the regression-test corpus and benign traffic-like
// values: they must always agree.
func TestDFA_crs(t *testing.T) {
	corpus := append(sampled(attackCorpus(t)), benignValues()...)
	patterns, values, matches := 0, 0, 0
	for _, p := range crsPatterns(t) {
		expr := "(?sm)" + p
		re, err := regexp.Compile(expr)
		if err != nil {
			continue // byte patterns
		}
		d := newLazyDFA(expr)
		patterns++
		for _, v := range corpus {
			if len(v) > 4096 {
				continue
			}
			m, ok := d.match(v)
			if !ok {
				continue
			}
			values++
			want := re.MatchString(v)
			if m != want {
				t.Errorf("pattern %q on %q: automaton says %v, regexp %v", p, v, m, want)
			}
			if want {
				matches++
			}
		}
		d.reset()
	}
	t.Logf("%d patterns, %d values compared, %d matches", patterns, values, matches)
	if values == 0 || matches == 0 {
		t.Fatal("nothing compared")
	}
}

// benignValues looks like everyday request data.
func benignValues() []string {
	return []string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "en-US,en;q=0.5", "gzip, deflate, br",
		"session=4f9a8b7c6d5e; theme=dark; cart=3", "/api/orders/1234?page=2&sort=price&dir=asc",
		"fresh organic produce from local farms fresh organic produce from local farms ",
		"lot 17-4 fresh organic produce from local farms", "deliver before noon", "2026-11-29T22:25:32Z",
		"Please call me at +1 (555) 010-2233 after 5pm; the gate code is 4411.",
		"Grüße aus München – café crème, naïve résumé", "日本語のテキスト", "multi\nline\ntext\r\nwith breaks",
	}
}

// TestDFA_random compares the automaton with the regexp on random values
// drawn from an alphabet that exercises word boundaries, newlines and
// non-ASCII, for small patterns that use every assertion.
func TestDFA_random(t *testing.T) {
	alphabet := []string{"a", "b", "c", " ", "\n", "_", "-", "é", "\xff", "1", "A", "ab", "cat", "/"}
	patterns := []string{
		`(?sm)^a.*b$`, `\bcat\b`, `(?i)CAT|a\Bb`, `(?m)^\s*$`, `a{2,3}b?c`, `[[:alpha:]]+\d`, `(?s)^.{3}$`,
		`\A(a|b)*\z`, `(?i)é|É`, `(?:^|[^\w])cat(?:$|\W)`, `\x{FFFD}\x{FFFD}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range patterns {
		re, d := compileDFA(t, p)
		for range 3000 {
			var b strings.Builder
			for n := rng.IntN(12); n > 0; n-- {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			checkSame(t, p, re, d, b.String())
		}
	}
}

// TestDFA_limits fills an automaton past dfaMaxStates: it must say so
// (ok false) rather than answer, empty itself, and answer again after.
func TestDFA_limits(t *testing.T) {
	// (a|b)*a(a|b){12} needs 2^13 states for all inputs of a's and b's.
	re, d := compileDFA(t, `a[ab]{12}$`)
	rng := rand.New(rand.NewPCG(3, 4))
	fallbacks := 0
	for range 3000 {
		var b strings.Builder
		for range 40 {
			b.WriteByte("ab"[rng.IntN(2)])
		}
		m, ok := d.match(b.String())
		if !ok {
			fallbacks++
			if len(d.states) > 1 {
				t.Fatalf("after running out: %d states kept, want the cache emptied", len(d.states))
			}
			continue
		}
		if m != re.MatchString(b.String()) {
			t.Fatalf("%q: automaton %v", b.String(), m)
		}
		if len(d.states) > dfaMaxStates {
			t.Fatalf("%d states, the bound is %d", len(d.states), dfaMaxStates)
		}
	}
	if fallbacks == 0 {
		t.Error("the automaton never ran out of states")
	}
	if m, ok := d.match("xaaaaaaaaaaaaa"); !ok || !m {
		t.Errorf("after emptying: match %v ok %v, want a match", m, ok)
	}
	d.reset()
	dfaHeldMu.Lock()
	held := dfaHeld
	dfaHeldMu.Unlock()
	if held < 0 {
		t.Errorf("budget accounting went negative: %d", held)
	}
}

func FuzzDFA(f *testing.F) {
	f.Add(`\bselect\b`, "1 select x")
	f.Add(`(?i)^a.c$`, "A\nxyz\nAbC")
	f.Add(`[^\w]cat\B`, "é cats")
	f.Fuzz(func(t *testing.T, expr, v string) {
		if len(expr) > 64 || len(v) > 256 {
			return
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		if prog, err := compileProg(expr); err != nil || len(prog.Inst) > 2000 {
			return
		}
		d := newLazyDFA(expr)
		checkSame(t, expr, re, d, v)
		checkSame(t, expr, re, d, v)
		d.reset()
	})
}

// TestCompileProg_ownRunes: the runes of a compiled prog's instructions are
// one array of their own, not the parsed pattern's (which the prog would
// keep alive), and the same runes as the compiler gave.
func TestCompileProg_ownRunes(t *testing.T) {
	const expr = `(?i)ab[c-e]x|héllo\d+`
	prog, err := compileProg(expr)
	if err != nil {
		t.Fatal(err)
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	want, err := syntax.Compile(flattenRepeats(re).Simplify())
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.Inst) != len(want.Inst) {
		t.Fatalf("%d instructions, want %d", len(prog.Inst), len(want.Inst))
	}
	var first *rune
	total := 0
	for i, in := range prog.Inst {
		if !slices.Equal(in.Rune, want.Inst[i].Rune) {
			t.Errorf("instruction %d: runes %q, want %q", i, in.Rune, want.Inst[i].Rune)
		}
		if len(in.Rune) == 0 {
			continue
		}
		if first == nil {
			first = &in.Rune[0]
		}
		// In one array, one after the other.
		if got := unsafe.Pointer(&in.Rune[0]); got != unsafe.Add(unsafe.Pointer(first), total*4) {
			t.Errorf("instruction %d's runes are not in the prog's own array", i)
		}
		total += len(in.Rune)
	}
	if total == 0 {
		t.Fatal("no runes: the test shows nothing")
	}
}
