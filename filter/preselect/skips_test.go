package preselect

import (
	"fmt"
	"slices"
	"testing"

	"github.com/corazawaf/coraza/v3"
)

// skipRules: a skip over one rule on the body processor, as the CRS's
// 920539 over 920540, and the rule the skip lands on once 11 is gone.
const skipRules = `SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_PROCESSOR "@streq JSON" "id:10,phase:2,pass,nolog,skip:1"
SecRule ARGS "@rx attack" "id:11,phase:2,deny,status:403,log"
SecRule ARGS "@rx other" "id:12,phase:2,deny,status:406,log"
`

// runSkip sends a GET with query q, or a JSON POST of body, and returns
// the status, the matched rules and the rules the screens removed.
func runSkip(t *testing.T, waf coraza.WAF, q, body string) (int, []int, int) {
	t.Helper()
	removed := 0
	OnScreen = func(r Report) { removed += r.Removed }
	defer func() { OnScreen = nil }()
	tx := waf.NewTransaction()
	defer tx.Close()
	method := "GET"
	if body != "" {
		method = "POST"
		tx.AddRequestHeader("Content-Type", "application/json")
	}
	tx.ProcessURI("/?"+q, method, "HTTP/1.1")
	status := 0
	it := tx.ProcessRequestHeaders()
	if it == nil && body != "" {
		if it, _, _ = tx.WriteRequestBody([]byte(body)); it != nil {
			t.Fatalf("body: %v", it)
		}
	}
	if it == nil {
		var err error
		if it, err = tx.ProcessRequestBody(); err != nil {
			t.Fatal(err)
		}
	}
	if it != nil {
		status = it.Status
	}
	var ids []int
	for _, mr := range tx.MatchedRules() {
		ids = append(ids, mr.Rule().ID())
	}
	return status, ids, removed
}

// TestSkips: the rule a skip may land on is removed when the skipping
// rule does not match (the skip does not happen), and kept when it does:
// removing it would make the skip land on the next rule.
func TestSkips(t *testing.T) {
	with, _ := compile(t, skipRules)
	without, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(skipRules))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q, body string
		status  int
		removed int // of 11 and 12 (10 is not screened)
	}{
		{"a=1", "", 0, 2},
		{"a=attack", "", 403, 1},
		{"a=other", "", 406, 1},
		{"", `{"a":"other"}`, 406, 0}, // 10 skips 11, kept: 12 still runs
		{"", `{"a":"attack"}`, 0, 1},  // 10 skips 11, which would block
	} {
		name := fmt.Sprintf("q=%q body=%q", c.q, c.body)
		st, ids, removed := runSkip(t, with, c.q, c.body)
		wst, wids, _ := runSkip(t, without, c.q, c.body)
		if st != wst || !slices.Equal(ids, wids) {
			t.Errorf("%s: with the preselection %d %v, without %d %v", name, st, ids, wst, wids)
		}
		if st != c.status || removed != c.removed {
			t.Errorf("%s: status %d, %d rules removed; want %d, %d", name, st, removed, c.status, c.removed)
		}
	}
}

// TestSkips_bodyProcessorChanged: a rule of phase 2 (here a chained one)
// may change REQBODY_PROCESSOR, so 10's decision cannot be read before
// the phase, and the rule its skip lands on stays.
func TestSkips_bodyProcessorChanged(t *testing.T) {
	_, ix := compile(t, skipRules+`SecRule ARGS "@rx x" "id:20,phase:2,pass,nolog,chain"
    SecRule ARGS "@rx y" "ctl:requestBodyProcessor=XML"
`)
	if got := ix.Droppable(2); slices.Contains(got, 11) || !slices.Contains(got, 12) {
		t.Errorf("screened in phase 2: %v, want 12 and not 11", got)
	}
	if reason, _ := ix.Reason(11); reason != reasonSkipWindow {
		t.Errorf("rule 11: reason %q, want %q", reason, reasonSkipWindow)
	}
}
