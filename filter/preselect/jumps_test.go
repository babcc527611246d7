package preselect

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/filter/rules"
)

// jumpFS is recordFS with the planned jumps in its files.
type jumpFS struct {
	fs.FS
	plan *JumpPlan
}

func (r jumpFS) ReadFile(name string) ([]byte, error) {
	data, ok := r.plan.ReadFile(name)
	if !ok {
		var err error
		if data, err = fs.ReadFile(r.FS, name); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// compileJumps compiles directives as the filter does: with the jumps
// PlanJumps plans (none with plan false), keeping the markers.
func compileJumps(t testing.TB, fsys fs.FS, directives string, plan bool) (coraza.WAF, *Index) {
	t.Helper()
	var p *JumpPlan
	if plan {
		p = planJumps(directives, fsys)
	}
	return compileMarkers(t, fsys, directives, p, true)
}

// compilePlanned compiles directives as the filter does, with the plan p
// (nil: none), keeping the markers: the jumps are what a rule set whose
// markers cannot be hidden runs with (markers.go).
//
// Snapshot must succeed, but for a plan that leaves rules out
// (PlanLeavingOut) whose gates do not all jump after all (a level the
// planner could not read): Snapshot then refuses the prelude, as it
// must, and the filter, like the caller, learns it from AlwaysJumps.
func compilePlanned(t testing.TB, fsys fs.FS, directives string, p *JumpPlan) (coraza.WAF, *Index) {
	t.Helper()
	waf, ix, err := compileSnapshot(t, fsys, directives, p, true)
	if err != nil && (len(p.LeftOut()) == 0 || ix.AlwaysJumps(p.Gates())) {
		t.Fatalf("Snapshot: %v", err)
	}
	return waf, ix
}

// compileMarkers is compilePlanned, with the markers hidden where the
// rule set allows it unless keep is set; Snapshot must succeed.
func compileMarkers(t testing.TB, fsys fs.FS, directives string, p *JumpPlan, keep bool) (coraza.WAF, *Index) {
	t.Helper()
	waf, ix, err := compileSnapshot(t, fsys, directives, p, keep)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return waf, ix
}

// compileSnapshot compiles as compileMarkers does and returns what
// Snapshot said.
func compileSnapshot(t testing.TB, fsys fs.FS, directives string, p *JumpPlan, keep bool) (coraza.WAF, *Index, error) {
	t.Helper()
	b := NewBuilder(ReadRuleSet(directives, fsys))
	b.keepMarkers = keep
	directives = p.Directives(directives)
	b.Jumps(p.IDs(), p.ScreenedIDs())
	cfg := experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig().WithRootFS(jumpFS{fsys, p}), b.Observe)
	b.Begin()
	waf, err := coraza.NewWAF(cfg.WithDirectives(directives))
	b.End()
	if err != nil {
		t.Fatal(err)
	}
	ix := b.Finish(waf.(experimental.WAFWithRules).RulesCount())
	_, err = ix.Snapshot(waf)
	return waf, ix, err
}

// jumpFiles is a rule set shaped like the CRS: request files with
// markers, then response files.
var jumpFiles = fstest.MapFS{
	"req.conf": {Data: []byte(`# request rules
# (three comment lines: one for each jump
# of the response and logging phases)
SecRule REQUEST_URI "@contains /a" "id:10,phase:1,pass,log,msg:'a',setvar:tx.score=+1"
# paranoia level 2
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:11,phase:1,pass,nolog,skipAfter:END-10"
SecRule REQUEST_URI "@contains /pl2" "id:12,phase:1,deny,status:403,log,msg:'pl2'"
SecMarker END-10
SecRule ARGS "@contains evil" \
# a comment inside a continued rule is no free line
    "id:20,phase:2,deny,status:403,log,msg:'evil'"
SecMarker END-20
SecRule REQUEST_HEADERS:X-Skip "@streq 1" "id:30,phase:2,pass,nolog,skipAfter:END-30"
SecRule ARGS "@contains bad" "id:31,phase:2,pass,log,msg:'bad',setvar:tx.score=+1"
SecMarker END-30
SecMarker END-40
SecMarker END-REQUEST
`)},
	"resp.conf": {Data: []byte(`# response rules

SecRule RESPONSE_STATUS "@streq 500" "id:50,phase:3,pass,log,msg:'error'"
SecMarker END-50
SecRule TX:score "@ge 2" "id:60,phase:5,pass,log,msg:'scored'"
`)},
}

const jumpDirectives = "SecRuleEngine On\nSecRequestBodyAccess On\n" +
	`SecAction "id:1,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=1"` + "\nInclude req.conf\nInclude resp.conf"

func TestPlanJumps(t *testing.T) {
	p := planJumps(jumpDirectives, jumpFiles)
	if p == nil {
		t.Fatal("no jumps planned")
	}
	// Phase 1 has rule 10, then the paranoia level 2 gate and the rule
	// it passes over, which the prelude removes: the comment before the
	// gate jumps over every marker but to resp.conf's, past the rules of
	// phases 2 and 3. Phase 2 passes over four markers after rule 31
	// with no free line before them. Phases 3, 4 and 5 evaluate no rule
	// of req.conf: its first comment lines jump over its five markers,
	// and in phases 4 and 5 over resp.conf's as well, past rule 50 of
	// phase 3.
	jump := func(n, phase int, mark string) string {
		return fmt.Sprintf(`SecAction "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`, jumpBase+n, phase, mark)
	}
	want := map[string]map[int]string{
		"req.conf": {4: jump(0, 1, "END-50"), 0: jump(1, 3, "END-REQUEST"), 1: jump(2, 4, "END-50"), 2: jump(3, 5, "END-50")},
	}
	if !maps.EqualFunc(p.lines, want, maps.Equal) {
		t.Errorf("plan %v, want %v", p.lines, want)
	}
	if want := []int{jumpBase, jumpBase + 1, jumpBase + 2, jumpBase + 3}; !slices.Equal(p.IDs(), want) {
		t.Errorf("IDs %v, want %v", p.IDs(), want)
	}
	for _, id := range p.IDs() {
		if !IsJump(id) {
			t.Errorf("jump ID %d outside the jump IDs", id)
		}
	}
	data, ok := p.ReadFile("req.conf")
	if !ok {
		t.Fatal("the plan does not hold req.conf")
	}
	if _, again := p.ReadFile("req.conf"); again {
		t.Error("the plan hands req.conf out twice")
	}
	text := string(data)
	if n, m := strings.Count(text, "\n"), strings.Count(string(jumpFiles["req.conf"].Data), "\n"); n != m {
		t.Errorf("req.conf has %d lines with the jumps, %d without: line numbers moved", n, m)
	}
	if !strings.Contains(text, "# a comment inside") {
		t.Error("the comment inside the continued rule was replaced")
	}
	if got, _ := p.ReadFile("resp.conf"); string(got) != string(jumpFiles["resp.conf"].Data) {
		t.Errorf("resp.conf changed:\n%s", got)
	}
}

// TestJumps_sameDecisions runs the same requests through the rule set
// with and without its jumps: the jumps fire, and every other matched
// rule, the interruption and TX are the same.
func TestJumps_sameDecisions(t *testing.T) {
	with, ix := compileJumps(t, jumpFiles, jumpDirectives, true)
	without, plain := compileJumps(t, jumpFiles, jumpDirectives, false)
	all, off := ix.Jumps()
	if len(all) != 4 || len(off) != 0 {
		t.Fatalf("jumps %v, refused %v; want 4, none refused", all, off)
	}
	// The phase 1 jump holds only because the prelude removes the gate
	// and rule 12 from every transaction.
	if got := ix.PreludeIDs(); !slices.Equal(got, []int{1, 11, 12}) {
		t.Errorf("the prelude removes %v, want [1 11 12]", got)
	}
	for _, c := range []struct {
		uri    string
		status int
		skip   string
	}{
		{"/", 200, ""},
		{"/a?x=bad", 200, ""},
		{"/a?x=bad", 200, "1"},
		{"/a?x=evil", 200, ""},
		{"/b?x=bad", 500, ""},
		{"/pl2", 200, ""},
	} {
		a, fired := jumpRun(with, ix, c.uri, c.skip, c.status)
		b, _ := jumpRun(without, plain, c.uri, c.skip, c.status)
		if a != b {
			t.Errorf("%s (X-Skip %q, status %d): with jumps %s, without %s", c.uri, c.skip, c.status, a, b)
		}
		if fired == 0 {
			t.Errorf("%s: no jump fired", c.uri)
		}
	}

	// A rule that reads MATCHED_VAR before it matches leaves the rule set
	// without a prelude: the phase 1 jump, which passes over the gate,
	// is then refused, the others hold.
	noPrelude := jumpFiles["resp.conf"].Data
	noPrelude = append(noPrelude, []byte("SecRule MATCHED_VAR \"@streq x\" \"id:70,phase:5,pass,nolog\"\n")...)
	files := maps.Clone(jumpFiles)
	files["resp.conf"] = &fstest.MapFile{Data: noPrelude}
	with, ix = compileJumps(t, files, jumpDirectives, true)
	without, plain = compileJumps(t, files, jumpDirectives, false)
	if ids := ix.PreludeIDs(); ids != nil {
		t.Fatalf("the prelude removes %v, want no prelude", ids)
	}
	if all, off := ix.Jumps(); len(all) != 4 || !slices.Equal(off, []int{jumpBase}) {
		t.Errorf("without a prelude: jumps %v, refused %v; want 4, the first refused", all, off)
	}
	for _, uri := range []string{"/", "/pl2", "/a?x=bad"} {
		a, _ := jumpRun(with, ix, uri, "", 200)
		b, _ := jumpRun(without, plain, uri, "", 200)
		if a != b {
			t.Errorf("without a prelude, %s: with jumps %s, without %s", uri, a, b)
		}
	}
}

// jumpRun runs one transaction, started as the filter starts it, and
// returns what it decided (the interruption, the matched rules but the
// jumps, TX), with the number of jumps that fired.
func jumpRun(waf coraza.WAF, ix *Index, uri, skip string, status int) (string, int) {
	tx := waf.NewTransaction()
	if ix != nil {
		ix.Start(tx)
	}
	defer func() { _ = tx.Close() }()
	tx.ProcessURI(uri, "GET", "HTTP/1.1")
	if skip != "" {
		tx.AddRequestHeader("X-Skip", skip)
	}
	var out []string
	if it := tx.ProcessRequestHeaders(); it != nil {
		out = append(out, fmt.Sprintf("interrupted %d", it.RuleID))
	}
	if it, _ := tx.ProcessRequestBody(); it != nil {
		out = append(out, fmt.Sprintf("interrupted %d", it.RuleID))
	}
	tx.ProcessResponseHeaders(status, "HTTP/1.1")
	_, _ = tx.ProcessResponseBody()
	tx.ProcessLogging()
	fired := 0
	for _, mr := range tx.MatchedRules() {
		if IsJump(mr.Rule().ID()) {
			fired++
			continue
		}
		out = append(out, fmt.Sprint(mr.Rule().ID()))
	}
	var txv []string
	for _, md := range tx.(plugintypes.TransactionState).Variables().TX().FindAll() {
		txv = append(txv, md.Key()+"="+md.Value())
	}
	slices.Sort(txv)
	return strings.Join(append(out, txv...), " "), fired
}

func TestPlanJumps_none(t *testing.T) {
	for name, c := range map[string]struct {
		fsys       fstest.MapFS
		directives string
	}{
		"too few markers":                 {fstest.MapFS{"r.conf": {Data: []byte("#\nSecMarker A\nSecMarker B\nSecRule ARGS \"@rx x\" \"id:1,phase:3,pass\"\n")}}, "Include r.conf"},
		"an ID of the jumps taken":        {fstest.MapFS{"r.conf": {Data: []byte(fmt.Sprintf("#\nSecMarker A\nSecMarker B\nSecMarker C\nSecMarker D\nSecRule ARGS \"@rx x\" \"id:%d,phase:3,pass\"\n", jumpBase+3))}}, "Include r.conf"},
		"a file read twice":               {fstest.MapFS{"r.conf": {Data: []byte("#\nSecMarker A\nSecMarker B\nSecMarker C\nSecMarker D\n")}}, "Include r.conf\nInclude r.conf"},
		"a marker name that needs quotes": {fstest.MapFS{"r.conf": {Data: []byte("#\nSecMarker A\nSecMarker B\nSecMarker C\nSecMarker \"D E\"\n")}}, "Include r.conf"},
		"a file that cannot be read":      {fstest.MapFS{}, "Include r.conf"},
	} {
		if p := planJumps(c.directives, c.fsys); p != nil {
			t.Errorf("%s: planned %v", name, p.lines)
		}
	}
}

// TestCheckJumps checks, on compiled rule sets, the jumps checkJumps
// refuses: every transaction then goes without them.
func TestCheckJumps(t *testing.T) {
	jump := func(phase int, mark string) string {
		return fmt.Sprintf(`SecAction "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`, jumpBase, phase, mark)
	}
	for name, c := range map[string]struct {
		rules string
		holds bool
	}{
		"over markers":                 {jump(3, "B") + "\nSecMarker A\nSecMarker B\nSecRule ARGS \"@rx x\" \"id:1,phase:3,pass\"", true},
		"over a rule of another phase": {jump(3, "B") + "\nSecMarker A\nSecRule ARGS \"@rx x\" \"id:1,phase:2,pass\"\nSecMarker B", true},
		"over a rule of its phase":     {jump(3, "B") + "\nSecMarker A\nSecRule ARGS \"@rx x\" \"id:1,phase:3,pass\"\nSecMarker B", false},
		"no marker of its name":        {jump(3, "C") + "\nSecMarker A\nSecMarker B", false},
		"the marker before it":         {"SecMarker B\n" + jump(3, "B") + "\nSecMarker A", false},
		"inside a skip":                {"SecRule ARGS \"@rx x\" \"id:1,phase:3,pass,skip:2\"\nSecMarker A\n" + jump(3, "B") + "\nSecMarker B", false},
		"past a skip":                  {"SecRule ARGS \"@rx x\" \"id:1,phase:3,pass,skip:1\"\nSecMarker A\n" + jump(3, "B") + "\nSecMarker B", true},
		"a skip of another phase":      {"SecRule ARGS \"@rx x\" \"id:1,phase:2,pass,skip:5\"\n" + jump(3, "B") + "\nSecMarker B", true},
		"a default with a ctl":         {"SecDefaultAction \"phase:3,pass,log,ctl:ruleEngine=Off\"\n" + jump(3, "B") + "\nSecMarker B", false},
		"a ctl that removes markers":   {"SecRule ARGS \"@rx x\" \"id:1,phase:2,pass,ctl:ruleRemoveById=0-10\"\n" + jump(3, "B") + "\nSecMarker B", false},
	} {
		b := NewBuilder(ReadRuleSet(c.rules, nil))
		b.Jumps([]int{jumpBase}, nil)
		cfg := experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig(), b.Observe)
		b.Begin()
		waf, err := coraza.NewWAF(cfg.WithDirectives(c.rules))
		b.End()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ix := b.Finish(waf.(experimental.WAFWithRules).RulesCount())
		all, off := ix.Jumps()
		if len(all) != 1 {
			t.Fatalf("%s: jumps %v, want the one", name, all)
		}
		if holds := len(off) == 0; holds != c.holds {
			t.Errorf("%s: holds %v, want %v", name, holds, c.holds)
		}
		if !c.holds && !ix.NeedsStart() {
			t.Errorf("%s: a refused jump, and transactions do not start through Start", name)
		}
		if !c.holds {
			tx := waf.NewTransaction()
			ix.Start(tx)
			tx.ProcessURI("/", "GET", "HTTP/1.1")
			tx.ProcessRequestHeaders()
			_, _ = tx.ProcessRequestBody()
			tx.ProcessResponseHeaders(200, "HTTP/1.1")
			for _, mr := range tx.MatchedRules() {
				if IsJump(mr.Rule().ID()) {
					t.Errorf("%s: the refused jump fired", name)
				}
			}
			_ = tx.Close()
		}
	}
}

