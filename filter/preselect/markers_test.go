package preselect

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/types"
)

// markerFiles is a rule set in which the markers matter: a skip that
// counts them, jumps forward, a negated jump, a jump from a chain that
// may fail, and a jump back over the end of phase 1, whose skip goes on
// in phase 2 up to its marker.
var markerFiles = fstest.MapFS{"m.conf": {Data: []byte(`#
#
#
#
#
SecRule ARGS:p2 "@streq 1" "id:9,phase:2,pass,log,msg:'before back',setvar:tx.r9=1"
SecMarker BACK
SecRule ARGS:back "@streq 1" "id:10,phase:1,pass,nolog,skipAfter:BACK"
SecRule ARGS:a "@streq 1" "id:20,phase:2,pass,nolog,skip:2"
SecMarker M1
SecRule ARGS:b "@streq 1" "id:21,phase:2,pass,log,msg:'b',setvar:tx.r21=1"
SecRule ARGS:c "@streq 1" "id:22,phase:2,pass,log,msg:'c',setvar:tx.r22=1"
SecMarker M2
SecRule ARGS:d "!@streq 1" "id:30,phase:2,pass,nolog,skipAfter:M3"
SecRule ARGS:e "@streq 1" "id:31,phase:2,pass,log,msg:'e',setvar:tx.r31=1"
SecMarker M3
SecRule ARGS:f "@streq 1" "id:40,phase:2,pass,nolog,chain,skipAfter:M4"
	SecRule ARGS:g "@streq 1" "t:none"
SecRule ARGS:h "@streq 1" "id:41,phase:2,pass,log,msg:'h',setvar:tx.r41=1"
SecMarker M4
SecMarker M5
SecMarker M6
SecRule ARGS:i "@streq 1" "id:50,phase:2,deny,status:403,log,msg:'i'"
SecRule TX:r21 "@streq 1" "id:60,phase:5,pass,log,msg:'r21'"
`)}}

const markerDirectives = "SecRuleEngine On\nSecRequestBodyAccess On\n" +
	`SecAction "id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=1"` + "\nInclude m.conf"

// markerRequests are query strings that take each way through
// markerFiles.
var markerRequests = []string{
	"", "a=1&b=1&c=1", "b=1&c=1", "a=1&c=1", "d=1&e=1", "e=1", "f=1&g=1&h=1", "f=1&h=1", "g=1&h=1",
	"back=1&p2=1&b=1", "p2=1&b=1", "back=1&a=1&b=1&c=1", "a=1&b=1&c=1&i=1", "d=1&e=1&f=1&g=1&h=1&i=1",
}

// TestMarkers_sameDecisions runs requests through the rule set with its
// markers hidden and through Coraza without the preselection: every
// matched rule, the interruption and TX are the same. Each request leaves
// the markers in the state its last rules leave them in.
func TestMarkers_sameDecisions(t *testing.T) {
	plan := planJumps(markerDirectives, markerFiles)
	if plan == nil || len(plan.IDs()) == 0 {
		t.Fatal("no jumps planned: the test needs some to remove")
	}
	waf, ix := compileMarkers(t, markerFiles, markerDirectives, plan, false)
	if !ix.hideMarkers {
		t.Fatal("the markers are not hidden")
	}
	plain, err := coraza.NewWAF(coraza.NewWAFConfig().WithRootFS(markerFiles).WithDirectives(markerDirectives))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range markerRequests {
		uri := "/?" + q
		got, fired := jumpRun(waf, ix, uri, "", 200)
		// The prelude's SecAction, rule 1, is not among the matched
		// rules.
		want, _ := jumpRun(plain, nil, uri, "", 200)
		want = strings.Join(slices.DeleteFunc(strings.Fields(want), func(f string) bool { return f == "1" }), " ")
		if got != want {
			t.Errorf("%s: with the markers hidden %s, as written %s", uri, got, want)
		}
		if fired != 0 {
			t.Errorf("%s: %d jumps ran; they are removed with the markers", uri, fired)
		}
	}
}

