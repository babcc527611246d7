package preselect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
)

// preludeRun is what one GET did: the rules that matched (but those of
// skip, which the prelude stands for) and the TX collection after
// phase 2, sorted, without the empty capture slots.
type preludeRun struct {
	matched []int
	tx      string
	status  int
}

// requestPhases runs phases 1 and 2 of tx and returns the status of its
// interruption, 0 for none.
func requestPhases(t *testing.T, tx types.Transaction) int {
	t.Helper()
	it := tx.ProcessRequestHeaders()
	if it == nil {
		var err error
		if it, err = tx.ProcessRequestBody(); err != nil {
			t.Fatal(err)
		}
	}
	if it != nil {
		return it.Status
	}
	return 0
}

func runPrelude(t *testing.T, waf coraza.WAF, ix *Index, query string, skip []int) preludeRun {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	if ix != nil {
		ix.Start(tx)
	}
	uri := "/?" + query
	if strings.HasPrefix(query, "/") {
		uri = query // a path, with its query
	}
	tx.ProcessURI(uri, "GET", "HTTP/1.1")
	tx.AddRequestHeader("Host", "example.com")
	run := preludeRun{status: requestPhases(t, tx)}
	for _, mr := range tx.MatchedRules() {
		if id := mr.Rule().ID(); !slices.Contains(skip, id) {
			run.matched = append(run.matched, id)
		}
	}
	var kv []string
	for _, md := range tx.(plugintypes.TransactionState).Variables().TX().FindAll() {
		if k := md.Key(); strings.Trim(k, "0123456789") != "" || md.Value() != "" {
			kv = append(kv, k+"="+md.Value())
		}
	}
	sort.Strings(kv)
	run.tx = strings.Join(kv, " ")
	return run
}

// preludeRules is an opening in the CRS's shape: a setup SecAction,
// defaults that apply when the setup did not set the key, a check that
// the setup ran (never matches), a body-processor rule (left to Coraza),
// a gate that jumps over a rule that would block, and a second gate on a
// level a request may change, after the opening.
const preludeRules = `SecRuleEngine On
SecAction "id:900000,phase:1,pass,nolog,setvar:tx.setup=1,setvar:tx.level=1"
SecRule &TX:setup "@eq 0" "id:901001,phase:1,deny,status:500,log,msg:'no setup'"
SecRule &TX:level "@eq 0" "id:901100,phase:1,pass,nolog,setvar:tx.level=2"
SecRule &TX:limit "@eq 0" "id:901110,phase:1,pass,nolog,setvar:tx.limit=5"
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:200001,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecAction "id:901200,phase:1,pass,nolog,setvar:tx.score=0,setvar:'tx.copy=%{tx.limit}'"
SecRule TX:level "@lt 2" "id:901400,phase:1,pass,nolog,skipAfter:END-OPENING"
SecRule ARGS "@rx ." "id:901410,phase:1,deny,status:403,log"
SecMarker END-OPENING
SecRule ARGS:pl "@rx ^[0-9]$" "id:905100,phase:1,pass,nolog,capture,setvar:tx.level=%{tx.1}"
SecRule TX:level "@lt 3" "id:911013,phase:1,pass,nolog,skipAfter:END-911"
SecRule ARGS "@rx attack" "id:911100,phase:1,pass,log,setvar:tx.score=+%{tx.limit}"
SecMarker END-911
SecRule TX:limit "@lt 2" "id:912013,phase:2,pass,nolog,skipAfter:END-912"
SecRule ARGS "@rx level2" "id:912100,phase:2,pass,log,setvar:tx.score=+1"
SecMarker END-912
SecRule TX:score "@ge %{tx.limit}" "id:949110,phase:2,deny,status:403,log"
`