// TestJumps_crs pins the jumps of the CRS at paranoia level 1: where they
// go, that they hold, and that the prelude is unchanged by them.
//
// The marker jumps (SecAction, IDs in planning order, phase by phase)
// pass over runs of at least three markers and no rule of their phase
// that the prelude leaves, each from the last free (comment) line before
// the run: from the first comment lines of @coraza.conf-recommended, the
// request files' markers in phases 3 and 4 and those up to 959 in phase
// 5; from the end of 901 those of 901 to 913 in phase 2; from the end of
// 932 those of 933 and 934 in phase 1, and from 941's comments (past
// 941010) 941 to 944; from the end of 949 everything after it in phases
// 1 and 2; the response files' markers from 950 to 956 in phase 3, and
// from the end of 959 those to 980 in phases 3 and 4. The screened jumps
// (@preselectjump, screenedjumps.go) then take the free lines left in
// front of the attack files of phases 1 and 2.
func TestJumps_crs(t *testing.T) {
	directives := "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf"
	p := planJumps(directives, rules.FS)
	if p == nil {
		t.Fatal("no jumps planned for the CRS")
	}
	marker := func(n, phase int, mark string) string {
		return fmt.Sprintf(`SecAction "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`, jumpBase+n, phase, mark)
	}
	screened := func(n, phase int, mark string) string {
		return fmt.Sprintf(`SecRule REQUEST_METHOD "@%s" "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`, jumpOperator, jumpBase+n, phase, mark)
	}
	const (
		end913 = "END-REQUEST-913-SCANNER-DETECTION"
		end934 = "END-REQUEST-934-APPLICATION-ATTACK-GENERIC"
		end944 = "END-REQUEST-944-APPLICATION-ATTACK-JAVA"
		end949 = "END-REQUEST-949-BLOCKING-EVALUATION"
		end956 = "END-RESPONSE-956-DATA-LEAKAGES-RUBY"
		end959 = "END-RESPONSE-959-BLOCKING-EVALUATION"
		end980 = "END-RESPONSE-980-CORRELATION"
	)
	want := map[string]map[int]string{
		"@coraza.conf-recommended": {
			0: marker(5, 3, end949), 1: marker(8, 4, end949), 2: marker(10, 5, end959),
		},
		"@owasp_crs/REQUEST-901-INITIALIZATION.conf":             {342: marker(3, 2, end913)},
		"@owasp_crs/REQUEST-921-PROTOCOL-ATTACK.conf":            {0: screened(11, 1, end934)},
		"@owasp_crs/REQUEST-922-MULTIPART-ATTACK.conf":           {0: screened(12, 1, end934)},
		"@owasp_crs/REQUEST-931-APPLICATION-ATTACK-RFI.conf":     {0: screened(13, 1, end934), 1: screened(15, 2, end944)},
		"@owasp_crs/REQUEST-932-APPLICATION-ATTACK-RCE.conf":     {0: screened(14, 1, end934), 1: screened(16, 2, end944), 756: marker(0, 1, end934)},
		"@owasp_crs/REQUEST-933-APPLICATION-ATTACK-PHP.conf":     {0: screened(17, 2, end944)},
		"@owasp_crs/REQUEST-934-APPLICATION-ATTACK-GENERIC.conf": {0: screened(18, 2, end944)},
		"@owasp_crs/REQUEST-941-APPLICATION-ATTACK-XSS.conf":     {0: screened(19, 2, end944), 66: marker(1, 1, end944)},
		"@owasp_crs/REQUEST-942-APPLICATION-ATTACK-SQLI.conf":    {0: screened(20, 2, end944)},
		"@owasp_crs/REQUEST-949-BLOCKING-EVALUATION.conf":        {222: marker(2, 1, end980), 233: marker(4, 2, end980)},
		"@owasp_crs/RESPONSE-950-DATA-LEAKAGES.conf":             {33: marker(6, 3, end956)},
		"@owasp_crs/RESPONSE-959-BLOCKING-EVALUATION.conf":       {232: marker(7, 3, end980), 243: marker(9, 4, end980)},
	}
	if !maps.EqualFunc(p.lines, want, maps.Equal) {
		var got []string
		for file, lines := range p.lines {
			for n, l := range lines {
				got = append(got, fmt.Sprintf("%s:%d: %s", file, n, l))
			}
		}
		slices.Sort(got)
		t.Errorf("jumps:\n%s\nwant %v", strings.Join(got, "\n"), want)
	}
	var ids, screenedIDs []int
	for n := range 21 {
		ids = append(ids, jumpBase+n)
		if n >= 11 {
			screenedIDs = append(screenedIDs, jumpBase+n)
		}
	}
	if !slices.Equal(p.IDs(), ids) || !slices.Equal(p.ScreenedIDs(), screenedIDs) {
		t.Errorf("IDs %v, screened %v; want %v, the last ten screened", p.IDs(), p.ScreenedIDs(), ids)
	}
	_, ix := compileJumps(t, rules.FS, directives, true)
	_, plain := compileJumps(t, rules.FS, directives, false)
	all, off := ix.Jumps()
	if !slices.Equal(slices.Sorted(slices.Values(all)), ids) || len(off) != 0 {
		t.Errorf("compiled jumps %v, refused %v; want the %d planned, none refused", all, off, len(ids))
	}
	if a, b := ix.PreludeIDs(), plain.PreludeIDs(); !slices.Equal(a, b) {
		t.Errorf("the prelude removes %d rules with the jumps, %d without", len(a), len(b))
	}
}

