package preselect

import (
	"slices"
	"testing"

	"github.com/corazawaf/coraza/v3"
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
SecRule TX:TOTAL "@ge 5" "id:30,phase:2,deny,status:403,log,msg:'total'"
`

// TestAdditionsOfZero runs requests through the rule set with and
// without the preselection: an addition of 0 to an integer does not
// match; everything else decides and writes as Coraza does.
func TestAdditionsOfZero(t *testing.T) {
	with, ix := compile(t, zeroRules)
	if _, err := ix.Snapshot(with); err != nil {
		t.Fatal(err)
	}
	without, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(zeroRules))
	if err != nil {
		t.Fatal(err)
	}
	if ix.prelude == nil {
		t.Fatal("no prelude")
	}
	if !slices.Equal(ix.adders, []int{20, 21}) {
		t.Fatalf("adders %v, want [20 21]", ix.adders)
	}
	for _, c := range []struct {
		query   string
		skipped []int // the additions that do not match
	}{
		// tx.fresh does not exist: setvar creates it, so 21 runs.
		{"a=1", []int{20}},
		{"a=evil", nil},
		// "007" is not how Go writes 7: setvar would write "7".
		{"a=odd", nil},
	} {
		a := runPrelude(t, with, ix, c.query, nil)
		b := runPrelude(t, without, nil, c.query, append(c.skipped, ix.PreludeIDs()...))
		if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
			t.Errorf("%s: with the preselection %+v, without %+v", c.query, a, b)
		}
	}
	if q := ix.Quiet(); !q[20] || !q[21] || q[10] {
		t.Errorf("Quiet %v: want the additions, not rule 10", q)
	}

	// Without a prelude (a rule reads MATCHED_VAR before it matches),
	// every addition matches as in Coraza.
	rules := zeroRules + `SecRule MATCHED_VAR "@streq x" "id:40,phase:2,pass,nolog"` + "\n"
	with, ix = compile(t, rules)
	_, _ = ix.Snapshot(with)
	without, err = coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(rules))
	if err != nil {
		t.Fatal(err)
	}
	if ix.prelude != nil {
		t.Fatal("a prelude despite the MATCHED_VAR rule")
	}
	a, b := runPrelude(t, with, ix, "a=1", nil), runPrelude(t, without, nil, "a=1", nil)
	if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
		t.Errorf("without a prelude: with the preselection %+v, without %+v", a, b)
	}
}