// TestPrelude_sameDecisions: the opening (900000 to 901400, and the rule
// 901400 jumps over) is one prelude; a transaction started past it decides
// and writes what one that evaluates it does, for requests that match
// nothing, match past the opening, block, and change the level the later
// gate reads. The gate of phase 2 reads only constant TX and never
// matches, so it is removed too; 911013 reads a key a request may write
// before it and stays.
func TestPrelude_sameDecisions(t *testing.T) {
	waf, ix := compile(t, preludeRules)
	n, err := ix.Snapshot(waf)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{900000, 901001, 901100, 901110, 901200, 901400, 901410, 912013}
	if got := ix.PreludeIDs(); !slices.Equal(got, want) || n != len(want) {
		t.Fatalf("prelude %v (%d), want %v", got, n, want)
	}
	for _, q := range []string{"a=b", "x=attack", "x=attack&y=attack&z=attack", "pl=5&x=attack", "pl=1&x=level2"} {
		without, with := runPrelude(t, waf, nil, q, want), runPrelude(t, waf, ix, q, want)
		if fmt.Sprint(without) != fmt.Sprint(with) {
			t.Errorf("%s:\nwithout the prelude %+v\nwith it            %+v", q, without, with)
		}
	}
	// The values themselves: what the opening's rules leave.
	if got := runPrelude(t, waf, ix, "a=b", want).tx; got != "copy=5 level=1 limit=5 score=0 setup=1" {
		t.Errorf("TX after a benign request: %s", got)
	}
}

// TestPrelude_stops: the opening ends at the first rule that is neither
// constant, nor left to Coraza without reading or writing TX, nor judged
// on TX alone: here a rule that writes TX from the request, before the
// defaults. Only the rules before it are in the prelude; a default after
// it is evaluated by Coraza, as is the check that reads what it writes.
func TestPrelude_stops(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=1"
SecRule ARGS:b "@rx ." "id:2,phase:1,pass,nolog,setvar:tx.b=1"
SecRule &TX:b "@eq 0" "id:3,phase:1,pass,nolog,setvar:tx.b=0"
SecRule TX:b "@eq 1" "id:4,phase:1,pass,log"
`)
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	if got := ix.PreludeIDs(); !slices.Equal(got, []int{1}) {
		t.Fatalf("prelude %v, want [1]", got)
	}
	for _, q := range []string{"x=1", "b=1"} {
		without, with := runPrelude(t, waf, nil, q, []int{1}), runPrelude(t, waf, ix, q, []int{1})
		if fmt.Sprint(without) != fmt.Sprint(with) {
			t.Errorf("%s:\nwithout the prelude %+v\nwith it            %+v", q, without, with)
		}
	}
	if got := runPrelude(t, waf, ix, "b=1", nil).matched; !slices.Equal(got, []int{2, 4}) {
		t.Errorf("b=1 matched %v, want [2 4]", got)
	}
}

// TestPrelude_refused: a rule set whose check of the opening would match
// (the setup the check asks for is missing) has no prelude, and says why;
// so has one with a SecDefaultAction that runs a ctl for every rule, and
// one whose opening rule a later directive updates.
func TestPrelude_refused(t *testing.T) {
	for _, c := range []struct{ name, rules, err string }{
		{"check matches", `SecRuleEngine On
SecRule &TX:setup "@eq 0" "id:901001,phase:1,deny,status:500,log"
SecRule &TX:level "@eq 0" "id:901100,phase:1,pass,nolog,setvar:tx.level=2"
`, "rule 901001 decides otherwise"},
		{"defaults with ctl", `SecRuleEngine On
SecDefaultAction "phase:1,log,pass,ctl:ruleRemoveById=7"
SecRule &TX:level "@eq 0" "id:901100,phase:1,pass,nolog,setvar:tx.level=2"
`, ""},
		{"updated", `SecRuleEngine On
SecRule &TX:level "@eq 0" "id:901100,phase:1,pass,nolog,setvar:tx.level=2"
SecRuleUpdateActionById 901100 "setvar:tx.other=1"
`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			waf, ix := compile(t, c.rules)
			n, err := ix.Snapshot(waf)
			if n != 0 || len(ix.PreludeIDs()) != 0 {
				t.Fatalf("prelude of %d rules: %v", n, ix.PreludeIDs())
			}
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("error %v, want one with %q", err, c.err)
			}
		})
	}
}

// TestPrelude_skipWindow: a rule judged on constant TX that a skip:N may
// pass over stays, or removing it would move where the skip lands.
func TestPrelude_skipWindow(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=1"
SecRule ARGS:s "@rx ." "id:2,phase:1,pass,nolog,skip:1"
SecRule TX:a "@eq 5" "id:3,phase:1,pass,log"
SecRule ARGS:s "@rx ." "id:4,phase:1,pass,log"
SecRule TX:a "@eq 7" "id:5,phase:1,pass,log"
`)
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	if got := ix.PreludeIDs(); !slices.Equal(got, []int{1, 5}) {
		t.Fatalf("prelude %v, want [1 5]", got)
	}
	if got := runPrelude(t, waf, ix, "s=1", []int{1}).matched; !slices.Equal(got, []int{2, 4}) {
		t.Errorf("s=1 matched %v, want [2 4]: the skip passes over 3 and lands on 4", got)
	}
}

