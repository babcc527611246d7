package fastpath

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/filter/rules"
)

// crsPatterns returns the argument of every @rx in the CRS rule files.
func crsPatterns(t testing.TB) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(rules.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".conf") {
			return err
		}
		b, err := fs.ReadFile(rules.FS, path)
		if err != nil {
			return err
		}
		s := string(b)
		for {
			i := strings.Index(s, `"@rx `)
			if i < 0 {
				break
			}
			s = s[i+5:]
			var p strings.Builder
			j := 0
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && s[j+1] == '"' {
					j++
				}
				p.WriteByte(s[j])
			}
			out = append(out, p.String())
			s = s[j:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d @rx patterns in the CRS, want more", len(out))
	}
	return out
}

// attackCorpus returns the strings of the CRS regression tests (payloads,
// URIs, header values) in a few decoded forms, plus hand-written edge
// cases (internal/crscorpus).
func attackCorpus(t testing.TB) []string {
	t.Helper()
	return corpus(t)
}

// sampled is every fourth value of corpus, which keeps the corpus tests
// under a minute on a busy machine, or all of them with
// FASTPATH_FULL_CORPUS=1.
func sampled(corpus []string) []string {
	if os.Getenv("FASTPATH_FULL_CORPUS") != "" {
		return corpus
	}
	var part []string
	for i := 0; i < len(corpus); i += 4 {
		part = append(part, corpus[i])
	}
	return part
}

