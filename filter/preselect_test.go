package filter

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3/experimental"
)

// matchedIDs returns the rule IDs of the warn log lines (one per logged
// match), sorted.
var logRuleID = regexp.MustCompile(`\[id "(\d+)"\]`)

func matchedIDs(logs []string) []string {
	var ids []string
	for _, l := range logs {
		if !strings.HasPrefix(l, "warn: ") {
			continue
		}
		if m := logRuleID.FindStringSubmatch(l); m != nil {
			ids = append(ids, m[1])
		}
	}
	slices.Sort(ids)
	return ids
}

// TestPreselection_sameAnswers drives the same exchanges through the plugin
// with rule_preselection on and off, in both runners, and compares what
// the client gets and which rules log a match; the plugin with it on must
// also say in its metrics and debug log that it removed rules.
func TestPreselection_sameAnswers(t *testing.T) {
	quietLogs(t)
	var exchanges []exchange
	for i, r := range sample(poolRequests(t), 20) {
		exchanges = append(exchanges, diffExchange(r, i))
	}
	for i, r := range sample(ftwRequests(t), 250) {
		exchanges = append(exchanges, diffExchange(r, 1000+i))
	}
	config := func(on bool, directives []string) string {
		return configJSON(map[string]any{
			"directives_map":     map[string][]string{"rules": directives},
			"default_directives": "rules",
			"rule_preselection":  on,
		})
	}
	type answer struct {
		out outcome
		ids []string
	}
	// run drives every exchange through one plugin; the native runner has
	// one emulator at a time, so the two plugins run one after the other.
	run := func(t *testing.T, r runner, config string) (answers []answer, removed uint64, debugLine bool) {
		p, err := r.load(t, config)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		for _, ex := range exchanges {
			before := matchedIDs(p.logs())
			out := p.do(t, ex)
			answers = append(answers, answer{out: out, ids: newIDs(before, matchedIDs(p.logs()))})
		}
		removed, _ = p.metric(metricPreselectRemoved)
		return answers, removed, debugRemoved(t, p.logs()) == removed
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, set := range []struct {
			name       string
			directives []string
		}{{"crs", crsDirectives}, {"pl4", pl4Directives}} {
			t.Run(set.name, func(t *testing.T) {
				got, removed, debugLine := run(t, r, config(true, set.directives))
				want, removedOff, _ := run(t, r, config(false, set.directives))
				for i, ex := range exchanges {
					g, w := got[i], want[i]
					name := ex.method + " " + ex.path
					if g.out.status != w.out.status || g.out.localReply != w.out.localReply || g.out.upstream != w.out.upstream ||
						string(g.out.body) != string(w.out.body) {
						t.Errorf("%s: with the preselection %d/%v/%v, without %d/%v/%v", name,
							g.out.status, g.out.localReply, g.out.upstream, w.out.status, w.out.localReply, w.out.upstream)
					}
					if !slices.Equal(g.ids, w.ids) {
						t.Errorf("%s: rules logged with the preselection %v, without %v", name, g.ids, w.ids)
					}
				}
				if removed == 0 {
					t.Errorf("metric %s = 0, want rules removed", metricPreselectRemoved)
				}
				if removedOff != 0 {
					t.Errorf("rule_preselection false: %s = %d, want 0", metricPreselectRemoved, removedOff)
				}
				if !debugLine {
					t.Errorf("the preselection's debug lines do not add up to the %d rules of %s", removed, metricPreselectRemoved)
				}
				t.Logf("%d exchanges, %d rules removed in all", len(exchanges), removed)
			})
		}
	})
}

// debugRemoved adds up the rules the preselection's debug lines say it
// removed ("waf: rule preselection removed N of M screened rules,
// unique_id ID", one per transaction that ran a screen), checking each
// line's shape.
func debugRemoved(t *testing.T, logs []string) uint64 {
	t.Helper()
	var sum uint64
	for _, l := range logs {
		rest, ok := strings.CutPrefix(l, "debug: waf: rule preselection removed ")
		if !ok {
			continue
		}
		var n, m int
		var id string
		if k, err := fmt.Sscanf(rest, "%d of %d screened rules, unique_id %s", &n, &m, &id); k != 3 || err != nil || n > m || id == "" {
			t.Fatalf("debug line %q: want \"removed N of M screened rules, unique_id ID\" with N <= M (%v)", l, err)
		}
		sum += uint64(n)
	}
	return sum
}

