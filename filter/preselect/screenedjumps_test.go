package preselect

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"

	"github.com/wafguard/wafguard/filter/rules"
)

// screenedFiles is a rule set shaped like the CRS's attack files: a
// paranoia gate and one rule of each file's phase per file, each file
// ending in its marker; then a file with a ctl rule (a barrier), and one
// with a chain whose rules a comment line separates.
var screenedFiles = fstest.MapFS{
	"a.conf": {Data: []byte(`# a: one comment line for each jump of phases 1, 3, 4 and 5,
# which take the first ones,
#
#
# and one for a screened jump of phase 2
SecRule ARGS "@contains alpha" "id:100,phase:2,deny,status:403,log"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:101,phase:2,pass,nolog,skipAfter:END-A"
SecRule ARGS "@contains pl2" "id:102,phase:2,deny,status:403,log"
SecMarker END-A
`)},
	"b.conf": {Data: []byte(`# b
SecRule ARGS "@contains beta" "id:200,phase:2,pass,log,setvar:tx.score=+1"
SecMarker END-B
`)},
	"c.conf": {Data: []byte(`# c
SecRule REQUEST_HEADERS "@contains gamma" "id:300,phase:2,deny,status:403,log"
SecMarker END-C
`)},
	"d.conf": {Data: []byte(`# d
SecRule ARGS_NAMES "@streq delta" "id:400,phase:2,deny,status:403,log"
SecMarker END-D
`)},
	"d2.conf": {Data: []byte(`# d2
SecRule ARGS "@contains delta2" "id:450,phase:2,deny,status:403,log"
SecMarker END-D2
`)},
	"e.conf": {Data: []byte(`# e
SecRule REQUEST_FILENAME "@rx ^[a-z/]+$" "id:500,phase:2,pass,nolog,ctl:ruleRemoveTargetById=100;ARGS:x"
SecRule ARGS "@contains epsilon" "id:501,phase:2,deny,status:403,log"
SecMarker END-E
SecRule ARGS "@contains zeta" "id:600,phase:2,deny,status:403,log,chain"
# not free: a rule here would join the chain
    SecRule ARGS "@contains eta" ""
SecMarker END-F
SecMarker END-G
SecMarker END-H
SecMarker END-I
`)},
}

const screenedDirectives = "SecRuleEngine On\nSecRequestBodyAccess On\n" +
	`SecAction "id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=1,setvar:tx.score=0"` +
	"\nInclude a.conf\nInclude b.conf\nInclude c.conf\nInclude d.conf\nInclude d2.conf\nInclude e.conf"

// TestPlanScreened: the first free line of each file after a marker holds
// a screened jump of phase 2 while minJumpMarkers (3) markers or more
// follow before the first barrier (rule 500, with a ctl): a.conf's, b.conf's
// and c.conf's reach END-D2; d.conf's would pass two markers only.
func TestPlanScreened(t *testing.T) {
	p := planJumps(screenedDirectives, screenedFiles)
	if p == nil {
		t.Fatal("no jumps planned")
	}
	jump := func(id int, mark string) string {
		return fmt.Sprintf(`SecRule REQUEST_METHOD "@%s" "id:%d,phase:2,pass,nolog,noauditlog,skipAfter:%s"`, jumpOperator, id, mark)
	}
	ids := p.ScreenedIDs()
	if len(ids) != 3 {
		t.Fatalf("screened jumps %v, want 3 (plan %v)", ids, p.lines)
	}
	for _, c := range []struct {
		file string
		id   int
		mark string
		line int
	}{{"a.conf", ids[0], "END-D2", 4}, {"b.conf", ids[1], "END-D2", 0}, {"c.conf", ids[2], "END-D2", 0}} {
		if got := p.lines[c.file][c.line]; got != jump(c.id, c.mark) {
			t.Errorf("%s line %d: %q, want %q", c.file, c.line+1, got, jump(c.id, c.mark))
		}
	}
}

