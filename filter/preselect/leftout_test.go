package preselect

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3/experimental"

	"github.com/wafguard/wafguard/filter/rules"
)

// gatedFile is a file shaped like one of the CRS's: a rule of paranoia
// level 1, the level 2 gates of phases 1 and 2, rules of level 2 (one
// with a chain), the level 3 gates, a rule of level 3 on two lines, the
// file's marker and a rule after it.
const gatedFile = `SecRule ARGS "@contains union" "id:100,phase:2,deny,status:403,log,msg:'pl1'"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:101,phase:1,pass,nolog,tag:'crs',skipAfter:END-SQLI"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:102,phase:2,pass,nolog,tag:'crs',skipAfter:END-SQLI"
SecRule REQUEST_URI "@contains /pl2" "id:110,phase:1,deny,status:403,log,msg:'pl2 uri',tag:'crs'"
SecRule ARGS "@contains select" "id:111,phase:2,deny,status:403,log,msg:'pl2 chain',tag:'crs',chain"
    SecRule ARGS "@contains from" "setvar:tx.score=+1"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 3" "id:103,phase:1,pass,nolog,tag:'crs',skipAfter:END-SQLI"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 3" "id:104,phase:2,pass,nolog,tag:'crs',skipAfter:END-SQLI"
SecRule ARGS "@contains drop" \
    "id:120,phase:2,deny,status:403,log,msg:'pl3',tag:'crs'"
SecMarker END-SQLI
SecRule ARGS "@contains after" "id:130,phase:2,deny,status:403,log,msg:'after'"
`

// gatedDirectives sets the paranoia level, in a SecAction of its own that
// the prelude runs once, and includes the files.
func gatedDirectives(level string, extra ...string) string {
	return strings.Join(append([]string{"SecRuleEngine On", "SecRequestBodyAccess On",
		`SecAction "id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=` + level + `"`,
		"Include sqli.conf"}, extra...), "\n")
}

func gatedFS(files ...string) fstest.MapFS {
	fsys := fstest.MapFS{"sqli.conf": {Data: []byte(gatedFile)}}
	for i := 0; i+1 < len(files); i += 2 {
		fsys[files[i]] = &fstest.MapFile{Data: []byte(files[i+1])}
	}
	return fsys
}

func TestPlanLeavingOut(t *testing.T) {
	p := planLeavingOut(gatedDirectives("1"), gatedFS())
	// Behind the level 2 gates: rule 110 and the level 3 gate of phase 1,
	// rule 111, the level 3 gate of phase 2 and rule 120.
	if got, want := p.LeftOut(), []int{103, 104, 110, 111, 120}; !slices.Equal(got, want) {
		t.Errorf("left out %v, want %v", got, want)
	}
	if got, want := p.Gates(), []int{101, 102}; !slices.Equal(got, want) {
		t.Errorf("gates %v, want %v", got, want)
	}
	data, ok := p.ReadFile("sqli.conf")
	if !ok {
		t.Fatal("the plan does not hold sqli.conf")
	}
	got, orig := strings.Split(string(data), "\n"), strings.Split(gatedFile, "\n")
	if len(got) != len(orig) {
		t.Fatalf("%d lines, want %d: line numbers moved", len(got), len(orig))
	}
	for i := range orig {
		blank := i >= 3 && i <= 9
		if blank && got[i] != "" || !blank && got[i] != orig[i] {
			t.Errorf("line %d: %q, want %q", i+1, got[i], map[bool]string{true: "", false: orig[i]}[blank])
		}
	}
	// PlanJumps leaves every rule in.
	if p := planJumps(gatedDirectives("1"), gatedFS()); p.LeftOut() != nil {
		t.Errorf("PlanJumps leaves out %v", p.LeftOut())
	}
}

// TestPlanLeavingOut_chains: a chain that ends in a SecAction (which
// Coraza appends to it) is left out whole; one that goes on past an
// Include, whose lines are not all in the file, stays.
func TestPlanLeavingOut_chains(t *testing.T) {
	file := strings.Replace(gatedFile, `"id:110,phase:1,deny,status:403,log,msg:'pl2 uri',tag:'crs'"`,
		`"id:110,phase:1,deny,status:403,log,msg:'pl2 uri',tag:'crs',chain"`+"\n"+`    SecAction "setvar:tx.x=1"`, 1)
	p := planLeavingOut(gatedDirectives("1"), fstest.MapFS{"sqli.conf": {Data: []byte(file)}})
	if got, want := p.LeftOut(), []int{103, 104, 110, 111, 120}; !slices.Equal(got, want) {
		t.Errorf("with a SecAction in a chain: left out %v, want %v", got, want)
	}
	data, _ := p.ReadFile("sqli.conf")
	if strings.Contains(string(data), "tx.x=1") {
		t.Errorf("the SecAction of the chain left out is still there:\n%s", data)
	}

	file = strings.Replace(gatedFile, `    SecRule ARGS "@contains from" "setvar:tx.score=+1"`, "Include from.conf", 1)
	fsys := fstest.MapFS{"sqli.conf": {Data: []byte(file)}, "from.conf": {Data: []byte(`SecRule ARGS "@contains from" "setvar:tx.score=+1"`)}}
	p = planLeavingOut(gatedDirectives("1"), fsys)
	if got, want := p.LeftOut(), []int{103, 104, 110, 120}; !slices.Equal(got, want) {
		t.Errorf("with a chain going on past an Include: left out %v, want %v", got, want)
	}
	data, _ = p.ReadFile("sqli.conf")
	if !strings.Contains(string(data), "Include from.conf") || !strings.Contains(string(data), "id:111") {
		t.Errorf("the chain going on past an Include was blanked:\n%s", data)
	}
}

