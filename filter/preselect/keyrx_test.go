package preselect

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/debuglog"
	"github.com/corazawaf/coraza/v3/experimental"

	"github.com/wafguard/wafguard/filter/rules"
)

// TestNotAmong: the expression matches a string if and only if it is none
// of the keys, for keys that are prefixes of each other, hold characters
// that mean something in an expression, runes of several bytes, invalid
// UTF-8, or are empty; and for strings near them (each key with a rune
// added, dropped or changed) and random ones.
func TestNotAmong(t *testing.T) {
	sets := [][]string{
		{"json.contact.first_name"},
		{"a", "ab", "abc"},
		{"ab", "abd", "b"},
		{""},
		{"", "x"},
		{`a.b`, `a*b`, `[x]`, `^$`, `\d`, `(?i)a`, `a|b`, `-]`},
		{"clé", "日本", "ü"},
		{"a\xffb", "\xfe"},
		{"a\nb", "tab\there"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", ".", "é", "\xff", "\n", "]", "^", "-", "\\"}
	for range 40 {
		var set []string
		for range 1 + rng.IntN(6) {
			var b strings.Builder
			for range rng.IntN(6) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			set = append(set, b.String())
		}
		sets = append(sets, set)
	}
	long := make([]string, 0, maxKeptKeys)
	for i := range maxKeptKeys {
		long = append(long, fmt.Sprintf("json.items.%d.description", i))
	}
	sets = append(sets, long)
	// The size that decides between the two forms.
	if rx := notAmong(long); !strings.HasSuffix(rx, "$") {
		t.Errorf("%d keys of 26 bytes: %s is not anchored at the end", len(long), rx)
	}
	if rx := notAmong(sets[0]); strings.HasSuffix(rx, "$") {
		t.Errorf("one key of 23 bytes: %s is anchored at the end", rx)
	}
	// At the limit and one past it.
	if rx := notAmong([]string{strings.Repeat("a", maxBacktrackNodes)}); strings.HasSuffix(rx, "$") {
		t.Errorf("a trie of %d runes: anchored at the end", maxBacktrackNodes)
	}
	if rx := notAmong([]string{strings.Repeat("a", maxBacktrackNodes+1)}); !strings.HasSuffix(rx, "$") {
		t.Errorf("a trie of %d runes: not anchored at the end", maxBacktrackNodes+1)
	}
	for _, set := range sets {
		root, _ := trieOf(set)
		for _, whole := range []bool{false, true} {
			checkNotAmong(t, rng, alphabet, set, regexp.MustCompile(root.expression(whole)))
		}
	}
}

// checkNotAmong tries rx on the keys, strings near them and random ones.
func checkNotAmong(t *testing.T, rng *rand.Rand, alphabet, set []string, rx *regexp.Regexp) {
	t.Helper()
	var tries []string
	for _, k := range set {
		tries = append(tries, k, k+"a", k+"\xff", "a"+k)
		if k != "" {
			r := []rune(k)
			tries = append(tries, k[:len(k)-1], string(r[:len(r)-1]), string(r[1:]), strings.ToUpper(k))
			tries = append(tries, string(append(slices.Clone(r[:len(r)-1]), r[len(r)-1]+1)))
		}
	}
	for range 200 {
		var b strings.Builder
		for range rng.IntN(7) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		tries = append(tries, b.String())
	}
	for _, s := range tries {
		if got, want := rx.MatchString(s), !readsAsKey(s, set); got != want {
			t.Errorf("keys %q: %q matched %v, want %v (expression %s)", set, s, got, want, rx)
		}
	}
}

// readsAsKey reports whether s is one of keys as Go's expressions read
// text: each byte of an invalid sequence as U+FFFD.
func readsAsKey(s string, keys []string) bool {
	runes := func(x string) string { return string([]rune(x)) }
	for _, k := range keys {
		if runes(s) == runes(k) {
			return true
		}
	}
	return false
}

// TestKeptKeys_limits: keys are skipped only for a collection of at least
// minKeyValues values, at most maxKeptKeys keys kept of at most
// maxKeyRunes runes each, and some key left to skip.
func TestKeptKeys_limits(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("k%d", i)
		}
		return out
	}
	long := func(n int) string { return strings.Repeat("é", n) }
	for _, c := range []struct {
		name    string
		all     []string
		kept    []string
		want    []string
		worthIt bool
	}{
		{"fewest values", many(minKeyValues), []string{"k1"}, []string{"k1"}, true},
		{"one value fewer", many(minKeyValues - 1), []string{"k1"}, nil, false},
		{"nothing kept", many(20), nil, nil, false},
		{"lower case, sorted, once", append(many(20), "K1", "Ab"), []string{"k2", "K1", "k1", "Ab"}, []string{"ab", "k1", "k2"}, true},
		{"every key kept", many(10), many(10), nil, false},
		{"every key kept, in other cases", append(many(9), "X"), append(many(9), "x"), nil, false},
		{"most keys kept", many(40), many(maxKeptKeys), many(maxKeptKeys), true},
		{"one key too many", many(40), many(maxKeptKeys + 1), nil, false},
		{"longest key", append(many(10), long(maxKeyRunes)), []string{long(maxKeyRunes)}, []string{long(maxKeyRunes)}, true},
		{"key too long", append(many(10), long(maxKeyRunes+1)), []string{long(maxKeyRunes + 1)}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := keptKeys(c.all, c.kept)
			want := c.want
			if want != nil {
				slices.Sort(want)
			}
			if ok != c.worthIt || !slices.Equal(got, want) {
				t.Errorf("keptKeys = %q, %v; want %q, %v", got, ok, want, c.worthIt)
			}
		})
	}
}

