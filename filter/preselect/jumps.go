package preselect

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/corazawaf/coraza/v3/types"
)

// Marker jumps.
//
// Coraza gives every SecMarker phase 0, so it evaluates every marker of
// the rule set in each of the five phases, unless a pending skipAfter
// passes over it. Evaluating a marker decides nothing, yet costs about as
// much as a rule that matches (four allocations in v3.8.1). The CRS has 29
// markers; with the higher paranoia levels' gates removed by the prelude,
// a GET evaluates about 150 of them, a third of its allocations.
//
// Most of them sit where a phase has no rules at all: the request files'
// markers in the response and logging phases, the response files' ones in
// the request phases. Before the compile, PlanJumps reads the directives
// and the files they include the way Coraza will, and puts one rule of
// its own in front of each run of such markers,
//
//	SecAction "id:N,phase:P,pass,nolog,noauditlog,skipAfter:LAST"
//
// where LAST is the run's last marker: in phase P, Coraza then passes over
// the run, as over any rules a skipAfter jumps over, without evaluating
// it. A jump takes the place of a blank or comment line, so that no rule's
// line number changes.
//
// Nothing a rule decides changes: between a jump and its marker there are
// only markers and rules of other phases, which phase P never evaluates.
// After the compile, checkJumps verifies that on the compiled rule set (the
// order the rule observer saw); a jump that does not hold is removed from
// every transaction (Index.Start), so that the rule set runs as written.
// What the jump leaves is what the markers would have left: a SecAction
// sets the same empty MATCHED_VAR, MATCHED_VAR_NAME and MATCHED_VARS as a
// marker, and RULE is set again by every rule before it reads anything.
// The jump is among the transaction's matched rules, as a rule with nolog
// and noauditlog: no log line, no audit log entry, no metric counts it.

// jumpBase is the ID of the first jump; a rule set may hold up to
// maxJumps of them. A rule set that uses one of these IDs itself gets no
// jumps.
const (
	jumpBase = 2147483600
	maxJumps = 40
)

// IsJump reports whether id is the ID of a marker jump.
func IsJump(id int) bool { return id >= jumpBase && id < jumpBase+maxJumps }

// maxFree is the most free lines in a row the planner keeps: one for
// each phase.
const maxFree = 5

// minJumpMarkers is the fewest markers a jump must pass over: a jump is
// itself a rule that matches, which costs about what two markers cost
// (7.4 allocations against 4 in Coraza v3.8.1), so a jump over three
// saves about one (with the CRS, a GET 726 -> 703 allocations natively
// against a minimum of four).
const minJumpMarkers = 3

// JumpPlan is where the jumps go in a rule set's texts: by file (the name
// Coraza reads it by; "" for the directives themselves) and line. It also
// holds the files the planner read, for the compile to read them again
// without a second copy.
type JumpPlan struct {
	lines map[string]map[int]string
	ids   []int
	files map[string][]byte
	// screened are the IDs of the screened jumps among ids
	// (screenedjumps.go).
	screened []int
	// blank are the lines of each file that the rules left out of the
	// compile take, leftOut their IDs and gates the gates they were left
	// out behind (leftout.go).
	blank   map[string]map[int]bool
	leftOut []int
	gates   []int
}

// IDs returns the rule IDs of the planned jumps.
func (p *JumpPlan) IDs() []int {
	if p == nil {
		return nil
	}
	return p.ids
}

// Directives returns the directives with the jumps planned in them.
func (p *JumpPlan) Directives(text string) string { return p.apply("", text) }

// ReadFile returns, the first time it is asked for name, the file the
// planner read by that name with the jumps planned in it; ok is false
// after that, or for a file the planner did not read once: the caller
// then reads the file as it is.
func (p *JumpPlan) ReadFile(name string) (data []byte, ok bool) {
	if p == nil {
		return nil, false
	}
	data, ok = p.files[name]
	delete(p.files, name)
	return data, ok
}

func (p *JumpPlan) apply(name, text string) string {
	if p == nil || p.lines[name] == nil && p.blank[name] == nil {
		return text
	}
	return string(p.splice(name, []byte(text)))
}