// TestPlanLeavingOut_kept: what keeps rules in.
func TestPlanLeavingOut_kept(t *testing.T) {
	all := []int{103, 104, 110, 111, 120}
	for _, c := range []struct {
		name       string
		directives string
		fsys       fstest.MapFS
		want       []int
	}{
		{"level 2: only the level 3 gate of phase 2 jumps over a rule", gatedDirectives("2"), gatedFS(), []int{120}},
		{"level 4", gatedDirectives("4"), gatedFS(), nil},
		{"a level the planner cannot read", gatedDirectives("%{tx.level}"), gatedFS(), all},
		{"a target update names the rule", gatedDirectives("1", `SecRuleUpdateTargetById 111 "!ARGS:x"`), gatedFS(),
			[]int{103, 104, 110, 120}},
		{"an action update names the rule", gatedDirectives("1", `SecRuleUpdateActionById 110 "pass"`), gatedFS(),
			[]int{103, 104, 111, 120}},
		{"a removal names the gate", gatedDirectives("1", "SecRuleRemoveById 101"), gatedFS(), []int{104, 111, 120}},
		{"a removal by a tag of the gate", gatedDirectives("1", "SecRuleRemoveByTag crs"), gatedFS(), nil},
		{"a ctl may remove the gate and leave the rules", gatedDirectives("1",
			`SecRule REQUEST_URI "@contains /x" "id:2,phase:1,pass,nolog,ctl:ruleRemoveById=101"`), gatedFS(), []int{104, 111, 120}},
		{"a ctl removes the gate with the rules", gatedDirectives("1",
			`SecRule REQUEST_URI "@contains /x" "id:2,phase:1,pass,nolog,ctl:ruleRemoveByTag=crs"`), gatedFS(), all},
		{"a ctl by message may remove anything", gatedDirectives("1",
			`SecRule REQUEST_URI "@contains /x" "id:2,phase:1,pass,nolog,ctl:ruleRemoveByMsg=pl2"`), gatedFS(), nil},
		{"two rules share an ID", gatedDirectives("1", "Include dup.conf"),
			gatedFS("dup.conf", `SecRule ARGS "@contains y" "id:130,phase:2,pass,nolog"`), nil},
		{"the file is read twice", gatedDirectives("1", "Include sqli.conf"), gatedFS(), nil},
		{"another marker before the gate's", gatedDirectives("1"), fstest.MapFS{"sqli.conf": {Data: []byte(
			strings.Replace(gatedFile, "SecRule ARGS \"@contains drop\"", "SecMarker MID\nSecRule ARGS \"@contains drop\"", 1))}}, nil},
		{"a rule that may deny before the setup", strings.Replace(gatedDirectives("1"), "SecAction",
			`SecRule REQUEST_HEADERS:X "@streq y" "id:3,phase:1,deny,log"`+"\nSecAction", 1), gatedFS(), nil},
		{"a rule Coraza leaves aside before the setup", strings.Replace(gatedDirectives("1"), "SecAction",
			`SecRule REQUEST_HEADERS:Content-Type "@rx ^text/xml" "id:3,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"`+"\nSecAction", 1), gatedFS(), all},
		{"the rules in the directives themselves", "SecRuleEngine On\n" +
			`SecAction "id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=1"` + "\n" + gatedFile, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := c.fsys
			if fsys == nil {
				fsys = fstest.MapFS{}
			}
			if got := planLeavingOut(c.directives, fsys).LeftOut(); !slices.Equal(got, c.want) {
				t.Errorf("left out %v, want %v", got, c.want)
			}
		})
	}
}

