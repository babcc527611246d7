package preselect

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
)

func TestAdditionsOf(t *testing.T) {
	for rule, want := range map[string][]addition{
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,t:none,nolog,tag:'x',setvar:'tx.total=+%{tx.score}'"`:     {{key: "total", from: "score"}},
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.Total=-%{TX.Score},setvar:tx.n=+0"`:       {{key: "total", from: "score"}, {key: "n"}},
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+3"`:                                {{key: "total", literal: 3}},
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,log,setvar:tx.total=+%{tx.score}"`:                        nil, // logs
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,severity:2,setvar:tx.total=+%{tx.score}"`:           nil, // severity
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,capture,setvar:tx.total=+%{tx.score}"`:              nil,
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,chain,setvar:tx.total=+%{tx.score}"`:                nil,
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,skipAfter:END,setvar:tx.total=+%{tx.score}"`:        nil,
		`SecRule TX:PL "@ge 1" "id:1,phase:2,block,nolog,setvar:tx.total=+%{tx.score}"`:                     nil, // no pass
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=5"`:                                 nil, // not an addition
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.%{tx.k}=+%{tx.score}"`:                    nil, // key from a macro
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}%{tx.x}"`:               nil,
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:ip.total=+%{tx.score}"`:                      nil,
		`SecRule TX:PL|TX:X "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}"`:                 nil, // two values
		`SecRule &TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}"`:                     nil,
		`SecRule ARGS:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}"`:                    nil,
		`SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,ctl:ruleRemoveById=2,setvar:tx.total=+%{tx.score}"`: nil,
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}"`:                                  nil, // no operator to answer
	} {
		got := additionsOf(observed{id: 1, raw: rule, parsed: parseRule(rule)}, directiveFacts{})
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", rule, got, want)
		}
	}
	rule := `SecRule TX:PL "@ge 1" "id:1,phase:2,pass,nolog,setvar:tx.total=+%{tx.score}"`
	if got := additionsOf(observed{id: 1, raw: rule, parsed: parseRule(rule)}, directiveFacts{updated: [][2]int{{1, 1}}}); got != nil {
		t.Errorf("an updated rule: %v, want none", got)
	}
}

// zeroRules sum a score in the CRS's way: a setup, a rule that scores,
// additions, a rule that blocks on the sum.
const zeroRules = `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.pl=1,setvar:tx.score=0,setvar:tx.total=0"
SecRule ARGS "@contains evil" "id:10,phase:2,pass,log,msg:'evil',setvar:'tx.score=+5'"
SecRule ARGS "@contains odd" "id:11,phase:2,pass,log,msg:'odd',setvar:'tx.total=007'"
SecRule TX:PL "@ge 1" "id:20,phase:2,pass,t:none,nolog,setvar:'tx.total=+%{tx.score}'"
SecRule TX:PL "@ge 1" "id:21,phase:2,pass,t:none,nolog,setvar:'tx.fresh=+%{tx.score}'"
SecRule TX:PL "!@ge 2" "id:22,phase:2,pass,t:none,nolog,setvar:'tx.total=+%{tx.score}'"
SecRule TX:PL "!@ge 1" "id:23,phase:2,pass,t:none,nolog,setvar:'tx.total=+%{tx.score}'"
SecRule TX:TOTAL "@ge 5" "id:30,phase:2,deny,status:403,log,msg:'total'"
`

// withAndWithout compiles rules with the preselection, its prelude made
// (err says why there is none), and without it.
func withAndWithout(t *testing.T, rules string) (coraza.WAF, *Index, coraza.WAF, error) {
	t.Helper()
	with, ix := compile(t, rules)
	_, err := ix.Snapshot(with)
	without, werr := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(rules))
	if werr != nil {
		t.Fatal(werr)
	}
	return with, ix, without, err
}