// TestPrelude_crs: on the CRS with its recommended configuration, the
// prelude stands for the initialisation and every paranoia-level gate that
// jumps at level 1, with what each jumps over (942120 is of level 2,
// 942251 of level 3); at paranoia level 2 the gates of level 2 never
// match (removed as such) and the rules they guard stay.
func TestPrelude_crs(t *testing.T) {
	for _, c := range []struct {
		setup      string
		in, notIn  []int
		minRemoved int
	}{
		{"", []int{900990, 901100, 901200, 901400, 942013, 942014, 942120, 942251}, []int{942100, 949110, 901340}, 300},
		{"SecAction \"id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=2\"\n",
			[]int{900000, 901100, 942013, 942014, 942015, 942016, 942251}, []int{942120, 942100}, 100},
	} {
		waf, ix := compile(t, "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\n"+c.setup+"Include @owasp_crs/*.conf")
		n, err := ix.Snapshot(waf)
		if err != nil {
			t.Fatal(err)
		}
		ids := ix.PreludeIDs()
		t.Logf("%d rules in %d ranges and %d single IDs", n, len(ix.prelude.ranges), len(ix.prelude.single))
		if n < c.minRemoved {
			t.Errorf("the prelude stands for %d rules, want at least %d", n, c.minRemoved)
		}
		for _, id := range c.in {
			if !slices.Contains(ids, id) {
				t.Errorf("rule %d is not in the prelude", id)
			}
		}
		for _, id := range c.notIn {
			if slices.Contains(ids, id) {
				t.Errorf("rule %d is in the prelude", id)
			}
		}
	}
}

