package preselect

import (
	"slices"
	"testing"
)

func TestSetterOf(t *testing.T) {
	for rule, want := range map[string][]string{
		`SecAction "id:1,phase:2,pass,t:none,nolog,tag:'x',ver:'v',setvar:'tx.Score=0'"`: {"score", "0"},
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a=0,setvar:tx.b=on"`:               {"a", "0", "b", "on"},
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a=0,setvar:tx.A=1"`:                nil, // one key twice
		`SecAction "id:1,phase:2,pass,log,setvar:tx.a=0"`:                                nil, // logs
		`SecAction "id:1,phase:2,pass,nolog,severity:2,setvar:tx.a=0"`:                   nil, // severity
		`SecAction "id:1,phase:2,block,nolog,setvar:tx.a=0"`:                             nil, // no pass
		`SecAction "id:1,phase:2,pass,nolog,skipAfter:END,setvar:tx.a=0"`:                nil,
		`SecAction "id:1,phase:2,pass,nolog,ctl:ruleRemoveById=2,setvar:tx.a=0"`:         nil,
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a=+1"`:                             nil, // arithmetic
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a=-1"`:                             nil,
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a="`:                               nil, // empty
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a"`:                                nil,
		`SecAction "id:1,phase:2,pass,nolog,setvar:!tx.a"`:                               nil, // deletion
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.a=%{tx.b}"`:                        nil, // macro
		`SecAction "id:1,phase:2,pass,nolog,setvar:tx.%{tx.k}=0"`:                        nil,
		`SecAction "id:1,phase:2,pass,nolog,setvar:ip.a=0"`:                              nil,
		`SecAction "id:1,phase:2,pass,nolog"`:                                            nil, // sets nothing
		`SecRule TX:A "@eq 1" "id:1,phase:2,pass,nolog,setvar:tx.a=0"`:                   nil, // has an operator
	} {
		keys, values, ok := setterOf(observed{id: 1, raw: rule, parsed: parseRule(rule)})
		var got []string
		for i := range keys {
			got = append(got, keys[i], values[i])
		}
		if ok != (want != nil) || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", rule, got, ok, want)
		}
	}
}

// setterRules start a score over in phase 2 as the CRS does, after
// rules of phase 1 that may change what the setters write.
const setterRules = `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.score=0,setvar:tx.total=0,setvar:tx.mode=on"
SecRule ARGS "@contains evil" "id:10,phase:1,pass,log,msg:'evil',setvar:'tx.score=+5'"
SecRule ARGS "@contains mode" "id:11,phase:1,pass,log,msg:'mode',setvar:'tx.mode=off'"
SecRule ARGS "@contains twice" "id:12,phase:1,pass,log,msg:'twice',setvar:'tx.score=0'"
SecRule ARGS "@contains x" "id:30,phase:2,pass,log,msg:'x'"
SecAction "id:20,phase:2,pass,nolog,setvar:'tx.score=0'"
SecAction "id:21,phase:2,pass,nolog,setvar:'tx.total=0',setvar:'tx.mode=on'"
SecAction "id:22,phase:2,pass,nolog,setvar:'tx.fresh=1'"
SecRule ARGS "@contains late" "id:31,phase:2,pass,log,msg:'late',setvar:'tx.score=+1'"
SecAction "id:23,phase:2,pass,nolog,setvar:'tx.score=0'"
SecRule TX:SCORE "@ge 5" "id:40,phase:2,deny,status:403,log,msg:'score'"
`

// TestSetters runs requests through setters with and without the
// preselection: a setter whose keys already hold its values is not
// evaluated; every other one is, and TX and the verdict are Coraza's.
func TestSetters(t *testing.T) {
	with, ix, without, err := withAndWithout(t, setterRules)
	if err != nil {
		t.Fatal(err)
	}
	if ix.prelude == nil {
		t.Fatal("no prelude")
	}
	for _, c := range []struct {
		query   string
		skipped []int // the setters not evaluated
	}{
		// tx.fresh does not exist: 22 creates it. 23 comes after 20
		// and 31, which may write its key: judged only when both are
		// dropped.
		{"a=1", []int{20, 21, 23}},
		{"a=evil", []int{21}},
		{"a=mode", []int{20, 23}},
		{"a=evil&b=twice", []int{20, 21, 23}}, // 12 set the score back to 0
		{"a=late", []int{20, 21}},
		{"a=evil&b=x&c=mode", nil},
	} {
		a := runPrelude(t, with, ix, c.query, nil)
		b := runPrelude(t, without, nil, c.query, append(c.skipped, ix.PreludeIDs()...))
		if a.status != b.status || a.tx != b.tx || !slices.Equal(a.matched, b.matched) {
			t.Errorf("%s: with the preselection %+v, without %+v", c.query, a, b)
		}
	}
	if q := ix.Quiet(); !q[20] || !q[21] || !q[22] || !q[23] || q[30] {
		t.Errorf("Quiet %v: want the setters, not rule 30", q)
	}

	// Without a prelude every setter is evaluated.
	sameWithoutPrelude(t, setterRules)
}