// newIDs returns what after holds beyond before (both sorted): the rules
// one exchange logged. The native runner groups its log lines by level, so
// an exchange's lines are not a suffix of the log.
func newIDs(before, after []string) []string {
	seen := map[string]int{}
	for _, id := range before {
		seen[id]++
	}
	var out []string
	for _, id := range after {
		if seen[id] > 0 {
			seen[id]--
			continue
		}
		out = append(out, id)
	}
	return out
}

// diffExchange turns a differential-test request into an exchange with a
// fixed x-request-id, so both plugins log the same unique_id.
func diffExchange(r diffRequest, i int) exchange {
	ex := exchange{method: r.method, path: r.uri}
	for _, h := range r.headers {
		switch strings.ToLower(h[0]) {
		case "host":
			ex.authority = h[1]
		case "content-length", "transfer-encoding", "connection":
		default:
			ex.headers = append(ex.headers, [2]string{strings.ToLower(h[0]), h[1]})
		}
	}
	ex.headers = append(ex.headers, [2]string{"x-request-id", "diff-" + strconv.Itoa(i)})
	if r.body != nil {
		ex.body = [][]byte{r.body}
		ex.headers = append(ex.headers, [2]string{"content-length", strconv.Itoa(len(r.body))})
	}
	return ex
}

// TestCompileWAF_leftOut: at paranoia level 1 the compile leaves out the
// rules of the higher levels (preselect.PlanLeavingOut); at level 2 set
// through a macro, which the planner cannot read ahead, the level 2 gates
// do not jump, and the filter compiles the rule set again with every rule:
// a request without User-Agent matches 920320 (level 2) there, as without
// the preselection, and not at level 1.
func TestCompileWAF_leftOut(t *testing.T) {
	quietLogs(t)
	macro := slices.Clone(crsDirectives)
	macro = slices.Insert(macro, 3,
		`SecAction "id:10001,phase:1,pass,nolog,setvar:tx.mylevel=2"`,
		`SecAction "id:10002,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=%{tx.mylevel}"`)
	type result struct {
		rules   int
		matched bool
	}
	run := func(lines []string, on bool) result {
		closeWAFs()
		defer closeWAFs()
		host, reset := startPluginWith(t, configJSON(map[string]any{
			"directives_map":     map[string][]string{"rules": lines},
			"default_directives": "rules",
			"rule_preselection":  on,
		}))
		defer reset()
		var r result
		for _, waf := range wafCache {
			if p, ok := waf.(preludeWAF); ok {
				waf = p.WAF
			}
			r.rules = waf.(experimental.WAFWithRules).RulesCount()
		}
		req := benchRequest{Method: "GET", Path: "/", Headers: [][2]string{{"accept", "*/*"}}}
		emulatorRequest(host, &req, requestHeaders(&req))
		r.matched = slices.ContainsFunc(host.GetWarnLogs(), func(l string) bool { return strings.Contains(l, `[id "920320"]`) })
		return r
	}
	level1, level1Off := run(crsDirectives, true), run(crsDirectives, false)
	if level1.rules >= level1Off.rules-150 || level1.matched || level1Off.matched {
		t.Errorf("level 1: %+v with the preselection, %+v without; want 150 rules fewer, 920320 silent", level1, level1Off)
	}
	level2, level2Off := run(macro, true), run(macro, false)
	// The preselection's WAF holds its marker jumps too.
	if level2.rules < level2Off.rules || !level2.matched || !level2Off.matched {
		t.Errorf("level 2 by macro: %+v with the preselection, %+v without; want every rule, 920320 matching", level2, level2Off)
	}
}