// splice returns data with each planned line replaced by its jump, and
// the lines of the rules left out blank; a \r at the end of a replaced
// line stays, so that CRLF line ends stay.
func (p *JumpPlan) splice(name string, data []byte) []byte {
	jumps, blank := p.lines[name], p.blank[name]
	out := make([]byte, 0, len(data)+len(jumps)*100)
	for i := 0; len(data) != 0; i++ {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		data = rest
		if blank[i] {
			if bytes.HasSuffix(line, []byte("\r")) {
				out = append(out, '\r')
			}
		} else if j, ok := jumps[i]; ok {
			out = append(out, j...)
			if bytes.HasSuffix(line, []byte("\r")) {
				out = append(out, '\r')
			}
		} else {
			out = append(out, line...)
		}
		if found {
			out = append(out, '\n')
		}
	}
	return out
}

// jitem is one thing in the rule set's order, as the planner reads it: a
// top-level rule, a marker, or a line a jump could take.
type jitem struct {
	kind  jkind
	phase types.RulePhase // jRule
	mark  string          // jMarker; jRule: the marker of its skipAfter
	file  string          // jFree, jRule
	line  int             // jFree: the line's index in its text
	id    int             // jRule
	// first and last are, for a jRule, the indexes in its text of the
	// rule's first line and of its chain's last one; split, that its
	// chain goes on past an Include, so that its lines are not all in
	// that text (it is never left out).
	first, last int
	split       bool
	// gate is, for a paranoia-level gate, the level N of
	//	SecRule TX:DETECTION_PARANOIA_LEVEL "@lt N" "...,skipAfter:MARK"
	// which jumps to mark below level N.
	gate int
	// barrier: jRule, a rule the screen may not be able to judge, which
	// ends a screened jump's reach (screenedjumps.go); known once
	// jscan.barrier has read the rule (a gate is none).
	barrier, known bool
}

type jkind uint8

const (
	jRule jkind = iota
	jMarker
	jFree
)

// jscan reads a rule set's texts in Coraza's order (internal/seclang,
// Parser.parseString and FromFile).
type jscan struct {
	fsys  fs.FS
	items []jitem
	reads map[string]int
	data  map[string][]byte // what each file held
	ids   map[int]bool
	dupID bool // an ID is given to two rules
	// directives is the rule set's own text; lineStarts are the offsets
	// of each line of a text (jscan.rule).
	directives string
	lineStarts map[string][]int
	// lineBuf joins the continued lines of the rule ruleText reads.
	lineBuf   []byte
	lastRule  int // the index in items of the last top-level rule
	chainOpen bool
	depth     int
	failed    bool
	// level is the highest paranoia level a setvar of the rule set
	// writes as a number (1 when none does, the CRS's default).
	level int
}

// PlanJumps reads the directives, and the files they include from fsys,
// and plans the jumps. It returns nil when there is nothing to gain or the
// texts cannot be read as Coraza will read them.
func PlanJumps(directives string, fsys fs.FS) *JumpPlan { return plan(directives, fsys, false) }

// PlanLeavingOut is PlanJumps that also leaves out of the compile the
// rules that the paranoia-level gates jump over in every transaction
// (leftout.go).
func PlanLeavingOut(directives string, fsys fs.FS) *JumpPlan { return plan(directives, fsys, true) }

func plan(directives string, fsys fs.FS, leave bool) *JumpPlan {
	s := &jscan{fsys: fsys, reads: map[string]int{}, data: map[string][]byte{}, ids: map[int]bool{}, level: 1, directives: directives}
	s.text(directives, "", "")
	if s.failed {
		return nil
	}
	for id := range s.ids {
		if IsJump(id) {
			return nil
		}
	}
	p := &JumpPlan{lines: map[string]map[int]string{}}
	used := map[int]bool{}
	var gone, taken [types.PhaseLogging + 1][]bool
	for phase := types.PhaseRequestHeaders; phase <= types.PhaseLogging; phase++ {
		gone[phase] = s.prelude(phase)
		taken[phase] = make([]bool, len(s.items)) // covered by a jump of this phase
		start := 0
		for k := 0; k <= len(s.items); k++ {
			if k < len(s.items) && !(s.items[k].kind == jRule && s.items[k].phase == phase && !gone[phase][k]) {
				continue
			}
			if from, to := s.place(p, used, gone[phase], phase, start, k); from >= 0 {
				for i := from; i <= to; i++ {
					taken[phase][i] = true
				}
			}
			start = k + 1
		}
	}
	// The screened jumps take the free lines the others left.
	for phase := types.PhaseRequestHeaders; phase <= types.PhaseResponseBody; phase++ {
		s.placeScreened(p, used, gone[phase], taken[phase], phase)
	}
	if leave {
		p.blank = map[string]map[int]bool{}
		s.leaveOut(p, directives)
	}
	if len(p.ids) == 0 && len(p.leftOut) == 0 {
		return nil
	}
	p.files = map[string][]byte{}
	for f, data := range s.data {
		if s.reads[f] == 1 {
			if p.lines[f] != nil || p.blank[f] != nil {
				data = p.splice(f, data)
			}
			p.files[f] = data
		}
	}
	return p
}