// BenchmarkPlanJumps_crs measures what the planner adds to a VM start with
// the CRS.
func BenchmarkPlanJumps_crs(b *testing.B) {
	directives := "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf"
	b.ReportAllocs()
	for b.Loop() {
		if planJumps(directives, rules.FS) == nil {
			b.Fatal("no jumps")
		}
	}
}

// TestPlanJumps_limits checks the planner at and past its limits: the
// fewest markers a jump passes over, the free lines it keeps in a row,
// the most jumps.
func TestPlanJumps_limits(t *testing.T) {
	plan := func(text string) *JumpPlan {
		return planJumps("Include r.conf", fstest.MapFS{"r.conf": {Data: []byte(text)}})
	}
	markers := func(n int, prefix string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "SecMarker %s%d\n", prefix, i)
		}
		return b.String()
	}
	comments := strings.Repeat("#\n", maxFree+1)
	// minJumpMarkers markers: a jump in each phase, on the first maxFree
	// comment lines; one fewer: none.
	p := plan(comments + markers(minJumpMarkers, "M"))
	if p == nil || len(p.IDs()) != 5 {
		t.Fatalf("%d markers: plan %v, want a jump in each of the 5 phases", minJumpMarkers, p)
	}
	for i := range maxFree {
		if _, ok := p.lines["r.conf"][i]; !ok {
			t.Errorf("comment line %d holds no jump: %v", i, p.lines)
		}
	}
	if p := plan(comments + markers(minJumpMarkers-1, "M")); p != nil {
		t.Errorf("%d markers: planned %v", minJumpMarkers-1, p.lines)
	}
	// Each block gives every phase a stretch of its own: 5 jumps.
	blocks := func(n int) string {
		var b strings.Builder
		for k := range n {
			b.WriteString(comments + markers(minJumpMarkers, fmt.Sprintf("B%d-", k)))
			for phase := 1; phase <= 5; phase++ {
				fmt.Fprintf(&b, "SecRule ARGS \"@rx x\" \"id:%d,phase:%d,pass,nolog\"\n", 100*k+phase, phase)
			}
		}
		return b.String()
	}
	for _, n := range []int{maxJumps / 5, maxJumps/5 + 1} {
		p := plan(blocks(n))
		if p == nil {
			t.Fatalf("%d blocks: no jumps", n)
		}
		ids := p.IDs()
		if len(ids) != maxJumps || ids[0] != jumpBase || ids[len(ids)-1] != jumpBase+maxJumps-1 {
			t.Errorf("%d blocks: %d jumps (%d to %d), want %d from %d", n, len(ids), ids[0], ids[len(ids)-1], maxJumps, jumpBase)
		}
	}
}

