package preselect

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types"
)

// run drives a GET with the query string through phases 1 and 2 and
// returns the IDs of the matched rules and the screens' reports.
func run(t *testing.T, waf coraza.WAF, query string, headers ...[2]string) (matched []int, reports []Report) {
	t.Helper()
	OnScreen = func(r Report) { reports = append(reports, r) }
	defer func() { OnScreen = nil }()
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI("/?"+query, "GET", "HTTP/1.1")
	for _, h := range headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	if it := tx.ProcessRequestHeaders(); it == nil {
		if _, err := tx.ProcessRequestBody(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mr := range tx.MatchedRules() {
		matched = append(matched, mr.Rule().ID())
	}
	return matched, reports
}

// TestScreen_txFrozen: a rule that reads TX is judged by a screen only
// when no rule between the screen and it may write what it reads. Rule 3
// (written by 1, before the screen that rule 2 runs) is judged and
// removed; rule 5 is judged to jump, so the stretch of rule 6 is never
// screened; rule 8 reads what rule 7 may write after the screen, and rule
// 11 what a chained rule of 9 writes: each is judged when the screen drops
// the rule that may write what it reads, and left to Coraza otherwise (it
// matches when that rule wrote). Rule 12 reads a variable no rule writes.
func TestScreen_txFrozen(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.level=1"
SecRule REQUEST_METHOD "@streq GET" "id:2,phase:1,pass,nolog"
SecRule TX:level "@lt 1" "id:3,phase:1,pass,nolog,skipAfter:END1"
SecRule ARGS "@rx attack" "id:4,phase:1,pass,log"
SecRule TX:level "@lt 2" "id:5,phase:1,pass,nolog,skipAfter:END1"
SecRule ARGS "@rx never" "id:6,phase:1,pass,log"
SecMarker END1
SecRule ARGS "@rx x" "id:7,phase:1,pass,log,setvar:tx.level=5"
SecRule TX:level "@eq 5" "id:8,phase:1,pass,log"
SecRule ARGS "@rx y" "id:9,phase:1,pass,chain"
SecRule ARGS "@rx y" "setvar:tx.flag=1"
SecRule TX:flag "@eq 1" "id:11,phase:1,pass,log"
SecRule TX:nobody "@eq 0" "id:12,phase:1,pass,log"
`)
	if got := ix.Droppable(types.PhaseRequestHeaders); !slices.Contains(got, 3) || !slices.Contains(got, 8) {
		t.Fatalf("screened %v: want 3 and 8 among them", got)
	}
	for _, c := range []struct {
		query  string
		want   []int
		judged []int
	}{
		// A screen from rule 2 judges 2, 3, 4, 5 and, after the jump,
		// 7, 9 and 12 (TX:nobody has no value), and 8 or 11 or both,
		// where 7 or 9 is dropped; 6 is never reached. The one of 8
		// and 11 left is judged by a second screen, from itself.
		{"q=x", []int{1, 2, 5, 7, 8}, []int{8, 1}},
		{"q=y", []int{1, 2, 5, 9, 11}, []int{8, 1}},
		{"q=attack", []int{1, 2, 4, 5}, []int{9}},
	} {
		matched, reports := run(t, waf, c.query)
		if !slices.Equal(matched, c.want) {
			t.Errorf("%s: matched %v, want %v", c.query, matched, c.want)
		}
		var judged []int
		for _, r := range reports {
			judged = append(judged, r.Screened)
		}
		if !slices.Equal(judged, c.judged) {
			t.Errorf("%s: reports %+v, want screens that judged %v rules", c.query, reports, c.judged)
		}
	}
}

// TestScreen_negationsAndCounts: a negated operator is judged as Coraza
// evaluates it (a match is a value the operator rejects), and a count as
// the one value Coraza evaluates, the number.
func TestScreen_negationsAndCounts(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecRule REQUEST_HEADERS:Host "!@rx ^good\.example$" "id:1,phase:1,pass,log"
SecRule &REQUEST_HEADERS:X-Missing "@eq 0" "id:2,phase:1,pass,log"
SecRule &ARGS "@eq 0" "id:3,phase:1,pass,log"
SecRule &ARGS:a "@eq 2" "id:4,phase:1,pass,log"
SecRule &REQUEST_HEADERS:Host "@eq 1" "id:5,phase:1,pass,log"
`)
	if got := ix.Droppable(types.PhaseRequestHeaders); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("screened %v", got)
	}
	for _, c := range []struct {
		query, host string
		want        []int
	}{
		{"a=1&a=2", "good.example", []int{2, 4, 5}},
		{"b=1", "bad.example", []int{1, 2, 5}},
	} {
		matched, reports := run(t, waf, c.query, [2]string{"Host", c.host})
		if !slices.Equal(matched, c.want) {
			t.Errorf("%s, host %s: matched %v, want %v", c.query, c.host, matched, c.want)
		}
		if len(reports) != 1 || reports[0].Removed != 5-len(c.want) {
			t.Errorf("%s: reports %+v, want %d removed", c.query, reports, 5-len(c.want))
		}
	}
}