// prelude guesses which rules of phase the prelude will remove from
// every transaction (prelude.go): the paranoia-level gates, which either
// never jump or always do at the rule set's level, and the rules of the
// phase an always-jumping gate passes over, up to its marker. The guess
// only places the jumps; checkJumps decides on the prelude Snapshot made.
// A free line among the rules an always-jumping gate passes over is gone
// too: the prelude would remove the jump put there with them.
func (s *jscan) prelude(phase types.RulePhase) []bool {
	gone := make([]bool, len(s.items))
	for k := 0; k < len(s.items); k++ {
		g := s.items[k]
		if g.kind != jRule || g.phase != phase || g.gate == 0 {
			continue
		}
		gone[k] = true
		if s.level >= g.gate {
			continue
		}
		for k++; k < len(s.items); k++ {
			it := s.items[k]
			if it.kind == jMarker && it.mark == g.mark {
				break
			}
			if it.kind == jFree || it.kind == jRule && it.phase == phase {
				gone[k] = true
			}
		}
	}
	return gone
}

// place plans a jump for phase over the markers in items[a:b], a stretch
// without rules of that phase: from the earliest free line after which
// minJumpMarkers or more markers follow, to the last marker. It returns
// the items the jump covers (from its line to its marker), -1 when it
// plans none.
func (s *jscan) place(p *JumpPlan, used map[int]bool, gone []bool, phase types.RulePhase, a, b int) (from, to int) {
	last := -1
	for k := b - 1; k >= a; k-- {
		if s.items[k].kind == jMarker {
			last = k
			break
		}
	}
	if last < 0 || !plainMark(s.items[last].mark) || len(p.ids) == maxJumps {
		return -1, -1
	}
	markers := 0
	for k := a; k <= last; k++ {
		if s.items[k].kind == jMarker {
			markers++
		}
	}
	for k := a; k < last; k++ {
		it := s.items[k]
		if it.kind == jMarker {
			markers--
		}
		if markers < minJumpMarkers {
			return -1, -1
		}
		if it.kind != jFree || used[k] || gone[k] || s.reads[it.file] > 1 {
			continue
		}
		used[k] = true
		p.add(it, fmt.Sprintf(`SecAction "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`, jumpBase+len(p.ids), phase, s.items[last].mark))
		return k, last
	}
	return -1, -1
}

// add plans the jump rule text (with the next jump ID) on the free line
// it, and returns its ID.
func (p *JumpPlan) add(it jitem, text string) int {
	id := jumpBase + len(p.ids)
	p.ids = append(p.ids, id)
	if p.lines[it.file] == nil {
		p.lines[it.file] = map[int]string{}
	}
	p.lines[it.file][it.line] = text
	return id
}

// plainMark reports whether a marker's name can be written as a skipAfter
// value without quoting.
func plainMark(m string) bool {
	return m != "" && !strings.ContainsAny(m, ",'\" \t\\`")
}

// text reads one text the way Coraza's parser does (eachLine). A blank or
// comment line outside a directive is free for a jump; of a run of them,
// the planner keeps maxFree.
func (s *jscan) text(data, file, dir string) {
	free, last := 0, -2
	eachLineAt(data, func(l string, first, last int) bool {
		s.directive(l, file, dir, first, last)
		return !s.failed
	}, func(i int) {
		if i != last+1 {
			free = 0
		}
		last = i
		// A line between a chain's rules is not free: a rule put there
		// would join the chain.
		if free < maxFree && !s.chainOpen {
			s.items = append(s.items, jitem{kind: jFree, file: file, line: i})
			free++
		}
	})
}