// TestLeftOut_sameDecisions compiles the rule set with and without the
// rules left out: the WAF holds five rules fewer, its gates jump in every
// transaction, and every request gets the same interruption, matched
// rules and TX.
func TestLeftOut_sameDecisions(t *testing.T) {
	fsys := gatedFS()
	p := planLeavingOut(gatedDirectives("1"), fsys)
	with, ix := compilePlanned(t, fsys, gatedDirectives("1"), p)
	without, plain := compilePlanned(t, fsys, gatedDirectives("1"), nil)
	if !ix.AlwaysJumps(p.Gates()) {
		t.Fatalf("the gates %v do not all jump", p.Gates())
	}
	n, m := with.(experimental.WAFWithRules).RulesCount(), without.(experimental.WAFWithRules).RulesCount()
	if n != m-len(p.LeftOut()) {
		t.Errorf("%d rules with the rules left out, %d without; want %d fewer", n, m, len(p.LeftOut()))
	}
	for _, uri := range []string{"/", "/?q=union", "/pl2", "/?a=select&b=from", "/?a=drop", "/?a=after", "/pl2?a=after"} {
		a, _ := jumpRun(with, ix, uri, "", 200)
		b, _ := jumpRun(without, plain, uri, "", 200)
		if a != b {
			t.Errorf("%s: with rules left out %s, without %s", uri, a, b)
		}
	}

	// A level the planner cannot read: the level 2 gates do not jump, and
	// AlwaysJumps says so (the filter then compiles every rule).
	d := strings.Replace(gatedDirectives("%{tx.level}"), `SecAction "id:1`,
		`SecAction "id:2,phase:1,pass,nolog,setvar:tx.level=2"`+"\n"+`SecAction "id:1`, 1)
	p = planLeavingOut(d, fsys)
	if len(p.LeftOut()) == 0 {
		t.Fatal("nothing left out with an unread level")
	}
	if _, ix := compilePlanned(t, fsys, d, p); ix.AlwaysJumps(p.Gates()) {
		t.Errorf("at level 2 the gates %v are said to jump in every transaction", p.Gates())
	}
}

// TestLeftOut_crs: with the CRS at paranoia levels 1 to 3, the rules the
// gates of the higher levels jump over are left out, every gate holds, and
// the prelude removes the rest of what it removed with every rule
// compiled; at level 4 nothing is left out.
func TestLeftOut_crs(t *testing.T) {
	// The CRS 4.25 has about 200 rules above level 1, 80 above level 2
	// and 9 at level 4.
	least := map[string]int{"1": 150, "2": 50, "3": 5}
	for _, level := range []string{"1", "2", "3", "4"} {
		t.Run("level "+level, func(t *testing.T) {
			directives := "Include @coraza.conf-recommended\nSecRuleEngine On\n" +
				`SecAction "id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=` + level + `"` +
				"\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf"
			p := planLeavingOut(directives, rules.FS)
			out := p.LeftOut()
			if level == "4" {
				if len(out) != 0 {
					t.Errorf("%d rules left out at level 4", len(out))
				}
				return
			}
			with, ix := compilePlanned(t, rules.FS, directives, p)
			_, plain := compilePlanned(t, rules.FS, directives, planJumps(directives, rules.FS))
			if !ix.AlwaysJumps(p.Gates()) {
				t.Fatalf("the gates %v do not all jump", p.Gates())
			}
			t.Logf("%d rules left out behind %d gates; %d compiled", len(out), len(p.Gates()), with.(experimental.WAFWithRules).RulesCount())
			if len(out) < least[level] {
				t.Errorf("%d rules left out, want the CRS's rules above level %s", len(out), level)
			}
			removed := map[int]bool{}
			for _, id := range plain.PreludeIDs() {
				removed[id] = true
			}
			for _, id := range out {
				if !removed[id] {
					t.Errorf("rule %d left out, though the prelude does not remove it with every rule compiled", id)
				}
				delete(removed, id)
			}
			if got, want := ix.PreludeIDs(), slices.Sorted(maps.Keys(removed)); !slices.Equal(got, want) {
				t.Errorf("the prelude removes %d rules with rules left out, want the other %d it removed", len(got), len(want))
			}
		})
	}
}

// TestPlan_dropsTexts: once planned, a rule set holds none of the texts it
// read (they would stay live while the rule set compiles, the peak a VM
// keeps), the plan still hands out the rewritten file, and a second plan
// of the same rule set plans nothing rather than read texts it dropped.
func TestPlan_dropsTexts(t *testing.T) {
	for _, leave := range []bool{true, false} {
		s := ReadRuleSet(gatedDirectives("1"), gatedFS())
		if len(s.data) == 0 {
			t.Fatal("the rule set read no file")
		}
		var p *JumpPlan
		if leave {
			p = PlanLeavingOut(s)
		} else {
			p = PlanJumps(s)
		}
		if s.data != nil || s.lineStarts != nil || s.lineBuf != nil {
			t.Errorf("leave %v: after the plan the rule set holds %d texts, %d line tables", leave, len(s.data), len(s.lineStarts))
		}
		if leave {
			data, ok := p.ReadFile("sqli.conf")
			if !ok || strings.Contains(string(data), "id:110") {
				t.Errorf("the plan's sqli.conf (%v): %q", ok, data)
			}
		}
		if again := PlanLeavingOut(s); again != nil {
			t.Errorf("leave %v: a second plan of the same rule set planned %v", leave, again.LeftOut())
		}
	}
}