// TestScreen_txMacro: an operator whose argument reads TX through a macro
// is judged with the argument expanded, when what it reads is final.
func TestScreen_txMacro(t *testing.T) {
	waf, ix := compile(t, `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.threshold=5,setvar:tx.methods=GET HEAD"
SecRule ARGS "@rx a" "id:2,phase:2,pass,log,setvar:tx.score=+3"
SecRule ARGS "@rx b" "id:3,phase:2,pass,log,setvar:tx.score=+3"
SecRule TX:score "@ge %{tx.threshold}" "id:4,phase:2,pass,log"
SecRule REQUEST_METHOD "!@within %{tx.methods}" "id:5,phase:2,pass,log"
`)
	if got := ix.Droppable(types.PhaseRequestBody); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("screened %v", got)
	}
	for _, c := range []struct {
		query string
		want  []int
	}{
		{"x=a", []int{1, 2}},
		{"x=a&y=b", []int{1, 2, 3, 4}},
	} {
		if matched, _ := run(t, waf, c.query); !slices.Equal(matched, c.want) {
			t.Errorf("%s: matched %v, want %v", c.query, matched, c.want)
		}
	}
}

// TestIndex_txReasons: the rules that read TX or count in a way a screen
// cannot follow are always evaluated, each for its reason.
func TestIndex_txReasons(t *testing.T) {
	_, ix := compile(t, `SecRuleEngine On
SecRule TX "@rx a" "id:1,phase:2,pass"
SecRule TX:/^a/ "@rx a" "id:2,phase:2,pass"
SecRule &ARGS|!ARGS:foo "@eq 1" "id:3,phase:2,pass"
SecRule &ARGS "@eq 1" "id:4,phase:2,pass,tag:'t4'"
SecRule ARGS "@rx z" "id:5,phase:1,pass,ctl:ruleRemoveTargetByTag=t4;ARGS:foo"
SecRule ARGS "@streq %{request_headers.host}" "id:6,phase:2,pass"
SecRule &ARGS:/^a/ "@eq 1" "id:7,phase:2,pass"
`)
	for id, want := range map[int]string{1: reasonTarget, 2: reasonTarget, 3: reasonCount, 4: reasonCount, 6: reasonMacro, 7: reasonCount} {
		if got, ok := ix.Reason(id); !ok || got != want {
			t.Errorf("rule %d: reason %q (%v), want %q", id, got, ok, want)
		}
	}
	// A removal of another collection's targets changes no count of the
	// rule's: rule 8 stays screened beside a removal of its XML targets,
	// rule 9 not beside one of its headers, nor rule 10 beside one whose
	// target cannot be read.
	_, ix = compile(t, `SecRuleEngine On
SecRule &REQUEST_HEADERS:Host "@eq 0" "id:8,phase:2,pass,tag:'t8'"
SecRule &REQUEST_HEADERS:Host "@eq 0" "id:9,phase:2,pass,tag:'t9'"
SecRule &REQUEST_HEADERS:Host "@eq 0" "id:10,phase:2,pass,tag:'t10'"
SecRule ARGS "@rx z" "id:11,phase:1,pass,ctl:ruleRemoveTargetByTag=t8;XML://@*,ctl:ruleRemoveTargetByTag=t9;REQUEST_HEADERS:Host,ctl:ruleRemoveTargetById=10;%{tx.x}"
`)
	if got, ok := ix.Reason(8); ok {
		t.Errorf("a count beside a removal of XML targets: reason %q, want screened", got)
	}
	for _, id := range []int{9, 10} {
		if got, ok := ix.Reason(id); !ok || got != reasonCount {
			t.Errorf("rule %d: reason %q (%v), want %q", id, got, ok, reasonCount)
		}
	}
	_, ix = compile(t, `SecRuleEngine On
SecDefaultAction "phase:2,pass,log,setvar:tx.x=1"
SecRule TX:x "@eq 1" "id:1,phase:2,pass"
SecRule ARGS "@rx a" "id:2,phase:2,pass"
`)
	if got, ok := ix.Reason(1); !ok || got != reasonDefaultsTX {
		t.Errorf("with a SecDefaultAction that writes TX: reason %q (%v), want %q", got, ok, reasonDefaultsTX)
	}
	if _, ok := ix.Reason(2); ok {
		t.Error("with a SecDefaultAction that writes TX: rule 2, which does not read TX, is not screened")
	}
}