// directive reads one directive of file, on its lines first to last: an
// Include is read in place, a rule or marker becomes an item.
func (s *jscan) directive(l, file, dir string, first, last int) {
	name, opts, _ := strings.Cut(l, " ")
	if len(opts) >= 3 && opts[0] == '"' && opts[len(opts)-1] == '"' {
		opts = strings.Trim(opts, `"`)
	}
	var it jitem
	var actions string
	switch {
	case strings.EqualFold(name, "include"):
		if s.chainOpen {
			s.items[s.lastRule].split = true
		}
		s.include(strings.Clone(opts), dir)
		return
	case strings.EqualFold(name, "secmarker"):
		s.chainOpen = false
		s.items = append(s.items, jitem{kind: jMarker, mark: strings.Clone(opts)})
		return
	case strings.EqualFold(name, "secrule"):
		vars, op, acts, ok := splitSecRule(l)
		if !ok {
			s.failed = true
			return
		}
		child := s.chainOpen
		s.chainOpen = false
		eachAction(acts, func(name, _ string) {
			if strings.EqualFold(name, "chain") {
				s.chainOpen = true
			}
		})
		if child {
			s.chained(file, last)
			return
		}
		actions = acts
		if level, ok := strings.CutPrefix(op, "@lt "); ok && strings.EqualFold(vars, "TX:DETECTION_PARANOIA_LEVEL") {
			if n, err := strconv.Atoi(strings.TrimSpace(level)); err == nil && n > 0 {
				it.gate = n
			}
		}
	case strings.EqualFold(name, "secaction"):
		if s.chainOpen {
			// Coraza appends it to the open chain.
			s.chainOpen = false
			s.chained(file, last)
			return
		}
		actions = opts
	default:
		return
	}
	it.kind, it.phase = jRule, types.PhaseRequestBody
	it.file, it.first, it.last = file, first, last
	eachAction(actions, func(name, value string) {
		switch {
		case strings.EqualFold(name, "phase"):
			ph, err := types.ParseRulePhase(strings.Trim(value, `'"`))
			if err != nil {
				s.failed = true
			}
			it.phase = ph
		case strings.EqualFold(name, "id"):
			if n, err := strconv.Atoi(strings.Trim(value, `'"`)); err == nil {
				if s.ids[n] {
					s.dupID = true
				}
				s.ids[n] = true
				it.id = n
			}
		case strings.EqualFold(name, "skipafter"):
			it.mark = strings.Clone(strings.Trim(value, `'"`))
		case strings.EqualFold(name, "setvar"):
			k, v, _ := strings.Cut(strings.Trim(value, `'"`), "=")
			if !strings.EqualFold(k, "tx.detection_paranoia_level") && !strings.EqualFold(k, "tx.blocking_paranoia_level") {
				break
			}
			if n, err := strconv.Atoi(v); err == nil && n > s.level {
				s.level = n
			}
		}
	})
	if it.mark == "" {
		it.gate = 0
	}
	it.known = it.gate != 0
	s.lastRule = len(s.items)
	s.items = append(s.items, it)
}

// chained adds a chained rule of file, ending on line last, to the last
// top-level rule.
func (s *jscan) chained(file string, last int) {
	r := &s.items[s.lastRule]
	if r.file != file {
		r.split = true
	}
	r.last = last
}

// barrier reports whether the rule items[k] is a barrier, reading it the
// first time it is asked (most rules never are: those of the phases a
// screened jump does not reach, those the prelude removes).
func (s *jscan) barrier(k int) bool {
	it := &s.items[k]
	if !it.known {
		s.ruleText(*it, func(d string) {
			// The parsed rule shares the scan's line buffer: it is
			// judged here, during the call, and not kept.
			it.barrier = !screenable(parseRule(d))
		})
		it.known = true
	}
	return it.barrier
}

// ruleText calls fn with the text of the rule it (without its chain),
// valid only during the call.
func (s *jscan) ruleText(it jitem, fn func(string)) {
	data := s.directives
	if it.file != "" {
		b := s.data[it.file]
		data = unsafe.String(unsafe.SliceData(b), len(b))
	}
	starts := s.lineStarts[it.file]
	if starts == nil {
		starts = []int{0}
		for i := 0; i < len(data); i++ {
			if data[i] == '\n' {
				starts = append(starts, i+1)
			}
		}
		if s.lineStarts == nil {
			s.lineStarts = map[string][]int{}
		}
		s.lineStarts[it.file] = starts
	}
	eachLineIn(&s.lineBuf, data[starts[it.first]:], func(d string, _, _ int) bool {
		fn(d)
		return false
	}, nil)
}

