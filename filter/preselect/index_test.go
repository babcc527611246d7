package preselect

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"

	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/filter/transform"

	"github.com/wafguard/wafguard/filter/rules"
)

func init() {
	fastpath.Register()
	transform.Register()
	Register(fastpath.Factories())
}

// compile builds a WAF with the preselection hooks and returns it with its
// index. Included files are read from package rules.
func compile(t testing.TB, directives string) (coraza.WAF, *Index) {
	t.Helper()
	b := NewBuilder(ReadRuleSet(directives, rules.FS))
	text := directives
	cfg := experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig().WithRootFS(rules.FS), b.Observe)
	b.Begin()
	waf, err := coraza.NewWAF(cfg.WithDirectives(text))
	b.End()
	if err != nil {
		t.Fatal(err)
	}
	return waf, b.Finish(waf.(experimental.WAFWithRules).RulesCount())
}

// TestIndex_crs checks what the index makes of the CRS: the parser agrees
// with Coraza on every rule whose operator this project owns (each one's
// instance is found under the argument the parser read), and most attack
// rules are screened.
func TestIndex_crs(t *testing.T) {
	_, ix := compile(t, "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf")
	t.Logf("screened: phase 1 %d, phase 2 %d; always evaluated: %v",
		len(ix.Droppable(types.PhaseRequestHeaders)), len(ix.Droppable(types.PhaseRequestBody)), ix.Skipped)
	if n := ix.Skipped[reasonNoInstance]; n != 0 {
		t.Errorf("%d rules whose operator instance was not found: the parser reads them differently from Coraza", n)
	}
	if n := len(ix.Droppable(types.PhaseRequestBody)); n < 150 {
		t.Errorf("%d phase 2 rules screened, want at least 150", n)
	}
	for _, id := range []int{942100, 941100, 932230, 930120} {
		if !slices.Contains(ix.Droppable(types.PhaseRequestBody), id) {
			t.Errorf("rule %d is not screened", id)
		}
	}
	// 920539 skips one rule, 920540. The CRS's run-time removals
	// (ctl:ruleRemoveByTag=OWASP_CRS) take 920539 out too, so they do not
	// move where its skip lands. 920540 is screened, removed only when
	// 920539, whose REQBODY_PROCESSOR no rule of phase 2 changes, does
	// not match (skips.go).
	pp := ix.plans[types.PhaseRequestBody]
	var guarded bool
	for _, r := range pp.rules {
		if r.id == 920540 {
			guarded = len(r.windows) == 1 && pp.skippers[r.windows[0]].v == variables.ReqbodyProcessor
		}
	}
	if !guarded {
		t.Error("rule 920540, which the skip of 920539 lands on, is not screened behind 920539's decision")
	}
}

// TestIndex_reasons checks each rule the screen must always evaluate.
func TestIndex_reasons(t *testing.T) {
	_, ix := compile(t, `SecRuleEngine On
SecRule TX:x "@rx a" "id:1,phase:2,pass,skip:2"
SecRule ARGS "@rx b" "id:2,phase:2,pass"
SecRule ARGS "@rx c" "id:3,phase:2,pass"
SecRule ARGS "@rx d" "id:4,phase:2,pass"
SecRule ARGS "!@rx e" "id:5,phase:2,pass"
SecRule TX:x "@rx f" "id:6,phase:2,pass"
SecRule &ARGS "@rx 1" "id:7,phase:2,pass"
SecRule ARGS "@rx %{tx.x}" "id:8,phase:2,pass"
SecRule ARGS "@validateUrlEncoding" "id:9,phase:2,pass"
SecRule ARGS "@rx g" "id:10,phase:2,pass,t:md5"
SecAction "id:11,phase:2,pass"
SecMarker END
SecRule ARGS "@rx h" "id:12,phase:2,pass,t:none,t:urlDecodeUni,t:lowercase"
SecRule ARGS|!ARGS:x|REQUEST_HEADERS "@pm i j" "id:13,phase:2,pass,multiMatch,t:lowercase"
SecRule ARGS "@rx k" "id:14,phase:2,pass"
SecRule ARGS "@rx l" "id:15,phase:2,pass"
SecRuleUpdateActionById 14 "t:lowercase"
SecRuleUpdateTargetById 15 "!ARGS:y"
`)
	// 2 and 3 are in the skip window of 1 (which reads TX: the screen
	// does not read its decision before the phase, skips.go), 9's operator and 10's
	// transformation are not this project's, 11 is a SecAction, 14 was
	// changed by SecRuleUpdateActionById. A negated operator (5), a TX
	// variable no rule writes (6), a count (7) and an @rx whose pattern
	// holds "%{" (8: Coraza's @rx reads it as it is, not as a macro) are
	// screened.
	got := ix.Droppable(types.PhaseRequestBody)
	want := []int{1, 4, 5, 6, 7, 8, 12, 13, 15}
	if !slices.Equal(got, want) {
		t.Errorf("screened %v, want %v (always evaluated: %v)", got, want, ix.Skipped)
	}
}