// TestPlanJumps_notInChain: a comment line between a chain's rules is not
// free: a rule there would join the chain.
func TestPlanJumps_notInChain(t *testing.T) {
	fsys := fstest.MapFS{"r.conf": {Data: []byte("#\nSecRule ARGS \"@rx x\" \"id:1,phase:2,pass,chain\"\n#\n    SecRule ARGS \"@rx y\" \"\"\nSecMarker A\nSecMarker B\nSecMarker C\nSecMarker D\n")}}
	p := planJumps("Include r.conf", fsys)
	if p == nil {
		t.Fatal("no jumps planned")
	}
	if _, ok := p.lines["r.conf"][2]; ok || len(p.lines["r.conf"]) != 1 {
		t.Errorf("plan %v: want one jump, on line 1", p.lines)
	}
}

// TestScreenedJumps_sameDecisions runs requests through the rule set with
// and without its jumps: the same interruption, matched rules (but the
// jumps) and TX; the screened jump is taken when the screen drops every
// rule between it and its marker, and not when one of them matches.
func TestScreenedJumps_sameDecisions(t *testing.T) {
	with, ix := compileJumps(t, screenedFiles, screenedDirectives, true)
	without, plain := compileJumps(t, screenedFiles, screenedDirectives, false)
	if len(ix.screened) != 3 || !ix.screened[0].on || !ix.screened[1].on || !ix.screened[2].on {
		t.Fatalf("screened jumps %+v, want 3, on", ix.screened)
	}
	first := ix.screened[0].id
	for _, c := range []struct {
		uri   string
		taken bool // the first screened jump
	}{
		{"/", true},
		{"/?x=alpha", false},
		{"/?x=beta", false},
		{"/?delta=1", false},
		{"/?x=epsilon", true}, // past the jump's marker
		{"/?x=pl2", true},     // behind the gate the prelude removes
	} {
		a, _ := jumpRun(with, ix, c.uri, "", 200)
		b, _ := jumpRun(without, plain, c.uri, "", 200)
		if a != b {
			t.Errorf("%s: with jumps %s, without %s", c.uri, a, b)
		}
		if got := jumpTaken(with, ix, c.uri, first); got != c.taken {
			t.Errorf("%s: screened jump taken %v, want %v", c.uri, got, c.taken)
		}
	}
}

// jumpTaken reports whether the jump id matched in a GET of uri.
func jumpTaken(waf coraza.WAF, ix *Index, uri string, id int) bool {
	tx := waf.NewTransaction()
	ix.Start(tx)
	defer func() { _ = tx.Close() }()
	tx.ProcessURI(uri, "GET", "HTTP/1.1")
	tx.ProcessRequestHeaders()
	_, _ = tx.ProcessRequestBody()
	for _, mr := range tx.MatchedRules() {
		if mr.Rule().ID() == id {
			return true
		}
	}
	return false
}

// TestScreenedJumps_crs pins the screened jumps of the CRS at paranoia
// level 1: phase 1 from REQUEST-921 over the attack files' markers to
// REQUEST-934's end (941010, with its ctl, ends the reach), phase 2 from
// REQUEST-931 to REQUEST-944's end; every one of them holds.
func TestScreenedJumps_crs(t *testing.T) {
	directives := "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf"
	p := planJumps(directives, rules.FS)
	want := map[string]string{
		"@owasp_crs/REQUEST-921-PROTOCOL-ATTACK.conf":        "phase:1,pass,nolog,noauditlog,skipAfter:END-REQUEST-934-APPLICATION-ATTACK-GENERIC",
		"@owasp_crs/REQUEST-931-APPLICATION-ATTACK-RFI.conf": "phase:2,pass,nolog,noauditlog,skipAfter:END-REQUEST-944-APPLICATION-ATTACK-JAVA",
	}
	for file, tail := range want {
		found := false
		for _, l := range p.lines[file] {
			found = found || strings.HasPrefix(l, `SecRule REQUEST_METHOD "@`+jumpOperator+`"`) && strings.HasSuffix(l, tail+`"`)
		}
		if !found {
			t.Errorf("%s: no screened jump %s in %v", file, tail, p.lines[file])
		}
	}
	_, ix := compileJumps(t, rules.FS, directives, true)
	if len(ix.screened) != len(p.ScreenedIDs()) {
		t.Errorf("%d screened jumps compiled, %d planned", len(ix.screened), len(p.ScreenedIDs()))
	}
	for _, j := range ix.screened {
		if !j.on {
			t.Errorf("screened jump %d (phase %d) is off", j.id, j.phase)
		}
	}
}