// TestLiteralFilterNeverRejectsAMatch runs every CRS @rx pattern over the
// regression-test corpus: whenever the regexp matches a value, the literal
// filter must let the value through.
func TestLiteralFilterNeverRejectsAMatch(t *testing.T) {
	patterns := crsPatterns(t)
	corpus := sampled(attackCorpus(t))
	// Non-ASCII variants: other runes around and inside the value, and the
	// two runes that fold to ASCII letters in place of k and s.
	folds := strings.NewReplacer("k", "\u212a", "K", "\u212a", "s", "\u017f", "S", "\u017f")
	for _, v := range corpus[:len(corpus)/2] {
		corpus = append(corpus, "\u00e9"+v+"\xff", strings.ReplaceAll(v, " ", " \u00a0"), folds.Replace(v))
	}
	// filtered: patterns with a literal filter; hits: (pattern, value)
	// pairs the regexp matches, hitPatterns: filtered patterns that match
	// at least one value; rejected: pairs the filter rejects, wrong: those
	// of them the regexp matches.
	filtered, hits, hitPatterns, rejected, wrong := 0, 0, 0, 0, 0
	for _, p := range patterns {
		expr := "(?sm)" + p
		re, err := regexp.Compile(expr)
		if err != nil {
			continue // byte patterns (binaryregexp) and the like
		}
		parsed, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		f := newLiteralFilter(parsed)
		if f == nil {
			continue
		}
		filtered++
		hit := false
		for _, v := range corpus {
			if f.mayMatch(v) {
				if re.MatchString(v) {
					hits++
					hit = true
				}
				continue
			}
			rejected++
			if re.MatchString(v) {
				hits++
				hit = true
				wrong++
				t.Errorf("pattern %q matches %q, but the filter (%q) rejects it", p, v, f.lits)
			}
		}
		if hit {
			hitPatterns++
		}
	}
	t.Logf("%d patterns, %d with a literal filter (%d of them match a value); %d corpus values; %d matches, %d rejections, %d wrong",
		len(patterns), filtered, hitPatterns, len(corpus), hits, rejected, wrong)
	// The check above proves something only for values a regexp matches
	// (a filter could have rejected them) and only where the filters
	// reject values (a filter that lets everything through is trivially
	// right). On the sampled corpus the CRS 4.25 gives 271 filtered
	// patterns, 216 of them matching a value, 67992 matches and 2595250
	// rejections (the full corpus more); these minimums leave room for
	// changes of the corpus.
	const minFiltered, minHitPatterns, minHits, minRejected = 250, 200, 50000, 2000000
	if filtered < minFiltered {
		t.Errorf("%d patterns with a literal filter, want at least %d", filtered, minFiltered)
	}
	if hitPatterns < minHitPatterns {
		t.Errorf("%d filtered patterns match a corpus value, want at least %d", hitPatterns, minHitPatterns)
	}
	if hits < minHits {
		t.Errorf("%d (pattern, value) pairs match, want at least %d", hits, minHits)
	}
	if rejected < minRejected {
		t.Errorf("the filters rejected %d (pattern, value) pairs, want at least %d", rejected, minRejected)
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string // nil: no filter
	}{
		{`(?i)union.*select`, []string{"select"}}, // the longer one
		{`abc|de`, []string{"abc", "de"}},
		{`a*`, nil},
		{`(?:foo)?bar`, []string{"bar"}},
		{`x{0,3}`, nil},
		{`(?i)[Ss]leep\(`, []string{"sleep("}}, // a run: [Ss] then leep\(
		// A run through a repeat and classes: every match holds one of
		// these, where "." alone was the best piece.
		{`(?:^|[/;\x5c])\.{2,3}[/;\x5c]`, []string{"../", "..;", "..\\"}},
		// Gaps: a value with neither quote may only match "bus".
		{`(?i)b["']*u["']*s`, []string{"\"", "'", "bus"}},
		// A gap of letters is never taken as empty.
		{`foo[a-z]*bar`, []string{"foo"}},
		{`(?i)select\s+from`, []string{"select"}},
		// Spread over the alternation: the words whole, where each
		// piece alone gives a letter or part of a word.
		{`\ba(?:dduser|lias)\b|b(?:ash|zip)[ ;]`, []string{"adduser", "alias", "bash", "bzip"}},
		{`^$`, nil},
		{`(?i)k`, []string{"k"}}, // the Kelvin sign: mayMatch lets it through
		{`foo|.*`, nil},
	} {
		parsed, err := syntax.Parse("(?sm)"+tc.expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		f := newLiteralFilter(parsed)
		var got []string
		if f != nil {
			got = f.lits
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestMayMatch(t *testing.T) {
	parsed, _ := syntax.Parse(`(?i)union\s+select`, syntax.Perl)
	f := newLiteralFilter(parsed)
	if !regexp.MustCompile(`(?i)union\s+select`).MatchString("union \u017felect") {
		t.Fatal("the long s should match s")
	}
	for v, want := range map[string]bool{
		"1 UNION SELECT": true, "SeLeCt": true, "nothing here": false, "": false,
		"unio": false, "caf\u00e9": false, "\u00e9 union \u00e9select": true,
		"\xff\xfeSELECT\xe2\x84": true, "\xe2\x84": false, "\xc5": false,
		// The runes that fold to ASCII letters: the regexp matches these.
		"union \u017felect": true, "union \u017fELECT": true,
	} {
		if got := f.mayMatch(v); got != want {
			t.Errorf("mayMatch(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestNeedsByteRegexp(t *testing.T) {
	for expr, want := range map[string]bool{
		`abc`: false, `\x41`: false, `\xff`: true, `[\x80-\xff]`: true, `\x{bc}`: true, `\\xff`: true, `\x{41}`: false, `\xzz`: false,
	} {
		if got := needsByteRegexp(expr); got != want {
			t.Errorf("needsByteRegexp(%q) = %v, want %v", expr, got, want)
		}
	}
}

// captureTx records capture fields.
type captureTx struct {
	plugintypes.TransactionState
	capturing bool
	fields    map[int]string
}

func (c *captureTx) Capturing() bool { return c.capturing }
func (c *captureTx) CaptureField(i int, v string) {
	c.fields[i] = v
}

func TestRxCaptures(t *testing.T) {
	op, err := newRx(plugintypes.OperatorOptions{Arguments: `(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)?x`})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"abcdefghijx", "--abcdefghijx-- and a longer tail for the memo"} {
		tx := &captureTx{capturing: true, fields: map[int]string{}}
		for range 2 { // the second time from the memo
			if !op.Evaluate(tx, v) {
				t.Fatalf("%q: no match", v)
			}
			if len(tx.fields) != 9 || tx.fields[0] != "abcdefghijx" || tx.fields[8] != "h" {
				t.Errorf("%q: fields %v, want TX.0 to TX.8", v, tx.fields)
			}
		}
	}
	tx := &captureTx{fields: map[int]string{}}
	if !op.Evaluate(tx, "abcdefghijx") || len(tx.fields) != 0 {
		t.Errorf("not capturing: fields %v", tx.fields)
	}
	if op.Evaluate(tx, "abcdefghij") {
		t.Error("matched without the x")
	}
}

// TestRequired_spreadBudget: fourteen alternations in a row would spread
// into 2^14 concatenations; the budget (maxSpread) stops the spreading
// past 4,096, and the filter still holds for what the pattern matches.
func TestRequired_spreadBudget(t *testing.T) {
	expr := "(?sm)" + strings.Repeat("(?:ab|cd)", 14) + "!"
	parsed, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	budget := maxSpread
	spread(parsed, &budget)
	if budget >= 2 || budget < 0 {
		t.Errorf("budget left %d after spreading 14 alternations: want it spent, and no more", budget)
	}
	f := newLiteralFilter(parsed)
	if f == nil {
		t.Fatal("no filter")
	}
	re := regexp.MustCompile(expr)
	for _, v := range []string{strings.Repeat("ab", 14) + "!", strings.Repeat("abcd", 7) + "!", strings.Repeat("cd", 14) + "!"} {
		if !re.MatchString(v) || !f.mayMatch(v) {
			t.Errorf("%q: pattern %v, filter %q %v", v, re.MatchString(v), f.lits, f.mayMatch(v))
		}
	}
	if f.mayMatch("no mark here") {
		t.Errorf("the filter %q lets through a value the pattern cannot match", f.lits)
	}
}

// TestRequired_limits: the pieces a run takes, and the alternations spread
// takes apart, at their limits and one past: a class of maxExactClass
// bytes and a repeat up to four times are in a run, a class of one more
// or a repeat up to five is not; an alternation of maxBranches branches
// is spread, one of more is not.
func TestRequired_limits(t *testing.T) {
	parse := func(expr string) *syntax.Regexp {
		t.Helper()
		re, err := syntax.Parse("(?sm)"+expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		return re
	}
	class := func(n int) string { return "[" + "!#$%&()*+,-./:;<=>?@[]^_`{|}~"[:n] + "]" }
	for _, c := range []struct {
		expr string
		want bool
	}{
		{class(maxExactClass), true},
		{class(maxExactClass + 1), false},
		{"x{1,4}", true},
		{"x{1,5}", false},
	} {
		if _, ok := exact(parse(c.expr)); ok != c.want {
			t.Errorf("exact(%s): %v, want %v", c.expr, ok, c.want)
		}
	}
	for _, n := range []int{maxBranches, maxBranches + 1} {
		var words []string
		for i := range n {
			// A group starts each branch, so that the parser does not
			// factor their common prefix out.
			words = append(words, fmt.Sprintf("(w)%03dz", i))
		}
		budget := maxSpread
		_, ok := spread(parse("k(?:"+strings.Join(words, "|")+")!"), &budget)
		if want := n <= maxBranches; ok != want {
			t.Errorf("an alternation of %d branches: spread %v, want %v", n, ok, want)
		}
	}
}