// TestIndex_unreadRuleSet: a rule set the reader cannot follow as Coraza
// does (here an Include it has no file system for, which Coraza reads
// from its own) has no jumps and screens none of its rules, and says why.
func TestIndex_unreadRuleSet(t *testing.T) {
	rules := "SecRuleEngine On\nInclude r.conf\n"
	fsys := fstest.MapFS{"r.conf": {Data: []byte(`SecRule ARGS "@rx b" "id:2,phase:2,pass"
SecRule ARGS "@rx c" "id:3,phase:2,pass"
`)}}
	set := ReadRuleSet(rules, nil)
	if !set.Failed() || PlanJumps(set) != nil || PlanLeavingOut(set) != nil {
		t.Fatalf("failed %v: the reader followed an Include without a file system", set.Failed())
	}
	b := NewBuilder(set)
	cfg := experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig().WithRootFS(fsys), b.Observe)
	b.Begin()
	waf, err := coraza.NewWAF(cfg.WithDirectives(rules))
	b.End()
	if err != nil {
		t.Fatal(err)
	}
	ix := b.Finish(waf.(experimental.WAFWithRules).RulesCount())
	if got := ix.Droppable(types.PhaseRequestBody); len(got) != 0 {
		t.Errorf("screened %v, want none", got)
	}
	for _, id := range []int{2, 3} {
		if got, ok := ix.Reason(id); !ok || got != reasonConfigWhole {
			t.Errorf("rule %d: reason %q (%v), want %q", id, got, ok, reasonConfigWhole)
		}
	}
	// Read with its file system, the same rule set screens both.
	_, ix = compilePlanned(t, fsys, rules, nil)
	if got := ix.Droppable(types.PhaseRequestBody); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("read in full: screened %v, want [2 3]", got)
	}
}

// TestIndex_removedAtConfigTime checks that a skip lands where Coraza lands
// it after SecRuleRemoveById, and that a rule a ctl action may remove at
// run time does not count towards the skip.
func TestIndex_removedAtConfigTime(t *testing.T) {
	// Rule 1 reads TX: the screen does not read its decision before the
	// phase (skips.go), so the rules its skip may land on stay.
	rules := `SecRuleEngine On
SecRule TX:x "@rx a" "id:1,phase:2,pass,skip:1"
SecRule ARGS "@rx b" "id:2,phase:2,pass"
SecRule ARGS "@rx c" "id:3,phase:2,pass"
SecRule ARGS "@rx d" "id:4,phase:2,pass,msg:'gone'"
SecRule ARGS "@rx e" "id:5,phase:2,pass"
`
	_, ix := compile(t, rules+"SecRuleRemoveById 2\n")
	if got, want := ix.Droppable(types.PhaseRequestBody), []int{1, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("after SecRuleRemoveById 2: screened %v, want %v", got, want)
	}
	_, ix = compile(t, rules+`SecRule ARGS "@rx z" "id:6,phase:1,pass,ctl:ruleRemoveById=2"`+"\n")
	if got, want := ix.Droppable(types.PhaseRequestBody), []int{1, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("with ctl:ruleRemoveById=2: screened %v, want %v", got, want)
	}
}

