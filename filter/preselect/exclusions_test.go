package preselect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// exclusionRules: rule 1 reads names, values and one header; rule 2 the
// same with a chained rule that reads names (its exclusions would reach
// the chained rule); rule 3 matches in the names; rule 4 reads two
// headers by key.
const exclusionRules = `SecRuleEngine On
SecRule ARGS_NAMES|ARGS|REQUEST_HEADERS:User-Agent "@rx attack" "id:1,phase:2,pass,log,msg:'one',logdata:'%{MATCHED_VAR_NAME}=%{MATCHED_VAR}',t:none,t:lowercase"
SecRule ARGS_NAMES|ARGS "@rx attack" "id:2,phase:2,pass,log,msg:'two',t:none,t:lowercase,chain"
	SecRule ARGS_NAMES "@rx ." "t:none"
SecRule ARGS|ARGS_NAMES "@rx attackname" "id:3,phase:2,pass,log,msg:'three'"
SecRule REQUEST_HEADERS:User-Agent|REQUEST_HEADERS:Referer|ARGS "@rx attack" "id:4,phase:2,pass,log,msg:'four',t:none,t:lowercase"
`

// exclusionTrace is what a transaction decided: each matched rule with its
// matched data, and its log line.
func exclusionTrace(t *testing.T, waf coraza.WAF, query string, headers ...[2]string) (trace string, excluded int) {
	t.Helper()
	OnScreen = func(r Report) { excluded += r.Excluded }
	defer func() { OnScreen = nil }()
	tx := waf.NewTransactionWithID("x")
	defer tx.Close()
	tx.ProcessConnection("10.1.2.3", 1234, "10.0.0.1", 80)
	tx.ProcessURI("/?"+query, "GET", "HTTP/1.1")
	for _, h := range headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	tx.ProcessRequestHeaders()
	if _, err := tx.ProcessRequestBody(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mr := range tx.MatchedRules() {
		// Coraza keeps a collection's keys in a map, so a rule that
		// matches several keys lists them in no fixed order: compare
		// them sorted.
		var datas []string
		for _, md := range mr.MatchedDatas() {
			datas = append(datas, fmt.Sprintf(" %s:%s=%q", md.Variable().Name(), md.Key(), md.Value()))
		}
		slices.Sort(datas)
		fmt.Fprintf(&b, "%d:%s", mr.Rule().ID(), strings.Join(datas, ""))
		b.WriteString("\n" + mr.ErrorLog() + "\n")
	}
	return b.String(), excluded
}

// TestExclusions: a kept rule is told to skip the collections the screen
// read before the one it matched in, names first, and nothing else; what
// every rule matches, logs and writes is what it does without the
// preselection.
func TestExclusions(t *testing.T) {
	with, ix := compile(t, exclusionRules)
	without, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(exclusionRules))
	if err != nil {
		t.Fatal(err)
	}
	pp := ix.plans[2]
	byID := map[int]*srule{}
	for _, r := range pp.rules {
		byID[r.id] = r
	}
	// Rule 1 may skip ARGS_NAMES, ARGS and REQUEST_HEADERS; 2 nothing
	// (chained); 4 ARGS and REQUEST_HEADERS (its two keys).
	for id, want := range map[int][]variables.RuleVariable{
		1: {variables.Args, variables.ArgsNames, variables.RequestHeaders},
		2: nil,
		3: {variables.Args, variables.ArgsNames},
		4: {variables.Args, variables.RequestHeaders},
	} {
		r := byID[id]
		if r == nil {
			t.Fatalf("rule %d is not in the plan", id)
		}
		var got []variables.RuleVariable
		for _, e := range r.excl {
			got = append(got, e.v)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("rule %d may skip %v, want %v", id, got, want)
		}
	}
	if first := pp.vars[pp.order[0]].v; first != variables.ArgsNames {
		t.Errorf("the screen reads %s first, want ARGS_NAMES", first.Name())
	}
	for _, c := range []struct {
		name    string
		query   string
		headers [][2]string
		// excluded: rule 1 skips ARGS_NAMES when it matches in ARGS;
		// it and 4 skip ARGS (and 1 ARGS_NAMES) when they match in a
		// header only; nothing is skipped for a match in the names.
		excluded int
	}{
		{"in a value", "a=ATTACK&b=x", [][2]string{{"User-Agent", "ua"}}, 1},
		{"in a name", "attackname=1", nil, 0},
		{"in a header", "a=1", [][2]string{{"User-Agent", "an attack"}, {"Referer", "r"}}, 3},
		{"in a header and a value", "a=attack", [][2]string{{"User-Agent", "an attack"}}, 1},
		{"nowhere", "a=1", [][2]string{{"User-Agent", "ua"}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, excluded := exclusionTrace(t, with, c.query, c.headers...)
			want, _ := exclusionTrace(t, without, c.query, c.headers...)
			if got != want {
				t.Errorf("with the preselection:\n%s\nwithout:\n%s", got, want)
			}
			if excluded != c.excluded {
				t.Errorf("%d collections skipped, want %d", excluded, c.excluded)
			}
		})
	}
}
