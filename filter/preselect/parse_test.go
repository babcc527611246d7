package preselect

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseSecRule(t *testing.T) {
	cases := []struct {
		raw     string
		ok      bool
		targets []target
		op      string
		args    string
		negated bool
		actions []action
	}{
		{
			raw:     `SecRule ARGS|REQUEST_HEADERS:User-Agent|!ARGS:foo "@rx (?i)a\"b" "id:1,phase:2,t:none,t:lowercase,msg:'a, b: c',pass"`,
			ok:      true,
			targets: []target{{name: "ARGS"}, {name: "REQUEST_HEADERS", key: "User-Agent", keyed: true}, {name: "ARGS", exclusion: true, key: "foo", keyed: true}},
			op:      "rx", args: `(?i)a"b`,
			actions: []action{{"id", "1"}, {"phase", "2"}, {"t", "none"}, {"t", "lowercase"}, {"msg", "a, b: c"}, {"pass", ""}},
		},
		{
			raw:     `SecRule &TX:x|REQUEST_COOKIES:/^(a|b)$/|XML:/* "!@pm foo bar" "id:2"`,
			ok:      true,
			targets: []target{{name: "TX", count: true, key: "x", keyed: true}, {name: "REQUEST_COOKIES", keyed: true}, {name: "XML", keyed: true}},
			op:      "pm", args: "foo bar", negated: true,
			actions: []action{{"id", "2"}},
		},
		{
			raw:     `SecRule REQUEST_URI "^/x" "id:3,chain"`,
			ok:      true,
			targets: []target{{name: "REQUEST_URI"}},
			op:      "rx", args: "^/x",
			actions: []action{{"id", "3"}, {"chain", ""}},
		},
		{
			raw:     `SecRule ARGS_NAMES|ARGS:'a|b' "@contains x" "id:4,setvar:'tx.a=%{tx.b}'"`,
			ok:      true,
			targets: []target{{name: "ARGS_NAMES"}, {name: "ARGS", keyed: true}},
			op:      "contains", args: "x",
			actions: []action{{"id", "4"}, {"setvar", "tx.a=%{tx.b}"}},
		},
		{raw: `SecAction "id:5,pass"`},
		{raw: `SecMarker END`},
		{raw: `SecRule ARGS "@rx unterminated`},
		{raw: `SecRule ARGS "@rx x" id:6`},
		{raw: `SecRule 1ARGS "@rx x" "id:7"`},
	}
	for _, c := range cases {
		rt, ok := parseSecRule(c.raw)
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.raw, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if !reflect.DeepEqual(rt.targets, c.targets) || rt.opName != c.op || rt.opArgs != c.args || rt.negated != c.negated ||
			!reflect.DeepEqual(rt.actions, c.actions) {
			t.Errorf("%s:\n got %+v\nwant targets %+v op %q args %q negated %v actions %+v", c.raw, rt, c.targets, c.op, c.args, c.negated, c.actions)
		}
	}
}

func TestIDList(t *testing.T) {
	ids, ok := idList(`920100 "920200-920299",930100`)
	if !ok || !reflect.DeepEqual(ids, [][2]int{{920100, 920100}, {920200, 920299}, {930100, 930100}}) {
		t.Errorf("got %v %v", ids, ok)
	}
	if _, ok := idList("92x"); ok {
		t.Error("92x parsed")
	}
}

func TestScanDirectives(t *testing.T) {
	f := readFacts([]string{
		`SecDefaultAction "phase:2,log,auditlog,pass"`,
		"SecRuleUpdateTargetById 941100 \"!REQUEST_COOKIES:/^_ga/\"\nSecRuleUpdateTargetById 942100 \"ARGS:x\"",
		"SecRuleUpdateActionById 930100 \"t:none,t:lowercase\"\nSecRuleRemoveById 920100 920200-920210",
		"SecRuleRemoveByTag attack-xss",
	})
	if f.defaultsTransform || f.defaultsSkip || f.updateAll || f.runtime.any || len(f.runtime.ids)+len(f.runtime.tags) != 0 {
		t.Errorf("flags set: %+v", f)
	}
	if !inRanges(942100, f.updated) || !inRanges(930100, f.updated) || inRanges(941100, f.updated) {
		t.Errorf("updated = %v; want 942100 and 930100, not 941100 (exclusion only)", f.updated)
	}
	if !inRanges(920205, f.removedIDs) || len(f.removedTags) != 1 || f.removedTags[0] != "attack-xss" {
		t.Errorf("removed %v %v", f.removedIDs, f.removedTags)
	}
	f = readFacts([]string{
		"SecDefaultAction \"phase:1,pass,\\\nt:lowercase\"",
		`SecRuleUpdateTargetByTag attack-sqli "ARGS:x"`,
		`SecRule ARGS "@rx x" "id:1,ctl:ruleRemoveByTag=OWASP_CRS,CTL:ruleRemoveById=920100-920200"`,
		`SecRule ARGS "@rx x" "id:2,ctl:ruleRemoveById=930100,ctl:ruleRemoveByMsg='x'"`,
		"secruleREMOVEbyid 7-9\nSecAction \"id:3,pass,CTL:RuleRemoveTargetById=942100;ARGS:x,ctl:ruleRemoveTargetByTag=xss;ARGS\"",
	})
	if !f.defaultsTransform || !f.updateAll || !f.runtime.any {
		t.Errorf("flags not set: %+v", f)
	}
	if !slices.Equal(f.runtime.tags, []string{"OWASP_CRS"}) || !slices.Equal(f.runtime.ids, [][2]int{{920100, 920200}, {930100, 930100}}) {
		t.Errorf("runtime removals %+v", f.runtime)
	}
	if !inRanges(8, f.removedIDs) {
		t.Errorf("removed %v, want 7-9 (the directive's name in any case)", f.removedIDs)
	}
	if !slices.Equal(f.runtimeTargets.ids, [][2]int{{942100, 942100}}) || !slices.Equal(f.runtimeTargets.tags, []string{"xss"}) || f.runtimeTargets.any {
		t.Errorf("runtime target removals %+v", f.runtimeTargets)
	}
	rr := runtimeRemovals{ids: [][2]int{{10, 20}}, tags: []string{"a"}}
	s := observed{id: 15, tags: []string{"b"}}
	for _, c := range []struct {
		r    observed
		want bool
	}{
		{observed{id: 12}, false}, // the range removes s too
		{observed{id: 30, tags: []string{"a"}}, true},
		{observed{id: 30, tags: []string{"b"}}, false},
	} {
		if got := rr.mayRemoveKeeping(c.r, s); got != c.want {
			t.Errorf("mayRemoveKeeping(%+v) = %v", c.r, got)
		}
	}
}

// readFacts reads the texts as one rule set and returns its facts.
func readFacts(texts []string) directiveFacts {
	return ReadRuleSet(strings.Join(texts, "\n"), nil).facts
}

// TestReadRuleSet_continuedFacts: what a directive continued over lines
// says outlives the line buffer that joined it (in the poison build the
// buffer is overwritten as soon as the next directive is read).
func TestReadRuleSet_continuedFacts(t *testing.T) {
	f := ReadRuleSet("SecRuleRemoveByTag \\\n  attack-xss\nSecRuleRemoveByTag \\\n  attack-sqli\n"+
		"SecRule ARGS \"@rx zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\" \\\n  \"id:1,phase:2,pass\"\n", nil).facts
	if !slices.Equal(f.removedTags, []string{"attack-xss", "attack-sqli"}) {
		t.Errorf("removed tags %q, want [attack-xss attack-sqli]", f.removedTags)
	}
}