// include reads an Included file, or each file a pattern matches, as
// Coraza's Parser.FromFile does.
func (s *jscan) include(path, dir string) {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > 100 {
		s.failed = true
		return
	}
	var files []string
	glob := strings.Contains(path, "*")
	if glob {
		var err error
		if files, err = fs.Glob(s.fsys, path); err != nil {
			s.failed = true
			return
		}
	} else {
		files = []string{path}
	}
	for _, f := range files {
		f = strings.TrimSpace(f)
		if !glob && !strings.HasPrefix(f, "/") {
			f = filepath.Join(dir, f)
		}
		data, err := fs.ReadFile(s.fsys, f)
		if err != nil {
			s.failed = true
			return
		}
		s.reads[f]++
		s.data[f] = data
		// data is this scan's own copy and is never written, so the
		// text can share it.
		s.text(unsafe.String(unsafe.SliceData(data), len(data)), f, filepath.Dir(f))
		if s.failed {
			return
		}
	}
}

// checkJumps finds the planned jumps (ids) among the compiled rules and
// returns those that would change what the rule set decides: a jump must
// land on a marker of its name, pass over nothing but markers and rules
// of other phases, and lie outside every skip of its phase. With a
// SecDefaultAction that adds actions to every rule, or a ctl that may
// remove markers, no jump holds.
//
// removed are the rules every transaction goes without (the prelude's):
// a jump may pass over them too.
func checkJumps(rules []jrule, facts directiveFacts, ids []int, removed map[int]bool) (off []int) {
	planned := map[int]bool{}
	for _, id := range ids {
		planned[id] = true
	}
	all := facts.defaultsOther || facts.defaultsSkip || facts.runtime.any || inRanges(0, facts.runtime.ids)
	for i, r := range rules {
		if r.mark != "" || !planned[r.id] {
			continue
		}
		if all || !jumpHolds(rules, i, removed) {
			off = append(off, r.id)
		}
	}
	return off
}

// jrule is what checkJumps needs of an observed rule.
type jrule struct {
	id    int
	phase types.RulePhase
	mark  string // a marker's name
	jump  string // skipAfter
	skip  string // skip
}

// jumpRules returns what checkJumps needs of the rules.
func jumpRules(rules []observed) []jrule {
	out := make([]jrule, len(rules))
	for i, r := range rules {
		out[i] = jrule{id: r.id, phase: r.phase, mark: r.secMark,
			jump: strings.Trim(actionValue(r.parsed.actions, "skipafter"), `'"`),
			skip: strings.Trim(actionValue(r.parsed.actions, "skip"), `'"`)}
	}
	return out
}

// jumpHolds checks the jump rules[i].
func jumpHolds(rules []jrule, i int, removed map[int]bool) bool {
	j := rules[i]
	if j.jump == "" || removed[j.id] {
		return false
	}
	landed := false
	for _, r := range rules[i+1:] {
		if r.mark == j.jump {
			landed = true
			break
		}
		if r.mark == "" && r.phase == j.phase && !removed[r.id] {
			return false
		}
	}
	return landed && outsideSkips(rules, i)
}

// outsideSkips reports whether rules[i] lies outside every skip:N of its
// phase. A skip:N before it passes over N rules and markers that are
// evaluated; markers are never removed, so N markers between the skip and
// rules[i] end its window first. A rule with both skip and skipAfter may
// pass its markers by under the skipAfter.
func outsideSkips(rules []jrule, i int) bool {
	j := rules[i]
	for k := i - 1; k >= 0; k-- {
		r := rules[k]
		if r.mark != "" || r.phase != j.phase || r.skip == "" {
			continue
		}
		if r.jump != "" {
			return false
		}
		n, err := strconv.Atoi(r.skip)
		if err != nil {
			return false
		}
		markers := 0
		for _, m := range rules[k+1 : i] {
			if m.mark != "" {
				markers++
			}
		}
		if markers < n {
			return false
		}
	}
	return true
}
