package fastpath

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// The tests of pm.judge, the decision Judge hands out for @pm and
// @pmFromFile: it must equal pm.matches, the library's verdict (which
// evalDirect and TestEqualToBuiltins check against Evaluate and the
// built-in), on every value.

// checkJudge compares judge with matches and with Evaluate, not
// capturing, on values; it returns how many matched.
func checkJudge(t testing.TB, name string, o *pm, values ...string) int {
	t.Helper()
	n := 0
	for _, v := range values {
		want := o.matches(v)
		if got := o.judge(v); got != want {
			t.Errorf("%s on %q: judge %v, matches %v", name, v, got, want)
		}
		if ev := o.Evaluate(&captureTx{}, v); ev != want {
			t.Errorf("%s on %q: Evaluate %v, matches %v", name, v, ev, want)
		}
		if want {
			n++
		}
	}
	return n
}

// mustPM is the operator a constructor of @pm built; an error panics.
func mustPM(op plugintypes.Operator, err error) *pm {
	if err != nil {
		panic(err)
	}
	return op.(*pm)
}

// rawPM builds @pm over patterns as given: not lower-cased, not split.
func rawPM(t testing.TB, patterns []string, dfa bool) *pm {
	t.Helper()
	return mustPM(buildPM(nil, "", patterns, dfa))
}