// TestChainWrites reads what each rule and its chain may write.
func TestChainWrites(t *testing.T) {
	texts := []string{`
SecRule ARGS "@rx a" "id:1,phase:1,pass,setvar:'tx.a=1',chain"
    SecRule ARGS "@rx b" "setvar:tx.B=+%{tx.c}"
SecAction "id:2,phase:1,pass,setvar:!tx.gone,setvar:'tx.pre_%{MATCHED_VAR_NAME}=1'"
SecRule ARGS "@rx (x)" "id:3,phase:1,pass,capture"
SecRule ARGS "@rx y" \
    "id:4,phase:1,pass,\
    setvar:tx.%{tx.0}=1"
SecRule ARGS "@rbl x" "id:5,phase:1,pass"
SecRule ARGS "@rx y" "id:6,phase:1,pass,myplugin:1"
SecRule ARGS "@rx m" "id:8,phase:1,pass,chain"
    SecRule ARGS "@rx n" \
        "setvar:tx.chained_key=1"
SecRule ARGS "@rx o" \
    "id:9,phase:1,pass,setvar:tx.zz=1"
SecRule ARGS "@rx y" "id:7,phase:1,pass,chain"
Include other.conf
`}
	set := ReadRuleSet(texts[0], fstest.MapFS{"other.conf": {Data: []byte("\n")}})
	w := set.chainWrites(nil)
	// The rules read already give the same answer.
	known := map[string]*parsedRule{}
	eachLine(texts[0], func(l string) bool {
		p := parseRule(strings.Clone(l))
		known[strings.Clone(l)] = &p
		return true
	}, nil)
	if !reflect.DeepEqual(set.chainWrites(known), w) {
		t.Error("with the rules read already, chainWrites answers otherwise")
	}
	touches := func(raw, key string) bool {
		e := w[raw]
		if e == nil {
			t.Fatalf("no entry for %s", raw)
		}
		return e.touches(key)
	}
	for _, c := range []struct {
		raw, key string
		want     bool
	}{
		{`SecRule ARGS "@rx a" "id:1,phase:1,pass,setvar:'tx.a=1',chain"`, "a", true},
		{`SecRule ARGS "@rx a" "id:1,phase:1,pass,setvar:'tx.a=1',chain"`, "b", true},
		{`SecRule ARGS "@rx a" "id:1,phase:1,pass,setvar:'tx.a=1',chain"`, "c", false},
		{`SecAction "id:2,phase:1,pass,setvar:!tx.gone,setvar:'tx.pre_%{MATCHED_VAR_NAME}=1'"`, "gone", true},
		{`SecAction "id:2,phase:1,pass,setvar:!tx.gone,setvar:'tx.pre_%{MATCHED_VAR_NAME}=1'"`, "pre_q", true},
		{`SecAction "id:2,phase:1,pass,setvar:!tx.gone,setvar:'tx.pre_%{MATCHED_VAR_NAME}=1'"`, "prefix", false},
		{`SecRule ARGS "@rx (x)" "id:3,phase:1,pass,capture"`, "0", true},
		{`SecRule ARGS "@rx (x)" "id:3,phase:1,pass,capture"`, "level", false},
		{`SecRule ARGS "@rx y" "id:4,phase:1,pass,setvar:tx.%{tx.0}=1"`, "anything", true},
		{`SecRule ARGS "@rbl x" "id:5,phase:1,pass"`, "httpbl_msg", true},
		{`SecRule ARGS "@rx y" "id:6,phase:1,pass,myplugin:1"`, "anything", true},
		{`SecRule ARGS "@rx y" "id:7,phase:1,pass,chain"`, "anything", true},
		// A chained rule's keys outlive its continued line.
		{`SecRule ARGS "@rx m" "id:8,phase:1,pass,chain"`, "chained_key", true},
		{`SecRule ARGS "@rx m" "id:8,phase:1,pass,chain"`, "zz", false},
	} {
		if got := touches(c.raw, c.key); got != c.want {
			t.Errorf("%s writes %q: %v, want %v", c.raw, c.key, got, c.want)
		}
	}
}

