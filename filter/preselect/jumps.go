package preselect

import (
	"fmt"
	"strconv"
	"strings"

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

// PlanJumps plans the jumps into the rule set's texts. It returns nil
// when there is nothing to gain or the texts cannot be read as Coraza
// will read them.
func PlanJumps(s *RuleSet) *JumpPlan { return s.plan(false) }

// PlanLeavingOut is PlanJumps that also leaves out of the compile the
// rules that the paranoia-level gates jump over in every transaction
// (leftout.go).
func PlanLeavingOut(s *RuleSet) *JumpPlan { return s.plan(true) }

// plan runs once per rule set: it lets go of the texts read (data) when
// it is done, so that they are not held while the rule set compiles; the
// plan keeps the texts it rewrote or took over (JumpPlan.ReadFile). A
// second call plans nothing.
func (s *RuleSet) plan(leave bool) *JumpPlan {
	if s.failed || s.data == nil {
		return nil
	}
	defer s.dropTexts()
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
		s.leaveOut(p)
	}
	if len(p.ids) == 0 && len(p.leftOut) == 0 {
		return nil
	}
	p.rewrite(s)
	return p
}

// prelude guesses which rules of phase the prelude will remove from
// every transaction (prelude.go): the paranoia-level gates, which either
// never jump or always do at the rule set's level, and the rules of the
// phase an always-jumping gate passes over, up to its marker. The guess
// only places the jumps; checkJumps decides on the prelude Snapshot made.
// A free line among the rules an always-jumping gate passes over is gone
// too: the prelude would remove the jump put there with them.
func (s *RuleSet) prelude(phase types.RulePhase) []bool {
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
func (s *RuleSet) place(p *JumpPlan, used map[int]bool, gone []bool, phase types.RulePhase, a, b int) (from, to int) {
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

// plainMark reports whether a marker's name can be written as a skipAfter
// value without quoting.
func plainMark(m string) bool {
	return m != "" && !strings.ContainsAny(m, ",'\" \t\\`")
}

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