// TestAdditionsOfZero runs requests through the rule set with and
// without the preselection: an addition of 0 to an integer does not
// match; everything else decides and writes as Coraza does.
func TestAdditionsOfZero(t *testing.T) {
	with, ix, without, err := withAndWithout(t, zeroRules)
	if err != nil {
		t.Fatal(err)
	}
	if ix.prelude == nil {
		t.Fatal("no prelude")
	}
	if !slices.Equal(ix.adders, []int{20, 21, 22, 23}) {
		t.Fatalf("adders %v, want [20 21 22 23]", ix.adders)
	}
	for _, c := range []struct {
		query   string
		skipped []int // the additions that do not match
	}{
		// tx.fresh does not exist: setvar creates it, so 21 runs. 22
		// is negated and matches (1 is not >= 2), 23 is and does not.
		{"a=1", []int{20, 22}},
		{"a=evil", nil},
		// "007" is not how Go writes 7: setvar would write "7" (20);
		// after that, 22 adds 0 to "7".
		{"a=odd", []int{22}},
	} {
		a := runPrelude(t, with, ix, c.query, nil)
		b := runPrelude(t, without, nil, c.query, append(c.skipped, ix.PreludeIDs()...))
		if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
			t.Errorf("%s: with the preselection %+v, without %+v", c.query, a, b)
		}
	}
	if q := ix.Quiet(); !q[20] || !q[21] || !q[22] || q[10] {
		t.Errorf("Quiet %v: want the additions, not rule 10", q)
	}

	// Without a prelude (a rule reads MATCHED_VAR before it matches),
	// every addition matches as in Coraza.
	sameWithoutPrelude(t, zeroRules)
}

// TestAdditionsOfZero_screened: the screen of phase 2 judges the
// additions once what they add is final, which it is where every rule
// that may write it (10, 11) is dropped, and drops those that add 0, as
// it drops 30 then, whose total only those rules write (the prelude
// removes 23, which never matches). Where 10 is kept, the screen leaves
// 20, 21, 22 and 30 for later.
func TestAdditionsOfZero_screened(t *testing.T) {
	with, ix, _, err := withAndWithout(t, zeroRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query            string
		screened, remove int
	}{
		// 10, 11, 20, 22 and 30 dropped; 21 creates tx.fresh.
		{"a=1", 6, 5},
		// 10 kept, 11 dropped.
		{"a=evil", 2, 1},
	} {
		var reports []Report
		OnScreen = func(r Report) {
			if r.Phase == 2 {
				reports = append(reports, r)
			}
		}
		runPrelude(t, with, ix, c.query, nil)
		OnScreen = nil
		if len(reports) == 0 || reports[0].Screened != c.screened || reports[0].Removed != c.remove {
			t.Errorf("%s: phase 2 screens %+v, want the first to judge %d rules and remove %d", c.query, reports, c.screened, c.remove)
		}
	}
}

// TestConstantTX: the screens read from the prelude the TX values that no
// rule left to the transactions writes.
func TestConstantTX(t *testing.T) {
	_, ix, _, err := withAndWithout(t, zeroRules)
	if err != nil {
		t.Fatal(err)
	}
	// TX:0 to TX:10 are Coraza's own, empty in each new transaction; no
	// rule here captures.
	got := slices.DeleteFunc(slices.Sorted(maps.Keys(ix.constTX)), func(k string) bool { return strings.Trim(k, "0123456789") == "" })
	if !slices.Equal(got, []string{"pl"}) {
		t.Errorf("constant TX keys %v, want [pl] (10 and 11 write score and total)", got)
	}
	// A SecRuleUpdateActionById may add a setvar to any rule.
	_, ix, _, err = withAndWithout(t, zeroRules+`SecRuleUpdateActionById 10 "setvar:tx.pl=2"`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.constTX) != 0 {
		t.Errorf("with an updated rule: constant TX keys %v, want none", ix.constTX)
	}
}

// sameWithoutPrelude adds to rules one that reads MATCHED_VAR before it
// matches, which leaves the rule set without a prelude, and checks that a
// request then decides, matches and writes TX as in Coraza.
func sameWithoutPrelude(t *testing.T, rules string) {
	t.Helper()
	rules += `SecRule MATCHED_VAR "@streq x" "id:90,phase:2,pass,nolog"` + "\n"
	with, ix, without, _ := withAndWithout(t, rules)
	if ix.prelude != nil {
		t.Fatal("a prelude despite the MATCHED_VAR rule")
	}
	a, b := runPrelude(t, with, ix, "a=1", nil), runPrelude(t, without, nil, "a=1", nil)
	if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
		t.Errorf("without a prelude: with the preselection %+v, without %+v", a, b)
	}
}