// TestScreen_keyedTargets: a rule that reads a collection by key beside
// whole collections is judged on that key's values alone, as Coraza reads
// them. Rule 1 reads the User-Agent header: an Accept header with its
// pattern does not keep it, a User-Agent with it makes it match. Past the
// slots for keys (maxSlots), a keyed target is read as its whole
// collection, which keeps more rules but removes none that matches, and a
// whole collection read after them still has its slot.
func TestScreen_keyedTargets(t *testing.T) {
	rules := `SecRuleEngine On
SecRule REQUEST_HEADERS "@rx zzz" "id:10,phase:1,pass,log"
SecRule REQUEST_HEADERS:User-Agent|ARGS "@rx xhtml" "id:1,phase:1,pass,log"
SecRule REQUEST_HEADERS:Referer|ARGS_NAMES "@contains evil" "id:2,phase:1,pass,log,t:lowercase"
`
	for i := 0; i < 70; i++ {
		rules += fmt.Sprintf("SecRule REQUEST_HEADERS:X-K%d|ARGS \"@contains v%dx\" \"id:%d,phase:1,pass,log\"\n", i, i, 100+i)
	}
	// A collection no rule read before, once the slots are taken: the
	// rule must still be judged on it (or left to Coraza).
	rules += "SecRule REQUEST_COOKIES|ARGS_NAMES \"@contains zq\" \"id:300,phase:1,pass,log\"\n"
	waf, _ := compile(t, rules)
	for _, c := range []struct {
		name    string
		headers [][2]string
		want    []int
		// kept is how many of the 73 rules after rule 10 the screen
		// leaves to Coraza (it judges rule 10 too, which runs it).
		kept int
	}{
		{"another header has the pattern", [][2]string{{"Accept", "application/xhtml+xml"}, {"User-Agent", "curl"}, {"Referer", "an EVIL site"}}, []int{2}, 1},
		{"the key's value has it", [][2]string{{"User-Agent", "xhtml browser"}, {"X-K3", "v3x"}, {"X-K69", "v69x"}}, []int{1, 103, 169}, 3},
		// 103 reads X-K3 alone; 169 is past the slots for keys
		// (User-Agent, Referer, X-K0 to X-K29) and reads every header.
		{"only other keys' values have it", [][2]string{{"X-K4", "v3x v69x"}, {"Referer", "fine"}}, nil, 1},
		{"a collection past the slots", [][2]string{{"Cookie", "a=zq"}}, []int{300}, 1},
		// X-K29 takes the last slot for keys, X-K30 is the first past.
		{"the last key with a slot", [][2]string{{"X-K28", "v29x"}}, nil, 0},
		{"the first key past the slots", [][2]string{{"X-K28", "v30x"}}, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			matched, reports := run(t, waf, "a=1", c.headers...)
			if !slices.Equal(matched, c.want) {
				t.Errorf("matched %v, want %v", matched, c.want)
			}
			removed := 0
			for _, r := range reports {
				removed += r.Removed
			}
			if kept := 74 - removed; kept != c.kept {
				t.Errorf("the screen kept %d rules, want %d (%+v)", kept, c.kept, reports)
			}
		})
	}
}

// TestLowerIs compares lowerIs with strings.ToLower, the way Coraza's
// maps fold keys.
func TestLowerIs(t *testing.T) {
	keys := []string{"", "a", "User-Agent", "user-agent", "USER-AGENT", "user-agenT", "x-ĸ", "\u212a", "k", "ſ", "s",
		"\xff", "\ufffd", "ÀB", "àb", "user-agent ", "Content-Type"}
	for _, s := range keys {
		for _, k := range keys {
			lower := strings.ToLower(k)
			if got, want := lowerIs(s, lower), strings.ToLower(s) == lower; got != want {
				t.Errorf("lowerIs(%q, %q) = %v, want %v", s, lower, got, want)
			}
		}
	}
}