// TestMarkers_shown follows the marker range of one transaction: hidden
// from the start, shown by a rule with skipAfter that matches, hidden
// again by the next rule without one.
func TestMarkers_shown(t *testing.T) {
	waf, ix := compileMarkers(t, markerFiles, markerDirectives, planJumps(markerDirectives, markerFiles), false)
	state := func(tx types.Transaction) string {
		r := tx.(txCalls).GetRuleRemoveByIDRanges()
		switch {
		case slices.Contains(r, markersHidden):
			return "hidden"
		case slices.Contains(r, markersShown):
			return "shown"
		}
		return fmt.Sprint(r)
	}
	for _, c := range []struct {
		query, phase1, phase2 string
	}{
		{"", "hidden", "hidden"},
		// 10 jumps back: phase 2 starts skipping with the markers shown,
		// up to BACK; 20 does not skip, and 21 hides them again.
		{"back=1&a=0&b=1", "shown", "hidden"},
		// A rule with no value to read does not run its operator: the
		// markers stay shown.
		{"back=1", "shown", "shown"},
		// 30 (negated) jumps over 31 when d is not 1, and 41 hides them.
		{"d=0&e=1&h=1", "hidden", "hidden"},
		// 40 jumps over 41 to M4, and 50 hides them.
		{"f=1&g=1&h=1&i=1", "hidden", "hidden"},
		// ... unless the screen removed 50, which cannot match.
		{"f=1&g=1&h=1&i=0", "hidden", "shown"},
	} {
		tx := waf.NewTransaction()
		ix.Start(tx)
		tx.ProcessURI("/?"+c.query, "GET", "HTTP/1.1")
		tx.ProcessRequestHeaders()
		if got := state(tx); got != c.phase1 {
			t.Errorf("%q: after phase 1 the markers are %s, want %s", c.query, got, c.phase1)
		}
		_, _ = tx.ProcessRequestBody()
		if got := state(tx); got != c.phase2 {
			t.Errorf("%q: after phase 2 the markers are %s, want %s", c.query, got, c.phase2)
		}
		_ = tx.Close()
	}
}

// TestMarkers_kept lists the rule sets that keep their markers, and the
// jumps then run.
func TestMarkers_kept(t *testing.T) {
	base := string(markerFiles["m.conf"].Data)
	for name, extra := range map[string]string{
		"a SecAction that skips":                                `SecAction "id:70,phase:2,pass,nolog,skip:1"`,
		"a skip in a rule whose operator is not this project's": `SecRule REMOTE_ADDR "@ipMatch 10.0.0.0/8" "id:70,phase:2,pass,nolog,skipAfter:M6"`,
		"no prelude (a rule reads MATCHED_VAR)":                 `SecRule MATCHED_VAR "@streq x" "id:70,phase:5,pass,nolog"`,
	} {
		fsys := fstest.MapFS{"m.conf": {Data: []byte(base + extra + "\n")}}
		_, ix := compileMarkers(t, fsys, markerDirectives, planJumps(markerDirectives, fsys), false)
		if ix.hideMarkers {
			t.Errorf("%s: the markers are hidden", name)
		}
	}
	_, ix := compileMarkers(t, markerFiles, markerDirectives, planJumps(markerDirectives, markerFiles), true)
	if ix.hideMarkers {
		t.Error("keepMarkers: the markers are hidden")
	}
}

// TestMarkers_starters checks which operators count as a rule's own: the
// one of a rule right after a chain is that rule's, not the chain's.
func TestMarkers_starters(t *testing.T) {
	text := `SecAction "id:1,phase:1,pass,nolog,setvar:tx.x=1"
SecRule ARGS "@rx a" "id:2,phase:1,pass,nolog,chain"
	SecRule ARGS "@rx b" "t:none"
SecRule ARGS "@rx c" "id:3,phase:1,pass,nolog,skipAfter:E"
SecRule ARGS "@rx d" "id:4,phase:1,pass,nolog"
SecMarker E`
	b := NewBuilder(ReadRuleSet(text, nil))
	b.Begin()
	waf, err := coraza.NewWAF(experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig(), b.Observe).WithDirectives(text))
	b.End()
	if err != nil {
		t.Fatal(err)
	}
	triggers := slices.Clone(b.triggers)
	ix := b.Finish(waf.(experimental.WAFWithRules).RulesCount())
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	if !ix.hideMarkers {
		t.Fatal("the markers are not hidden")
	}
	var got []string
	for _, t := range triggers {
		got = append(got, fmt.Sprintf("%d:%v/%v/%v", t.pos, t.starter, t.flow, t.plain))
	}
	want := "1:true/false/true 1:false/false/false 2:true/true/false 3:true/false/true"
	if strings.Join(got, " ") != want {
		t.Errorf("triggers (position:starter/flow/plain) %s, want %s", strings.Join(got, " "), want)
	}
}