// TestScreen removes exactly the rules whose operator matches no value of
// their targets after their transformations, and reports it.
func TestScreen(t *testing.T) {
	waf, _ := compile(t, `SecRuleEngine On
SecRule ARGS "@rx attack" "id:1,phase:2,pass,log,t:none,t:urlDecodeUni,t:lowercase"
SecRule ARGS "@rx other" "id:2,phase:2,pass,log,t:none,t:lowercase"
SecRule REQUEST_HEADERS "@pm evil" "id:3,phase:1,pass,log,t:none"
SecRule REQUEST_HEADERS "@contains nothing" "id:4,phase:1,pass,log"
SecRule ARGS_NAMES "@streq wanted" "id:5,phase:2,pass,log"
SecRule ARGS "@rx ^YWJj$" "id:6,phase:2,pass,log,multiMatch,t:none,t:base64Decode,t:lowercase"
`)
	var reports []Report
	OnScreen = func(r Report) { reports = append(reports, r) }
	defer func() { OnScreen = nil }()
	tx := waf.NewTransaction()
	tx.ProcessURI("/?a=AT%2554ACK&wanted=YWJj", "GET", "HTTP/1.1")
	tx.AddRequestHeader("X", "EVIL")
	tx.ProcessRequestHeaders()
	if _, err := tx.ProcessRequestBody(); err != nil {
		t.Fatal(err)
	}
	var matched []string
	for _, mr := range tx.MatchedRules() {
		matched = append(matched, fmt.Sprint(mr.Rule().ID()))
	}
	if got := strings.Join(matched, " "); got != "3 1 5 6" {
		t.Errorf("matched %q, want 3 1 5 6", got)
	}
	want := []Report{{Phase: 1, Screened: 2, Removed: 1}, {Phase: 2, Screened: 4, Removed: 1}}
	if len(reports) != len(want) {
		t.Fatalf("reports %+v", reports)
	}
	for i, r := range reports {
		if r.Phase != want[i].Phase || r.Screened != want[i].Screened || r.Removed != want[i].Removed || r.TxID != tx.ID() {
			t.Errorf("report %d = %+v, want %+v", i, r, want[i])
		}
	}
}

// TestScreen_noCapture checks that the screen, run from a rule that
// captures, leaves TX.0-9 alone: only the rules Coraza evaluates capture.
// Rule 1 captures and is the first to reach a screened operator, so it
// runs the screen, which judges rule 2's pattern (two groups) on "second".
func TestScreen_noCapture(t *testing.T) {
	waf, _ := compile(t, `SecRuleEngine On
SecRule ARGS "@rx ^(first)$" "id:1,phase:2,pass,capture,setvar:tx.seen=%{tx.0}"
SecRule ARGS "@rx ^(sec)(ond)$" "id:2,phase:2,pass,chain"
SecRule ARGS "@rx nothing" ""
SecRule ARGS_NAMES "@rx ^(z)" "id:3,phase:2,pass,capture"
`)
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI("/?a=first&b=second", "GET", "HTTP/1.1")
	tx.ProcessRequestHeaders()
	if _, err := tx.ProcessRequestBody(); err != nil {
		t.Fatal(err)
	}
	txVars := tx.(plugintypes.TransactionState).Variables().TX()
	get := func(k string) string {
		if v := txVars.Get(k); len(v) != 0 {
			return v[0]
		}
		return ""
	}
	if get("0") != "first" || get("1") != "first" || get("2") != "" || get("seen") != "first" {
		t.Errorf("TX.0-2 = %q %q %q, seen %q; want first, first, empty, first", get("0"), get("1"), get("2"), get("seen"))
	}
}