func TestTargetRemovalsOf(t *testing.T) {
	tagged := map[string][]int{"perf": {10, 11}}
	for rule, want := range map[string][]targetRemoval{
		`SecRule REQUEST_FILENAME "!@validateByteRange 47,97-122" "id:5,phase:1,pass,t:none,nolog,tag:'x',ctl:ruleRemoveTargetByTag=perf;REQUEST_FILENAME"`: {{ids: []int{10, 11}, variable: variables.RequestFilename}},
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=perf;ARGS:Foo"`:                                              {{ids: []int{10, 11}, variable: variables.Args, key: "foo"}},
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=none;ARGS"`:                                                  {{variable: variables.Args}},
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,log,ctl:ruleRemoveTargetByTag=perf;ARGS"`:                                                    nil, // logs
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,setvar:tx.a=1,ctl:ruleRemoveTargetByTag=perf;ARGS"`:                                    nil, // writes TX
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveById=10"`:                                                                nil,
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=perf;ARGS:/^a/"`:                                             nil, // a regexp key
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=perf;NO_SUCH_VARIABLE"`:                                      nil,
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=perf"`:                                                       nil,
		`SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,chain,ctl:ruleRemoveTargetByTag=perf;ARGS"`:                                            nil,
	} {
		got := withRules(targetRemovalsOf(observed{id: 5, raw: rule, parsed: parseRule(rule)}), tagged)
		if len(got) != len(want) || (len(got) == 1 && (!slices.Equal(got[0].ids, want[0].ids) || got[0].variable != want[0].variable || got[0].key != want[0].key)) {
			t.Errorf("%s: %+v, want %+v", rule, got, want)
		}
	}
	rule := `SecRule REQUEST_FILENAME "@rx ^/a" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=perf;ARGS"`
	if got := withRules(targetRemovalsOf(observed{id: 5, raw: rule, parsed: parseRule(rule)}), nil); got != nil {
		t.Errorf("without the tags: %+v", got)
	}
}

// targetRules remove a target by tag in the CRS's 941010 way.
const targetRules = `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.pl=1"
SecRule REQUEST_FILENAME "!@validateByteRange 47,97-122" "id:5,phase:1,pass,t:none,nolog,ctl:ruleRemoveTargetByTag=perf;REQUEST_FILENAME"
SecRule REQUEST_FILENAME|ARGS "@contains evil" "id:10,phase:2,deny,status:403,log,msg:'evil',tag:'perf'"
SecRule REQUEST_FILENAME "@contains bad" "id:11,phase:2,deny,status:403,log,msg:'bad',tag:'other',tag:'perf'"
SecRule REQUEST_FILENAME "@contains ugly" "id:12,phase:2,deny,status:403,log,msg:'ugly',tag:'perf'"
SecRule REQUEST_FILENAME "@contains odd" "id:13,phase:2,deny,status:403,log,msg:'odd'"
SecRuleRemoveById 12
`

// TestTargetRemovals runs requests through the rule set with and without
// the preselection: rule 5 does not match, and the targets it removes
// are removed all the same.
func TestTargetRemovals(t *testing.T) {
	with, ix, without, err := withAndWithout(t, targetRules)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ix.adders, []int{5}) {
		t.Fatalf("adders %v, want [5]", ix.adders)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/evil", 0},          // rule 5 matches: rule 10 no longer reads the path
		{"/evil?a=evil", 403}, // but still ARGS
		{"/bad", 0},           // nor does 11, tagged among others
		{"/ugly", 0},          // 12 was removed
		{"/odd", 403},         // 13 has not the tag
		{"/evil1", 403},       // a digit: rule 5 does not match
		{"/bad1", 403},
	} {
		a := runPrelude(t, with, ix, c.path, nil)
		b := runPrelude(t, without, nil, c.path, append([]int{5}, ix.PreludeIDs()...))
		if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
			t.Errorf("%s: with the preselection %+v, without %+v", c.path, a, b)
		}
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d", c.path, a.status, c.status)
		}
	}
}