// keyRules: rule 1 reads the arguments' values; 2 the same with
// multiMatch; 3 is excluded by a directive from one key and has it
// matched; 4 is chained, and keeps every key. Rule 9 comes first: the
// screen runs when Coraza evaluates the first rule, which has read its
// values already.
const keyRules = `SecRuleEngine On
SecRule REQUEST_METHOD "@rx ^NONE$" "id:9,phase:2,pass,t:none"
SecRule ARGS "@rx attack" "id:1,phase:2,pass,log,capture,msg:'one',logdata:'%{MATCHED_VAR_NAME}=%{MATCHED_VAR} %{TX.0}',t:none,t:urlDecodeUni,t:lowercase,setvar:tx.one=+1"
SecRule ARGS "@rx attack" "id:2,phase:2,pass,log,msg:'two',multiMatch,t:none,t:urlDecodeUni,t:lowercase"
SecRule ARGS "@rx attack" "id:3,phase:2,pass,log,msg:'three',t:none,t:lowercase"
SecRuleUpdateTargetById 3 "!ARGS:skip"
SecRule ARGS "@rx attack" "id:4,phase:2,pass,log,msg:'four',t:none,t:lowercase,chain"
	SecRule ARGS_NAMES "@rx ." "t:none"
`

// keyTrace is exclusionTrace with the values each rule tried, from
// Coraza's debug log.
func keyTrace(t *testing.T, waf coraza.WAF, log *bytes.Buffer, query string) (string, map[string]int) {
	t.Helper()
	log.Reset()
	trace, _ := exclusionTrace(t, waf, query)
	tried := map[string]int{}
	for _, line := range strings.Split(log.String(), "\n") {
		if !strings.Contains(line, "Evaluating operator") {
			continue
		}
		if i := strings.Index(line, "rule_id="); i >= 0 {
			tried[strings.TrimPrefix(strings.Fields(line[i:])[0], "rule_id=")]++
		}
	}
	// A log line lists the matched data in Coraza's order, which is a
	// map's: compare them sorted.
	lines := strings.Split(trace, "\n")
	for i, line := range lines {
		var datas []string
		for _, m := range logData.FindAllStringSubmatch(line, -1) {
			datas = append(datas, m[1])
		}
		slices.Sort(datas)
		lines[i] = logData.ReplaceAllString(line, "[data]") + fmt.Sprintf(" %q", datas)
	}
	return strings.Join(lines, "\n"), tried
}

var logData = regexp.MustCompile(`\[data(?:_match_\d+)? "([^"]*)"\]`)