// TestScreen_segments checks that a stretch of rules a skipAfter jumps
// over is never screened, and that one it does not jump over is.
func TestScreen_segments(t *testing.T) {
	waf, _ := compile(t, `SecRuleEngine On
SecRule ARGS "@rx a" "id:1,phase:2,pass"
SecRule REQUEST_METHOD "@streq GET" "id:2,phase:2,pass,nolog,skipAfter:END"
SecRule ARGS "@rx b" "id:3,phase:2,pass"
SecRule ARGS "@rx c" "id:4,phase:2,pass"
SecMarker END
SecRule ARGS "@rx d" "id:5,phase:2,pass,log"
`)
	// One screen from rule 1 judges rule 2 (the method), follows its jump
	// on a GET to the stretch after END, and judges the rules of the
	// stretches it passes: 1, 2 and 5 on a GET (3 and 4 are skipped),
	// every rule on a POST.
	for _, c := range []struct {
		method   string
		screened []int
	}{
		{"GET", []int{3}},
		{"POST", []int{5}},
	} {
		var screened []int
		OnScreen = func(r Report) { screened = append(screened, r.Screened) }
		tx := waf.NewTransaction()
		tx.ProcessURI("/?x=d", c.method, "HTTP/1.1")
		tx.ProcessRequestHeaders()
		if _, err := tx.ProcessRequestBody(); err != nil {
			t.Fatal(err)
		}
		OnScreen = nil
		if !slices.Equal(screened, c.screened) {
			t.Errorf("%s: screened %v rules per stretch, want %v", c.method, screened, c.screened)
		}
		if m := tx.MatchedRules(); len(m) == 0 || m[len(m)-1].Rule().ID() != 5 {
			t.Errorf("%s: rule 5 did not match", c.method)
		}
		tx.Close()
	}
}

// TestScreen_reusedTransaction: Coraza reuses transaction objects, and the
// ID can come from a request header. A transaction that reuses the object
// and the ID of the previous one must be screened on its own values, not
// on what the screen read for the previous one. The POSTs skip the second
// stretch, so the GET after one screens it first (from rule 3): with the
// POST's values it would remove rule 4.
func TestScreen_reusedTransaction(t *testing.T) {
	waf, _ := compile(t, `SecRuleEngine On
SecRule ARGS "@rx benign" "id:1,phase:2,pass"
SecRule REQUEST_METHOD "@streq POST" "id:2,phase:2,pass,skipAfter:END"
SecRule ARGS "@rx other" "id:3,phase:2,pass"
SecRule ARGS "@rx attack" "id:4,phase:2,deny,status:403"
SecMarker END
`)
	for i, c := range []struct{ method, arg string }{{"POST", "benign"}, {"GET", "attack"}, {"POST", "benign"}, {"GET", "attack"}} {
		tx := waf.NewTransactionWithID("same-id")
		tx.ProcessURI("/?q="+c.arg, c.method, "HTTP/1.1")
		tx.ProcessRequestHeaders()
		it, err := tx.ProcessRequestBody()
		if err != nil {
			t.Fatal(err)
		}
		if blocked := it != nil; blocked != (c.arg == "attack") {
			t.Errorf("request %d (%s %s): blocked %v", i, c.method, c.arg, blocked)
		}
		tx.Close()
	}
}