// TestJumps_screenPasses: a screen walks on past a marker jump in the
// middle of its phase (the jump passes over no rule of the phase), so the
// one screen the first rule of phase 2 runs drops the rules after the
// jump too, before Coraza reaches them.
func TestJumps_screenPasses(t *testing.T) {
	fsys := fstest.MapFS{"r.conf": {Data: []byte(`SecRule ARGS "@contains alpha" "id:10,phase:2,pass,log"
#
#
#
#
#
SecMarker M1
SecMarker M2
SecMarker M3
SecRule ARGS "@contains beta" "id:20,phase:2,pass,log"
SecRule ARGS "@contains gamma" "id:21,phase:2,pass,log"
`)}}
	directives := "SecRuleEngine On\nInclude r.conf"
	if p := planJumps(directives, fsys); p == nil || !strings.Contains(p.lines["r.conf"][2], "phase:2,") {
		t.Fatalf("plan %v: want a jump of phase 2 on line 3", p)
	}
	with, ix := compileJumps(t, fsys, directives, true)
	if len(ix.jumps) != 5 || len(ix.jumpsOff) != 0 {
		t.Fatalf("jumps %v (off %v): want one of phase 2, on", ix.jumps, ix.jumpsOff)
	}
	var reports []Report
	OnScreen = func(r Report) {
		if r.Phase == 2 {
			reports = append(reports, r)
		}
	}
	defer func() { OnScreen = nil }()
	tx := with.NewTransaction()
	ix.Start(tx)
	defer func() { _ = tx.Close() }()
	tx.ProcessURI("/?x=beta", "GET", "HTTP/1.1")
	tx.ProcessRequestHeaders()
	_, _ = tx.ProcessRequestBody()
	if len(reports) != 1 || reports[0].Screened != 3 || reports[0].Removed != 2 {
		t.Errorf("phase 2 screens %+v, want one that judged 10, 20 and 21 and removed 10 and 21", reports)
	}
	var matched []int
	for _, mr := range tx.MatchedRules() {
		if !IsJump(mr.Rule().ID()) {
			matched = append(matched, mr.Rule().ID())
		}
	}
	if !slices.Equal(matched, []int{20}) {
		t.Errorf("matched %v, want [20]", matched)
	}
}

// planJumps reads the rule set and plans its jumps.
func planJumps(directives string, fsys fs.FS) *JumpPlan {
	return PlanJumps(ReadRuleSet(directives, fsys))
}

// planLeavingOut reads the rule set and plans its jumps and the rules
// left out.
func planLeavingOut(directives string, fsys fs.FS) *JumpPlan {
	return PlanLeavingOut(ReadRuleSet(directives, fsys))
}