// compileLogged is compile with Coraza's debug log at its most verbose,
// written to log; with preselect false, the WAF without the preselection.
func compileLogged(t *testing.T, directives string, preselect bool, log *bytes.Buffer) coraza.WAF {
	t.Helper()
	directives += "\nSecDebugLogLevel 9\n"
	cfg := coraza.NewWAFConfig().WithDebugLogger(debuglog.Default().WithOutput(log))
	if !preselect {
		waf, err := coraza.NewWAF(cfg.WithDirectives(directives))
		if err != nil {
			t.Fatal(err)
		}
		return waf
	}
	b := NewBuilder(ReadRuleSet(directives, rules.FS))
	cfg = experimental.WAFConfigWithRuleObserver(cfg.WithRootFS(rules.FS), b.Observe)
	b.Begin()
	waf, err := coraza.NewWAF(cfg.WithDirectives(directives))
	b.End()
	if err != nil {
		t.Fatal(err)
	}
	b.Finish(waf.(experimental.WAFWithRules).RulesCount())
	return waf
}

// TestExcludedKeys: a kept rule that matched in ARGS tries only the
// values of the keys it can match there; what every rule matches, logs
// and writes is what it does without the preselection.
func TestExcludedKeys(t *testing.T) {
	var withLog, withoutLog bytes.Buffer
	with := compileLogged(t, keyRules, true, &withLog)
	without := compileLogged(t, keyRules, false, &withoutLog)
	args := func(n int, extra string) string {
		var q []string
		for i := range n {
			q = append(q, fmt.Sprintf("p%d=v%d", i, i))
		}
		return strings.Join(q, "&") + extra
	}
	for _, c := range []struct {
		name  string
		query string
		// tried: per rule, how many values it tries with the
		// preselection (rule 2, multiMatch, tries a value again after
		// each transformation that changed it; rule 3 does not decode
		// "%61"); for a rule not listed, as many as without.
		tried map[string]int
	}{
		{"one attack among 20", args(20, "&bad=Attack"), map[string]int{"1": 1, "2": 2, "3": 1}},
		{"two keys", args(20, "&bad=attack&also=%2561ttack"), map[string]int{"1": 2, "2": 3, "3": 1}},
		{"the same key twice", args(20, "&bad=attack&bad=1"), map[string]int{"1": 2, "2": 2, "3": 2}},
		{"a key in another case", args(20, "&bad=attack&BAD=1"), map[string]int{"1": 2, "2": 2, "3": 2}},
		{"in a key the rule skips", args(20, "&skip=attack&ok=attack"), map[string]int{"1": 2, "2": 2, "3": 1}},
		{"a value longer than the memo keeps", args(20, "&long="+strings.Repeat("x", memoMaxValue)+"attack&bad=attack"), map[string]int{"1": 2, "2": 2, "3": 2}},
		{"two such values", args(20, "&long="+strings.Repeat("x", memoMaxValue)+"attack&also="+strings.Repeat("y", memoMaxValue)+"attack"), map[string]int{"1": 2, "2": 2, "3": 2}},
		{"too few values", args(4, "&bad=attack"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, tried := keyTrace(t, with, &withLog, c.query)
			want, triedWithout := keyTrace(t, without, &withoutLog, c.query)
			if got != want {
				t.Errorf("with the preselection:\n%s\nwithout:\n%s", got, want)
			}
			for _, id := range []string{"1", "2", "3", "4"} {
				n, ok := c.tried[id]
				if !ok {
					n = triedWithout[id]
				}
				if tried[id] != n {
					t.Errorf("rule %s tried %d values, want %d (with: %v, without: %v)", id, tried[id], n, tried, triedWithout)
				}
			}
		})
	}
}