// judgeValues are the values the operators are judged on: the CRS
// corpus, the hand-written operator values, and case variants of both.
func judgeValues(t testing.TB) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, v := range append(corpus(t), operatorValues...) {
		for _, w := range []string{v, strings.ToUpper(v), strings.ToLower(v)} {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// TestPMJudgeCRS checks every @pm and @pmFromFile argument of the CRS, and
// the hand-written ones, on the whole corpus.
func TestPMJudgeCRS(t *testing.T) {
	root := testRoot(t)
	crs := crsArgs(t)
	values := judgeValues(t)
	var cases []opCase
	for _, op := range []string{"pm", "pmFromFile", "pmf"} {
		for _, a := range crs[op] {
			cases = append(cases, opCase{op, a})
		}
	}
	if len(cases) < 20 {
		t.Fatalf("only %d @pm and @pmFromFile in the CRS", len(cases))
	}
	for _, c := range handCases {
		if c.op == "pm" || c.op == "pmFromFile" || c.op == "pmf" {
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		var op plugintypes.Operator
		var err error
		if c.op == "pm" {
			op, err = newPM(plugintypes.OperatorOptions{Arguments: c.arg})
		} else {
			op, err = newPMFromFile(plugintypes.OperatorOptions{Arguments: c.arg, Path: []string{""}, Root: root})
		}
		if err != nil {
			continue // missing.data and the like
		}
		o := op.(*pm)
		// The patterns themselves, in both cases, are values too.
		vs := values
		for _, p := range o.patterns {
			vs = append(vs, p, strings.ToUpper(p), "x"+p+"x")
		}
		n := checkJudge(t, c.String(), o, vs...)
		if t.Failed() {
			t.FailNow()
		}
		if testing.Verbose() {
			t.Logf("%v: %d patterns, %d of %d values match", c, len(o.patterns), n, len(vs))
		}
	}
}

// TestPMJudgeEdges checks hand-written cases, each against the library
// and, where given, the expected verdict.
func TestPMJudgeEdges(t *testing.T) {
	type want int
	const (
		either want = iota // only the library's verdict is checked
		yes
		no
	)
	for _, tc := range []struct {
		args  string // @pm's argument
		raw   []string
		value string
		want  want
	}{
		// ASCII case.
		{args: "foo bar", value: "xFoOx", want: yes},
		{args: "FOO Bar", value: "foo", want: yes},
		{args: "foo", value: "FOO", want: yes},
		{raw: []string{"FoO"}, value: "fOo", want: yes},
		{args: "foo", value: "fo", want: no},
		{args: "foo", value: "f o o", want: no},
		// Only 'A'-'Z' fold: not '@' and '`', '[' and '{', nor 0x9f and
		// 0xbf (a fold by c|0x20 would make "ß" match "ÿ").
		{args: "`", value: "@", want: no},
		{args: "{", value: "[", want: no},
		{args: "ÿ", value: "ß", want: no},
		{raw: []string{"\xc3\xbf"}, value: "\xc3\x9f", want: no},
		{raw: []string{"\xc3\x9f"}, value: "\xc3\x9f", want: yes},
		{raw: []string{"\xc3\x9f"}, value: "\xc3\xbf", want: no},
		// Non-ASCII bytes match only themselves: no Unicode folding.
		{args: "s", value: "ſ", want: no},
		{args: "ſ", value: "S", want: no},
		{args: "ſ", value: "xſx", want: yes},
		{args: "é", value: "É", want: no},
		{args: "É", value: "é", want: yes}, // strings.ToLower of the argument
		{raw: []string{"\u212a"}, value: "k", want: no},
		{raw: []string{"k"}, value: "\u212a", want: no},
		{args: "\u212a", value: "\u212a", want: no}, // the argument lowers to "k"
		{args: "\u212a", value: "K", want: yes},
		{args: "ß", value: "SS", want: no},
		{args: "İ", value: "I", want: yes}, // strings.ToLower gives "i"
		{raw: []string{"İ"}, value: "i", want: no},
		// Invalid UTF-8: strings.ToLower turns it into U+FFFD; raw, it is
		// matched byte for byte.
		{args: "\xff", value: "\xff", want: no},
		{args: "\xff", value: "\ufffd", want: yes},
		{raw: []string{"\xff"}, value: "a\xffb", want: yes},
		{raw: []string{"\xff"}, value: "\xdf", want: no},
		{raw: []string{"\x00"}, value: "a\x00", want: yes},
		// Overlapping patterns, prefixes, failure links.
		{args: "abcd bc", value: "abce", want: yes},
		{args: "abcd bcx", value: "abcx", want: yes},
		{args: "abcd cde", value: "abcde", want: yes},
		{args: "abcd cde", value: "abcdf", want: yes},
		{args: "abcde cdf", value: "abcdf", want: yes},
		{args: "abcde cdf", value: "abcdx", want: no},
		{args: "a ab abc", value: "xab", want: yes},
		{args: "aab", value: "aaab", want: yes},
		{args: "aab", value: "aaaa", want: no},
		{args: "ab ba", value: "aab", want: yes},
		// A pattern equal to the whole value.
		{args: "document.cookie", value: "document.cookie", want: yes},
		{args: "document.cookie", value: "DOCUMENT.COOKIE", want: yes},
		{args: "document.cookie", value: "document.cooki", want: no},
		// Duplicates.
		{args: "foo foo FOO", value: "xfoo", want: yes},
		{args: "foo foo FOO", value: "fo", want: no},
		{raw: []string{"a", "a", "a"}, value: "bab", want: yes},
		// Shorter than the shortest pattern.
		{args: "abc defg", value: "ab", want: no},
		{args: "abc", value: "", want: no},
		// Empty patterns: the library matches the empty value, and a
		// longer one only where its prefilter finds a candidate.
		{args: "", value: "", want: yes},
		{args: "", value: "xyz", want: yes},
		{raw: []string{}, value: "", want: no},
		{raw: []string{}, value: "abc", want: no},
		{raw: []string{"", "abc"}, value: "", want: yes},
		{raw: []string{"", "abc"}, value: "xyz", want: no},
		{raw: []string{"", "abc"}, value: "xa", want: yes},
		{raw: []string{"", "abc"}, value: "xA", want: yes},
		{raw: []string{"abc", ""}, value: "c", want: no},
		{args: "foo  bar", value: "xyz"},
		{args: "foo  bar", value: "o"},
		{args: "foo  bar", value: ""},
		{raw: []string{"", "a", "b", "c", "d"}, value: "xyz", want: yes},
		{raw: []string{"", "@"}, value: "x"},
		{raw: []string{"", "@"}, value: "x@"},
		{raw: []string{"", "\xff"}, value: "x"},
		{raw: []string{"", "qz"}, value: "z"},
		{raw: []string{"", "qz"}, value: "Z"},
		{raw: []string{"", "qz"}, value: "q"},
		{raw: []string{"", "xyz"}, value: "abcdefghijklmnopqrstuvw"},
	} {
		for _, dfa := range []bool{true, false} {
			var o *pm
			name := "@pm " + tc.args
			if tc.raw != nil {
				o = rawPM(t, tc.raw, dfa)
				name = "raw " + strings.Join(tc.raw, "|")
			} else {
				o = mustPM(newPM(plugintypes.OperatorOptions{Arguments: tc.args}))
				if !dfa {
					o = rawPM(t, o.patterns, false)
				}
			}
			got := o.judge(tc.value)
			if tc.want != either && got != (tc.want == yes) {
				t.Errorf("%s (dfa %v) on %q: %v, want %v", name, dfa, tc.value, got, tc.want == yes)
			}
			checkJudge(t, name, o, tc.value)
		}
	}
}

// mapMemo is a memoizer like Coraza's: the first build under a key wins.
type mapMemo map[string]any

func (m mapMemo) Do(key string, fn func() (any, error)) (any, error) {
	if v, ok := m[key]; ok {
		return v, nil
	}
	v, err := fn()
	if err == nil {
		m[key] = v
	}
	return v, err
}

// TestPMJudgeMemoized checks a data file that changed between two
// compiles: the automaton comes from the first, the shortest length from
// the second, as with the built-in, and judge follows matches.
func TestPMJudgeMemoized(t *testing.T) {
	memo := mapMemo{}
	build := func(content string) *pm {
		root := fstest.MapFS{"f.data": {Data: []byte(content)}}
		return mustPM(newPMFromFile(plugintypes.OperatorOptions{Arguments: "f.data", Path: []string{""}, Root: root, Memoizer: memo}))
	}
	first := build("a\nxyz\n")
	second := build("abcdef\n")
	if first.set != second.set || second.minLen != 6 {
		t.Fatalf("not shared: %p %p, minLen %d", first.set, second.set, second.minLen)
	}
	for _, o := range []*pm{first, second} {
		checkJudge(t, "f.data", o, "", "a", "xa", "xyzxyz", "abcdef", "ABCDEFG", "bbbbbbb", "aaaaaaaa")
	}
	if second.judge("xa") || !second.judge("xxxxxa") || first.judge("bbb") || !first.judge("A") {
		t.Error("the verdicts do not follow the automaton and the shortest length")
	}
}

// TestPMJudgeAllocs checks that judge allocates nothing.
func TestPMJudgeAllocs(t *testing.T) {
	root := testRoot(t)
	ops := []*pm{
		mustPM(newPM(plugintypes.OperatorOptions{Arguments: "document.cookie document.domain .innerhtml <!--"})),
		mustPM(newPM(plugintypes.OperatorOptions{Arguments: "foo  bar"})),
		mustPM(newPMFromFile(plugintypes.OperatorOptions{Arguments: "php-errors.data", Path: []string{""}, Root: root})),
	}
	for _, o := range ops {
		for _, v := range []string{benchValue, "", "xdocument.cookiex", "PHP Parse error: x"} {
			if n := testing.AllocsPerRun(100, func() { o.judge(v) }); n != 0 {
				t.Errorf("%d patterns on %q: %v allocations", len(o.patterns), v, n)
			}
		}
	}
}

// TestPMJudgeRandom compares judge with matches on small random pattern
// sets over a few bytes (so that the library's prefilters, which only
// exist for a few start or rare bytes, come into play) and random values.
func TestPMJudgeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "A", "b", "B", "z", "@", "`", "[", "{", " ", "\x00", "\xc3", "\x9f", "\xbf", "\xff", "\u212a", "ſ"}
	word := func(max int) string {
		var b strings.Builder
		for n := rng.IntN(max + 1); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	matched := 0
	for range 5000 {
		patterns := make([]string, 1+rng.IntN(5))
		for i := range patterns {
			patterns[i] = word(4)
		}
		values := make([]string, 20)
		for i := range values {
			values[i] = word(12)
		}
		o := rawPM(t, patterns, rng.IntN(2) == 0)
		matched += checkJudge(t, fmt.Sprintf("raw %q", patterns), o, values...)
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d matches", matched)
}

// FuzzPMJudge compares judge with matches on fuzzed patterns and values.
// The patterns are @pm's argument (lower-cased, one per space) and, raw,
// the lines of the same text.
func FuzzPMJudge(f *testing.F) {
	for _, s := range [][2]string{
		{"foo bar", "xFOOx"}, {"abcd bc", "abce"}, {" abc", "xyz"}, {"foo  bar", "o"}, {"ÿ", "ß"},
		{"\u212a s", "ſ\u212a"}, {"a\nab\nabc\nbcd\ncd", "xabcdx"}, {"\n\xff\nqz", "z"}, {"", ""},
		{"document.cookie document.domain .innerhtml", "DOCUMENT.DOMAIN"}, {"aab", "aaab"},
	} {
		f.Add(s[0], s[1], true)
		f.Add(s[0], s[1], false)
	}
	f.Fuzz(func(t *testing.T, args, value string, dfa bool) {
		values := []string{value, strings.ToUpper(value), strings.ToLower(value), args, strings.ToUpper(args)}
		o := mustPM(newPM(plugintypes.OperatorOptions{Arguments: args}))
		if !dfa {
			o = rawPM(t, o.patterns, false)
		}
		checkJudge(t, "@pm "+args, o, values...)
		checkJudge(t, "raw lines", rawPM(t, strings.Split(args, "\n"), dfa), values...)
	})
}

// benchValue is a 200-byte value, a user agent and a query string.
var benchValue = func() string {
	s := "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0 " +
		"lang=en-US&session=3f2a9c81d4e6b7a0&redirect=%2Fhome%2Fdashboard&items=42&q=red+shoes+size+nine+and+a+half&page=3&sort=price&view=grid"
	return s[:200]
}()

// BenchmarkPMJudge compares judge with matches, the library's verdict, on
// a 200-byte value.
func BenchmarkPMJudge(b *testing.B) {
	root := testRoot(b)
	for _, c := range []struct {
		name string
		o    *pm
	}{
		{"pm-xss", mustPM(newPM(plugintypes.OperatorOptions{Arguments: "document.cookie document.domain document.querySelector document.body.appendChild document.write .parentnode .innerhtml window.location -moz-binding <!-- <![cdata["}))},
		{"pm-gzip", mustPM(newPM(plugintypes.OperatorOptions{Arguments: "gzip compress deflate br zstd"}))},
		{"pmf-unix-shell", mustPM(newPMFromFile(plugintypes.OperatorOptions{Arguments: "unix-shell.data", Path: []string{""}, Root: root}))},
		{"pmf-php-errors", mustPM(newPMFromFile(plugintypes.OperatorOptions{Arguments: "php-errors.data", Path: []string{""}, Root: root}))},
	} {
		if c.o.judge(benchValue) != c.o.matches(benchValue) {
			b.Fatalf("%s: judge and matches differ", c.name)
		}
		b.Run(c.name+"/judge", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.o.judge(benchValue)
			}
		})
		b.Run(c.name+"/matches", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.o.matches(benchValue)
			}
		})
	}
}