// TestAdders_crs pins the CRS rules whose effects the operators make
// themselves, in rule-set order: 941010 (its ctl removing targets by
// tag), then the score sums of REQUEST-949 (phases 1 and 2) and
// RESPONSE-959 (phases 3 and 4), blocking and detection for each
// paranoia level 1 to 4. Each is a SecRule on one TX value with pass,
// nolog and one addition of a TX value for its only effect; the
// SecActions 9x9059 and 9x9159 that reset the sums are not additions. At
// paranoia level 1 only the eight sums of level 1 (9x9052, 9x9152,
// 9x9060, 9x9160) match; the others are adders all the same.
func TestAdders_crs(t *testing.T) {
	waf, ix := compile(t, "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf")
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	want := []int{
		941010,
		949052, 949152, 949053, 949153, 949054, 949154, 949055, 949155, // phase 1
		949060, 949160, 949061, 949161, 949062, 949162, 949063, 949163, // phase 2
		959052, 959152, 959053, 959153, 959054, 959154, 959055, 959155, // phase 3
		959060, 959160, 959061, 959161, 959062, 959162, 959063, 959163, // phase 4
	}
	if !slices.Equal(ix.adders, want) {
		t.Errorf("adders (%d) %v,\nwant (%d) %v", len(ix.adders), ix.adders, len(want), want)
	}
	// 941010's removals leave out the rules the prelude removes from
	// every transaction, and only those.
	removed := removedIDs(ix.prelude)
	for _, tr := range ix.ctlTriggers {
		for _, c := range tr.ctls {
			kept := 0
			for _, id := range c.ids {
				if removed[id] {
					t.Errorf("tag %s: rule %d, which the prelude removes, still has its target removed", c.tag, id)
				}
				kept++
			}
			if c.tag == "xss-perf-disable" && (kept < 20 || !slices.Contains(c.ids, 941100)) {
				t.Errorf("tag %s: %d rules left %v, want the level-1 ones (941100 among them)", c.tag, kept, c.ids)
			}
		}
	}
	if len(ix.ctlTriggers) == 0 {
		t.Error("no rule makes its target removals itself")
	}
}

// constRules check a score against a limit only the prelude writes (30
// and 32: judged by a function made once) and against one a rule writes
// (31: its macro is expanded per screen).
const constRules = `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.limit=5,setvar:tx.score=0,setvar:tx.moving=3"
SecRule ARGS "@contains evil" "id:10,phase:2,pass,log,msg:'evil',setvar:'tx.score=+5',setvar:'tx.moving=+1'"
SecRule TX:SCORE "@lt %{tx.limit}" "id:30,phase:2,pass,log,msg:'under the limit'"
SecRule TX:SCORE "@lt %{tx.moving}" "id:31,phase:2,pass,log,msg:'under the moving limit'"
SecRule TX:SCORE "@ge %{tx.limit}" "id:32,phase:2,deny,status:403,log,msg:'over the limit'"
`

// TestConstantJudges: a rule whose argument expands only constant TX
// values is judged by one function made at Snapshot, and decides as in
// Coraza; one whose argument a rule may change is not.
func TestConstantJudges(t *testing.T) {
	with, ix, without, err := withAndWithout(t, constRules)
	if err != nil {
		t.Fatal(err)
	}
	judged := map[int]bool{}
	for _, r := range ix.plans[types.PhaseRequestBody].rules {
		judged[r.id] = r.judge != nil
	}
	if !judged[30] || judged[31] || !judged[32] {
		t.Errorf("rules with a judge made once: %v, want 30 and 32, not 31", judged)
	}
	for _, query := range []string{"a=1", "a=evil", "a=evil&b=evil"} {
		a := runPrelude(t, with, ix, query, nil)
		b := runPrelude(t, without, nil, query, ix.PreludeIDs())
		if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
			t.Errorf("%s: with the preselection %+v, without %+v", query, a, b)
		}
	}
}