// TestKeyRxCache: an expression is compiled once, and a full cache starts
// over.
func TestKeyRxCache(t *testing.T) {
	var c keyRxCache
	one, err := c.compile(`^a`)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.compile(`^a`); again != one {
		t.Error("an expression was compiled again")
	}
	if _, err := c.compile(`(`); err == nil {
		t.Error("a bad expression compiled")
	}
	c = keyRxCache{}
	for i := range maxKeyRxCache {
		if _, err := c.compile(fmt.Sprintf("^%d$", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.rx); n != maxKeyRxCache {
		t.Errorf("the cache holds %d expressions after %d, want them all", n, maxKeyRxCache)
	}
	if _, err := c.compile(`^one more$`); err != nil {
		t.Fatal(err)
	}
	if n := len(c.rx); n != 1 {
		t.Errorf("the cache holds %d expressions past its %d, want 1: it starts over", n, maxKeyRxCache)
	}
}

// TestSkipSources: the keys of the common branches are skipped by literal
// prefixes, most common first, the rest by the trie's expression; taken
// together the expressions skip exactly the keys not kept.
func TestSkipSources(t *testing.T) {
	var body []string
	for i := range 40 {
		body = append(body, fmt.Sprintf("json.items.%d.sku", i), fmt.Sprintf("json.items.%d.qty", i))
	}
	for _, k := range []string{"line1", "city", "zip", "country", "name", "phone"} {
		body = append(body, "json.shipping."+k)
	}
	body = append(body, "json.contact.first_name", "json.contact.email", "json.contact", "json.Contact.First_Name", "json.note")
	branches := func(n, each int) []string {
		var out []string
		for b := range n {
			for i := range each {
				out = append(out, fmt.Sprintf("%c%d", 'a'+b, i))
			}
		}
		return append(out, "kept")
	}
	for _, c := range []struct {
		name      string
		all, kept []string
		want      []string
	}{
		{"a JSON body", body, []string{"json.contact.first_name"}, []string{`(?s)^json\.i`, notAmong([]string{"json.contact.first_name"})}},
		{"every branch common", branches(4, 10), []string{"kept"}, []string{`(?s)^a`, `(?s)^b`, `(?s)^c`, `(?s)^d`}},
		{"one branch past the most", branches(5, 10), []string{"kept"}, []string{`(?s)^a`, `(?s)^b`, `(?s)^c`, `(?s)^d`, notAmong([]string{"kept"})}},
		{"a key inside the trie", []string{"kep", "kep", "kep", "kept", "x"}, []string{"kept"}, []string{`(?s)^kep$`, `(?s)^x`}},
		{"a branch of an eighth", append(branches(1, 28), "z1", "z2", "z3", "z4"), []string{"kept"}, []string{`(?s)^a`, `(?s)^z`}},
		{"a branch under an eighth", append(branches(1, 29), "z1", "z2", "z3", "y"), []string{"kept"}, []string{`(?s)^a`, notAmong([]string{"kept"})}},
		{"invalid UTF-8, lowered to U+FFFD", []string{"\xff1", "\xff2", "\xff3", "kept"}, []string{"kept"}, []string{"(?s)^\uFFFD"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := skipSources(c.all, c.kept)
			if !slices.Equal(got, c.want) {
				t.Errorf("skipSources = %q, want %q", got, c.want)
			}
			checkSkipped(t, got, c.all, c.kept)
		})
	}
	// Random collections of keys over a small alphabet.
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", ".", "é", "\xff"}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(5) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 200 {
		var all []string
		for range 8 + rng.IntN(40) {
			all = append(all, word())
		}
		kept := []string{strings.ToLower(all[rng.IntN(len(all))])}
		if rng.IntN(2) == 0 {
			kept = append(kept, strings.ToLower(word()))
		}
		slices.Sort(kept)
		kept = slices.Compact(kept)
		checkSkipped(t, skipSources(all, kept), all, kept)
	}
}

// checkSkipped checks that srcs, tried as Coraza tries exceptions (on each
// key in lower case), skip every key of all that reads as none of kept,
// and no other.
func checkSkipped(t *testing.T, srcs, all, kept []string) {
	t.Helper()
	var rxs []*regexp.Regexp
	for _, src := range srcs {
		rxs = append(rxs, regexp.MustCompile(src))
	}
	for _, k := range all {
		lk := strings.ToLower(k)
		skipped := slices.ContainsFunc(rxs, func(rx *regexp.Regexp) bool { return rx.MatchString(lk) })
		if want := !readsAsKey(lk, kept); skipped != want {
			t.Errorf("keys kept %q, expressions %q: %q skipped %v, want %v", kept, srcs, k, skipped, want)
		}
	}
}
