package preselect

import (
	"slices"
	"strings"

	"github.com/corazawaf/coraza/v3/types"
)

// Rules left out of the compile.
//
// The CRS guards each paranoia level of a file with a gate per phase,
//
//	SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:942013,phase:1,pass,nolog,skipAfter:END-REQUEST-942-APPLICATION-ATTACK-SQLI"
//
// and at the rule set's level such a gate jumps in every transaction: the
// prelude (prelude.go) removes it, with every rule of its phase up to its
// marker, from each transaction. Those rules are still compiled, though,
// and at paranoia level 1 they are more than half of the CRS: the VM
// builds their operators and automata at its start, keeps them, and
// Coraza walks past them in every phase of every transaction.
//
// So the planner leaves them out of the compile: in the texts Coraza
// reads, their lines are blank (no other rule's line number moves). It
// leaves out a rule of phase P that follows a gate of phase P, with no
// marker in between but the gate's own, where
//
//   - the gate's level is above the highest paranoia level a setvar of
//     the rule set writes (the planner's guess of the prelude, RuleSet.prelude);
//   - the gate and the rule are in the same file, one the compile reads
//     once and not the directives themselves: the files come from the
//     plugin's embedded rule sets, whose every rule compiles (a rule set
//     at paranoia level 4 leaves none out), so that leaving one out never
//     hides an error in it;
//   - no directive names the gate or the rule by ID (SecRuleUpdateTargetById
//     and SecRuleUpdateActionById fail on a rule that is not there, and an
//     update or removal may change what the gate does), and no
//     SecRuleRemoveByTag names a tag of the gate;
//   - no ctl a rule may run could remove the gate while leaving the rule
//     (runtimeRemovals.mayRemoveKeeping): the rule would then run;
//   - no two rules of the rule set share an ID (Coraza refuses that);
//   - the rule set may have a prelude (openingLikely): without one, no
//     gate is known to jump in every transaction.
//
// The gates stay. After the compile, Index.Snapshot finds which gates
// jump in every transaction; compileWAF checks that each gate a rule was
// left out behind is one of them (Index.AlwaysJumps), and otherwise
// compiles the rule set again with every rule (PlanJumps). So what a
// transaction evaluates, matches and logs is what it did with the rules
// compiled: they never ran.
//
// What differs is what no transaction sees: the WAF holds fewer rules,
// and a SecRuleRemoveById, ByTag or ByMsg, or a ctl that removes rules,
// finds fewer to remove.

// leaveOut plans, into p, the rules the rule set may go without (see
// above).
func (s *RuleSet) leaveOut(p *JumpPlan) {
	if s.dupID {
		return
	}
	facts := s.facts
	if facts.updateAll || facts.runtime.any || !s.openingLikely(facts) {
		return
	}
	named := slices.Concat(facts.updated, facts.targetsUpdated, facts.removedIDs)
	out := make([]bool, len(s.items))
	for k, g := range s.items {
		if g.kind != jRule || g.gate == 0 || s.level >= g.gate || out[k] || g.file == "" || s.reads[g.file] != 1 ||
			inRanges(g.id, named) {
			continue
		}
		gate := observed{id: g.id}
		if len(facts.runtime.tags) != 0 || len(facts.removedTags) != 0 {
			gate.tags = s.tags(g)
		}
		if slices.ContainsFunc(facts.removedTags, func(t string) bool { return slices.Contains(gate.tags, t) }) {
			continue
		}
		var over []int
		ok := false
		for q := k + 1; q < len(s.items); q++ {
			it := s.items[q]
			if it.kind == jMarker {
				ok = it.mark == g.mark
				break
			}
			if it.kind != jRule || it.phase != g.phase {
				continue
			}
			if it.file != g.file {
				break
			}
			rule := observed{id: it.id}
			if len(facts.runtime.tags) != 0 {
				rule.tags = s.tags(it)
			}
			if facts.runtime.mayRemoveKeeping(gate, rule) {
				break
			}
			if it.id != 0 && !it.split && !inRanges(it.id, named) {
				over = append(over, q)
			}
		}
		if !ok || len(over) == 0 {
			continue
		}
		p.gates = append(p.gates, g.id)
		for _, q := range over {
			out[q] = true
			it := s.items[q]
			p.leftOut = append(p.leftOut, it.id)
			if p.blank[it.file] == nil {
				p.blank[it.file] = map[int]bool{}
			}
			for i := it.first; i <= it.last; i++ {
				p.blank[it.file][i] = true
			}
		}
	}
	slices.Sort(p.leftOut)
}

// openingLikely reports whether the rule set may have a prelude, without
// which no gate is known to jump in every transaction (AlwaysJumps): its
// rules of phase 1 must open with rules that Coraza may leave aside
// (asideRule) or guards (guardRule) up to the first constant one
// (constantRule). A rule set
// whose first rules of phase 1 include another kind (one that may deny,
// put before the CRS) has none, and the compile leaves nothing out rather
// than compile the rule set a second time.
func (s *RuleSet) openingLikely(facts directiveFacts) bool {
	for _, it := range s.items {
		if it.kind != jRule || it.phase != types.PhaseRequestHeaders {
			continue
		}
		var r observed
		s.ruleText(it, func(d string) {
			r = observed{id: it.id, phase: it.phase, raw: strings.Clone(d)}
		})
		r.parsed = parseRule(r.raw)
		switch {
		case constantRule(r, facts):
			return true
		case !asideRule(r, facts) && !guardRule(r, facts):
			return false
		}
	}
	return false
}

// LeftOut returns the IDs of the rules the plan leaves out of the compile,
// ascending.
func (p *JumpPlan) LeftOut() []int {
	if p == nil {
		return nil
	}
	return p.leftOut
}

// Gates returns the IDs of the paranoia-level gates the plan left rules
// out behind: each must jump in every transaction (Index.AlwaysJumps).
func (p *JumpPlan) Gates() []int {
	if p == nil {
		return nil
	}
	return p.gates
}

// AlwaysJumps reports whether the rule set has a prelude (after Snapshot)
// and each rule of ids is a jump the prelude found to jump in every
// transaction, removed with the rules of its phase up to its marker.
func (ix *Index) AlwaysJumps(ids []int) bool {
	if ix.prelude == nil {
		return false
	}
	for _, id := range ids {
		if !ix.alwaysJumps[id] {
			return false
		}
	}
	return true
}
