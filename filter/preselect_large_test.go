package filter

import (
	"strings"
	"testing"
)

// largeValueRules is an operator's own rule set whose transformations
// make long results, some in the screen's buffer (t:lowercase,
// t:removeWhitespace) and some slices of another result (t:trim).
var largeValueRules = []string{
	"SecRuleEngine On",
	"SecRequestBodyAccess On",
	`SecRule ARGS "@contains zzz"  "id:101,phase:2,pass,log,t:none,t:lowercase,t:trim"`,
	`SecRule ARGS "@contains qqq"  "id:102,phase:2,pass,log,t:none,t:removeWhitespace"`,
	`SecRule ARGS "@contains evil" "id:103,phase:2,deny,status:403,log,t:none,t:urlDecodeUni,t:lowercase,t:trim"`,
}

// TestPreselection_largeValueRules: a form value of "A " 35,000 times and
// "EVIL" (140 KB) is denied by rule 103 with the preselection as without.
func TestPreselection_largeValueRules(t *testing.T) {
	quietLogs(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	on, off := diffWAFs(t, largeValueRules...)
	for _, n := range []int{10, 35000} {
		body := "x=" + strings.Repeat("A%20", n) + "EVIL"
		r := diffRequest{name: "form", method: "POST", uri: "/", body: []byte(body),
			headers: [][2]string{{"Host", "localhost"}, {"Content-Type", "application/x-www-form-urlencoded"}}}
		for i := 0; i < 20; i++ {
			got := runTrace(on, &r, nil)
			if want := runTrace(off, &r, nil); got.interruption != want.interruption {
				t.Fatalf("%d repetitions, run %d: interruption %q with the preselection, %q without", n, i, got.interruption, want.interruption)
			}
			if !strings.Contains(got.interruption, "rule=103") {
				t.Fatalf("%d repetitions: interruption %q, want rule 103", n, got.interruption)
			}
		}
	}
}