// TestScreen_bodyMemo: the short values of a body (ARGS_POST, up to
// memoMaxBodyValue bytes) are remembered apart from the headers' and the
// query's: a fresh body never empties the memo of the others, a longer
// body value is never remembered, and what a remembered value matches is
// what it matched when it was judged.
func TestScreen_bodyMemo(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx attack" "id:1,phase:2,pass,log,t:none,t:lowercase"
SecRule REQUEST_HEADERS "@rx never" "id:2,phase:2,pass,log"
`)
	post := func(body string) []int {
		tx := waf.NewTransaction()
		defer tx.Close()
		tx.ProcessURI("/", "POST", "HTTP/1.1")
		tx.AddRequestHeader("Content-Type", "application/x-www-form-urlencoded")
		tx.AddRequestHeader("X-Same", "value")
		tx.ProcessRequestHeaders()
		if _, _, err := tx.WriteRequestBody([]byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ProcessRequestBody(); err != nil {
			t.Fatal(err)
		}
		var ids []int
		for _, mr := range tx.MatchedRules() {
			ids = append(ids, mr.Rule().ID())
		}
		return ids
	}
	m := &ix.plans[types.PhaseRequestBody].memo
	long := strings.Repeat("x", memoMaxBodyValue+1)
	atLimit := strings.Repeat("y", memoMaxBodyValue)
	for i := 0; i < 2; i++ {
		if got := post("a=ATTACK&b=calm&c=" + long + "&d=" + atLimit); !slices.Equal(got, []int{1}) {
			t.Fatalf("pass %d: matched %v, want [1]", i, got)
		}
	}
	inBody := func(v string) bool {
		for k := range m.body.entries {
			if k.value == v {
				return true
			}
		}
		return false
	}
	if !inBody(atLimit) {
		t.Errorf("a %d-byte body value was not remembered", len(atLimit))
	}
	if !inBody("ATTACK") || !inBody("calm") || inBody(long) {
		t.Errorf("body memo %v: want ATTACK and calm, not the %d-byte value", m.body.entries, len(long))
	}
	headers := m.entries.len()
	if headers == 0 {
		t.Fatal("the headers' values were not remembered")
	}
	for i := 0; i < 2*memoMaxEntries/100+1; i++ {
		var b strings.Builder
		for j := 0; j < 100; j++ {
			fmt.Fprintf(&b, "k%d=v%d-%d&", j, i, j)
		}
		if got := post(b.String()); len(got) != 0 {
			t.Fatalf("fresh body matched %v", got)
		}
	}
	if m.entries.len() < headers || m.body.len() > 2*memoMaxEntries {
		t.Errorf("after %d fresh body values: %d header entries (before %d), %d body entries (at most %d)",
			(2*memoMaxEntries/100+1)*100, m.entries.len(), headers, m.body.len(), 2*memoMaxEntries)
	}
	if got := post("a=ATTACK"); !slices.Equal(got, []int{1}) {
		t.Errorf("after the body memo filled: matched %v, want [1]", got)
	}
}

// TestRead_names: the screen reads a *_NAMES collection from the keys of
// its parent, ARGS from its parts, ARGS_NAMES from theirs; each gives, as
// a multiset, what Coraza's own FindAll of that collection gives: one name
// per value (a key given twice is listed twice), in the case it was
// written, whether the parent was read before or not.
func TestRead_names(t *testing.T) {
	waf, _ := compile(t, "SecRuleEngine On\n")
	for _, first := range []bool{false, true} {
		tx := waf.NewTransaction()
		tx.AddGetRequestArgument("q", "1")
		tx.AddGetRequestArgument("Q", "2")
		tx.AddGetRequestArgument("q", "3")
		tx.AddPostRequestArgument("json.a.B", "x")
		tx.AddPostRequestArgument("json.a.B", "y")
		tx.AddPathRequestArgument("id", "42")
		tx.AddRequestHeader("X-One", "a")
		tx.AddRequestHeader("x-one", "b")
		tx.AddRequestHeader("Cookie", "s=1; T=2")
		tx.AddResponseHeader("Set-Cookie", "k=v")
		ts := tx.(plugintypes.TransactionState)
		var st txState
		st.namedGen = 1
		if first {
			for _, v := range namedParents {
				st.read(ts, v, "")
			}
		}
		for _, v := range []variables.RuleVariable{
			variables.Args, variables.ArgsNames, variables.ArgsGet, variables.ArgsGetNames, variables.ArgsPost,
			variables.ArgsPostNames, variables.ArgsPath, variables.RequestHeaders, variables.RequestHeadersNames,
			variables.RequestCookies, variables.RequestCookiesNames, variables.ResponseHeaders, variables.ResponseHeadersNames,
		} {
			var want []string
			for _, md := range ts.Collection(v).FindAll() {
				want = append(want, md.Value())
			}
			got := slices.Clone(st.read(ts, v, ""))
			slices.Sort(want)
			slices.Sort(got)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("parents read first %v: %s reads %q, Coraza gives %q", first, v.Name(), got, want)
			}
		}
		tx.Close()
	}
}

// TestEnter_tbuf: the buffer of transformed values is kept from one phase
// to the next up to maxKeptTbuf bytes, and dropped past them.
func TestEnter_tbuf(t *testing.T) {
	pp := &phasePlan{}
	for _, c := range []struct {
		cap  int
		kept bool
	}{{maxKeptTbuf, true}, {maxKeptTbuf + 1, false}} {
		st := txState{tbuf: make([]byte, 0, c.cap)}
		st.enter(pp, 2)
		if kept := st.tbuf != nil; kept != c.kept {
			t.Errorf("a buffer of %d bytes: kept %v, want %v", c.cap, kept, c.kept)
		}
	}
}

// TestSameButCase: a transformed value shares its parent's union scan only
// when the two differ in the case of ASCII letters alone.
func TestSameButCase(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"Made Machine", "made machine", true},
		{"abc", "abc", true},
		{"", "", true},
		{"ab", "abc", false},
		{"a b", "a_b", false},
		{"@[", "`{", false}, // 0x40/0x60 and 0x5b/0x7b differ by 0x20 but are no letters
		{"\u00c9t\u00e9", "\u00e9t\u00e9", false},
		{"\u212a", "k", false},
		{"caf\u00e9", "CAF\u00e9", true},
	} {
		if got := sameButCase(c.a, c.b); got != c.want {
			t.Errorf("sameButCase(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestTriggerBit_limit: a plan gives 63 distinct trigger sets a bit each;
// the 64th gets none (its transformation always runs), and no signature
// ever holds the bit of sigUnknown.
func TestTriggerBit_limit(t *testing.T) {
	pp := &phasePlan{}
	for i := range 64 {
		var set [256]bool
		set[i] = true
		bit := pp.triggerBit(&set)
		if want := i < 63; (bit != 0) != want {
			t.Errorf("set %d: bit %#x, want one: %v", i, bit, want)
		}
		if again := pp.triggerBit(&set); again != bit {
			t.Errorf("set %d asked again: bit %#x, want %#x", i, again, bit)
		}
	}
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	if sig := pp.signature(string(all)); sig&sigUnknown != 0 || sig != sigUnknown-1 {
		t.Errorf("signature of every byte: %#x, want the 63 bits below sigUnknown", sig)
	}
}

// TestScreen_united: of the rules judged at one node, those the union
// stands for are judged through its hits, the others (without literals)
// one by one, and each is decided as Coraza would: a literal the union
// finds whose rule's pattern does not match (13, first request), a
// multiMatch rule on the value before and after its transformation (16),
// beside a negated rule on values without its literal (14), judged on
// its own.
func TestScreen_united(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecRule ARGS "@rx alpha" "id:11,phase:2,pass,log,t:none,t:lowercase"
SecRule ARGS "@rx beta" "id:12,phase:2,pass,log,t:none,t:lowercase"
SecRule ARGS "@rx gamma[0-9]" "id:13,phase:2,pass,log,t:none,t:lowercase"
SecRule ARGS "!@rx delta" "id:14,phase:2,pass,log,t:none,t:lowercase"
SecRule ARGS "@detectSQLi" "id:15,phase:2,pass,log,t:none,t:lowercase"
SecRule ARGS "@rx epsilon" "id:16,phase:2,pass,log,multiMatch,t:none,t:lowercase"
`)
	for _, c := range []struct {
		query   string
		matched []int
		removed int
	}{
		{"a=ALPHA&b=gamma&c=delta", []int{11, 14}, 4},
		{"a=EPSILON&b=gamma7", []int{13, 14, 16}, 3},
		{"a=delta", nil, 6},
	} {
		matched, reports := run(t, waf, c.query)
		if !slices.Equal(matched, c.matched) {
			t.Errorf("%s: matched %v, want %v", c.query, matched, c.matched)
		}
		if len(reports) != 1 || reports[0].Screened != 6 || reports[0].Removed != c.removed {
			t.Errorf("%s: reports %+v, want 6 screened and %d removed", c.query, reports, c.removed)
		}
	}

	pp := ix.plans[types.PhaseRequestBody]
	var lower *node
	for _, n := range pp.nodes {
		if n.name == "lowercase" && n.parent == pp.root {
			lower = n
		}
	}
	if lower == nil {
		t.Fatal("no node for t:lowercase")
	}
	ids := func(lists [][]*srule) string {
		var s []int
		for _, l := range lists {
			for _, r := range l {
				if !slices.Contains(s, r.id) {
					s = append(s, r.id)
				}
			}
		}
		slices.Sort(s)
		return fmt.Sprint(s)
	}
	// 14, negated, is judged on its own (not in the trie).
	if got := ids(lower.plain); got != "[15]" {
		t.Errorf("plain rules %s, want [15]", got)
	}
	if got := ids(lower.united); got != "[11 12 13 16]" {
		t.Errorf("united rules %s, want [11 12 13 16]", got)
	}
	for i, rs := range lower.united {
		for _, r := range rs {
			if pp.bySlot[r.slot] != r || lower.unitedMask[i][r.slot>>6]&(1<<(r.slot&63)) == 0 {
				t.Errorf("rule %d: slot %d not in the node's mask or bySlot", r.id, r.slot)
			}
		}
	}
}