// TestPrelude_matchedVar: a rule that reads MATCHED_VAR as a target reads
// the last matching rule's, which the prelude would change: such a rule
// set has none.
func TestPrelude_matchedVar(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=1"
SecRule TX:a "@eq 1" "id:2,phase:1,pass,nolog,skipAfter:END"
SecRule ARGS "@rx x" "id:3,phase:1,pass,log"
SecMarker END
SecRule MATCHED_VAR "@streq 1" "id:4,phase:1,pass,log"
`)
	if _, err := ix.Snapshot(waf); err != nil || len(ix.PreludeIDs()) != 0 {
		t.Fatalf("prelude %v (%v), want none", ix.PreludeIDs(), err)
	}
	if got, _ := run(t, waf, "a=b"); !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("matched %v, want [1 2 4]", got)
	}
}

// TestRemovals: removed rules in a run of minRange consecutive IDs (among
// the WAF's) are one range, a run one shorter single IDs; a range never
// holds a rule that stays.
func TestRemovals(t *testing.T) {
	var ids []int
	removed := map[int]bool{}
	for id := 1; id <= 40; id++ {
		ids = append(ids, id*10) // IDs with gaps: only the WAF's count
	}
	mark := func(from, n int) {
		for i := range n {
			removed[ids[from+i]] = true
		}
	}
	mark(0, minRange)    // at the limit: a range
	mark(minRange+1, 1)  // alone
	mark(20, minRange-1) // one short: single IDs
	ranges, single, all := removals(ids, removed)
	if want := [][2]int{{ids[0], ids[minRange-1]}}; !slices.Equal(ranges, want) {
		t.Errorf("ranges %v, want %v", ranges, want)
	}
	wantSingle := []int{ids[minRange+1]}
	wantSingle = append(wantSingle, ids[20:20+minRange-1]...)
	if !slices.Equal(single, wantSingle) {
		t.Errorf("single %v, want %v", single, wantSingle)
	}
	if len(all) != 2*minRange {
		t.Errorf("%d removed, want %d", len(all), 2*minRange)
	}
	for _, r := range ranges {
		for _, id := range ids {
			if id >= r[0] && id <= r[1] && !removed[id] {
				t.Errorf("range %v holds rule %d, which stays", r, id)
			}
		}
	}
}

// TestPrelude_states: the screens start every transaction with the
// prelude's rules decided, so that none of them is judged again: a gate
// that always jumps at paranoia level 1 as matched (942013, "@lt 2"), one
// that never does and what the gates jump over as dropped (942011,
// "@lt 1"; 942120 of level 2; 949053, the addition of the level-2
// score). A GET then gives the same matched rules and TX as with the
// screens judging them, with far fewer rules judged (159 against 242).
// The unions leave the prelude's rules out.
func TestPrelude_states(t *testing.T) {
	waf, ix := compile(t, "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf")
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	stateOf := func(id int) (uint8, bool) {
		for _, pp := range ix.plans {
			if pp == nil {
				continue
			}
			for _, r := range pp.rules {
				if r.id == id {
					return pp.initial[r.idx], true
				}
			}
		}
		return 0, false
	}
	for id, want := range map[int]uint8{942013: matched, 942011: dropped, 942120: dropped, 949053: dropped, 942100: undecided, 949110: undecided} {
		if got, ok := stateOf(id); !ok || got != want {
			t.Errorf("rule %d starts in state %d (in a plan: %v), want %d", id, got, ok, want)
		}
	}
	removed := removedIDs(ix.prelude)
	slots := 0
	for _, pp := range ix.plans {
		if pp == nil {
			continue
		}
		if !pp.united {
			pp.unite() // as the first screen does
		}
		for _, r := range pp.rules {
			if (pp.initial[r.idx] != undecided) != removed[r.id] {
				t.Errorf("rule %d: state %d, removed by the prelude %v", r.id, pp.initial[r.idx], removed[r.id])
			}
			// The union leaves out the rules no screen judges
			// (unite): 934120, of level 2, would report a literal at
			// every letter.
			if r.slot >= 0 && removed[r.id] {
				t.Errorf("rule %d, which the prelude removes, has slot %d in the union", r.id, r.slot)
			}
			if r.slot >= 0 {
				slots++
			}
		}
	}
	if slots < 100 {
		t.Errorf("%d rules in the unions after the prelude, want more", slots)
	}
	if got, _ := stateOf(934120); got != dropped {
		t.Errorf("rule 934120 starts in state %d, want dropped", got)
	}
	judged := 0
	OnScreen = func(r Report) { judged += r.Screened }
	defer func() { OnScreen = nil }()
	query := "/products/42?page=2&sort=price"
	with := runPrelude(t, waf, ix, query, nil)
	withJudged := judged
	initial := map[*phasePlan][]uint8{}
	for _, pp := range ix.plans {
		if pp != nil {
			initial[pp], pp.initial = pp.initial, nil
		}
	}
	judged = 0
	without := runPrelude(t, waf, ix, query, nil)
	for pp, s := range initial {
		pp.initial = s
	}
	if !slices.Equal(with.matched, without.matched) || with.tx != without.tx || with.status != without.status {
		t.Errorf("with the prelude's states: %+v\nwithout: %+v", with, without)
	}
	if withJudged+60 > judged {
		t.Errorf("the screens judged %d rules, %d when they judge the prelude's rules too: want at least 60 fewer", withJudged, judged)
	}
	t.Logf("rules judged on a GET: %d, %d with the prelude's", withJudged, judged)
}

// guardedRules open phase 1 with a guard in the shape of rule 200004 of
// Coraza's recommended configuration (deny when Coraza dropped arguments
// past SecArgumentsLimit), before the constant rules; a rule of the
// logging phase decides on a TX value the opening sets.
const guardedRules = `SecRuleEngine On
SecArgumentsLimit 3
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:200001,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule ARGUMENTS_LIMIT_REACHED "@eq 1" "id:200004,phase:1,t:none,log,deny,status:400,msg:'Argument limit reached'"
SecAction "id:900000,phase:1,pass,nolog,setvar:tx.setup=1,setvar:tx.level=1"
SecRule &TX:level "@eq 0" "id:901100,phase:1,pass,nolog,setvar:tx.level=2"
SecRule ARGS "@rx attack" "id:911100,phase:1,pass,log,setvar:tx.score=+1"
SecRule &TX:setup "@eq 0" "id:980100,phase:5,pass,log,msg:'the setup did not run'"
`

// guardedRun runs a GET through phases 1, 2 and 5 and returns its
// interruption's status, the rules that matched (but the prelude's, which
// are never among them with it) and the TX collection.
func guardedRun(t *testing.T, waf coraza.WAF, ix *Index, query string) string {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	if ix != nil {
		ix.Start(tx)
	}
	tx.ProcessURI("/?"+query, "GET", "HTTP/1.1")
	tx.AddRequestHeader("Host", "example.com")
	status := requestPhases(t, tx)
	tx.ProcessLogging()
	var matched []int
	for _, mr := range tx.MatchedRules() {
		if id := mr.Rule().ID(); id != 900000 && id != 901100 {
			matched = append(matched, id)
		}
	}
	var kv []string
	for _, md := range tx.(plugintypes.TransactionState).Variables().TX().FindAll() {
		if k := md.Key(); strings.Trim(k, "0123456789") != "" || md.Value() != "" {
			kv = append(kv, k+"="+md.Value())
		}
	}
	sort.Strings(kv)
	return fmt.Sprintf("status %d, matched %v, tx %s", status, matched, strings.Join(kv, " "))
}

// TestPrelude_guards: a guard before the constant rules leaves the rule
// set its prelude. A request the guard stops gets no prelude (its TX stays
// empty, and the logging phase sees what Coraza alone gives it); every
// other request gets it. Without SecRuleEngine On the guard stops
// nothing, and Start gives the prelude at once.
func TestPrelude_guards(t *testing.T) {
	plain, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(guardedRules))
	if err != nil {
		t.Fatal(err)
	}
	waf, ix := compile(t, guardedRules)
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	if got := ix.PreludeIDs(); !slices.Equal(got, []int{900000, 901100}) || len(ix.guards) != 1 {
		t.Fatalf("prelude %v with %d guards, want [900000 901100] with one", got, len(ix.guards))
	}
	for q, want := range map[string]string{
		"a=1":             "status 0, matched [], tx level=1 setup=1",
		"a=attack":        "status 0, matched [911100], tx level=1 score=1 setup=1",
		"a=1&b=2&c=3&d=4": "status 400, matched [200004 980100], tx ",
	} {
		without, with := guardedRun(t, plain, nil, q), guardedRun(t, waf, ix, q)
		if without != want || with != want {
			t.Errorf("%s:\nwithout the preselection %s\nwith it                  %s\nwant                     %s", q, without, with, want)
		}
	}

	detect := strings.Replace(guardedRules, "SecRuleEngine On", "SecRuleEngine DetectionOnly", 1)
	waf, ix = compile(t, detect)
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	if got := ix.PreludeIDs(); !slices.Equal(got, []int{900000, 901100}) || ix.guards != nil {
		t.Fatalf("DetectionOnly: prelude %v with %d guards, want [900000 901100] given by Start", got, len(ix.guards))
	}
	if plain, err = coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(detect)); err != nil {
		t.Fatal(err)
	}
	q := "a=1&b=2&c=3&d=4"
	if without, with := guardedRun(t, plain, nil, q), guardedRun(t, waf, ix, q); without != with || !strings.Contains(with, "status 0, matched [200004]") {
		t.Errorf("DetectionOnly, %s:\nwithout the preselection %s\nwith it                  %s", q, without, with)
	}
}

// TestGuardRule: what makes a rule a guard.
func TestGuardRule(t *testing.T) {
	for rule, want := range map[string]bool{
		`SecRule ARGUMENTS_LIMIT_REACHED "@eq 1" "id:1,phase:1,t:none,log,deny,status:400,msg:'x'"`: true,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,t:none,log,drop"`:                            true,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,pass,log"`:                                   false, // aside, not a guard
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,t:lowercase,deny"`:                           false,
		`SecRule URI_PARSE_ERROR "!@eq 0" "id:1,phase:1,deny"`:                                      false,
		`SecRule REQUEST_HEADERS "@rx x" "id:1,phase:1,deny"`:                                       false,
		`SecRule TX:x "@eq 1" "id:1,phase:1,deny"`:                                                  false,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,deny,setvar:tx.a=1"`:                         false,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,deny,ctl:ruleEngine=Off"`:                    false,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,deny,logdata:'%{tx.a}'"`:                     false,
		`SecRule URI_PARSE_ERROR "@eq 1" "id:1,phase:1,deny,chain"`:                                 false,
	} {
		r := observed{id: 1, raw: rule, parsed: parseRule(rule)}
		if got := guardRule(r, directiveFacts{}); got != want {
			t.Errorf("%s: guard %v, want %v", rule, got, want)
		}
	}
}
