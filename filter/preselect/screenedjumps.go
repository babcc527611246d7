package preselect

import (
	"fmt"
	"slices"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/filter/fastpath"
)

// Screened jumps.
//
// A marker jump (jumps.go) passes over a run of markers that its phase has
// no rules among. Most markers a GET still evaluates sit between rules of
// their phase that the screen removes: the end markers of the attack
// files in phases 1 and 2 (REQUEST-921 to 934, 941 to 944), the response
// files' in phase 4. A screened jump passes over such a run when the
// screen has removed every rule of the phase in it:
//
//	SecRule REQUEST_METHOD "@preselectjump" "id:N,phase:P,pass,nolog,noauditlog,skipAfter:LAST"
//
// Its operator (a trigger, so the phase's screen has run when it answers)
// matches when, in this transaction, the screen dropped every rule of
// phase P between the jump and LAST; every other rule of P there is one the
// prelude removes from every transaction, or another jump (what it would
// jump over is within this one's reach, or only markers). Coraza then
// passes over the run as over any rules a skipAfter jumps over, and the
// rules it skips are ones it would not have evaluated. When the screen
// keeps one of them, the jump does not match, and the screen removes it
// from the transaction when it knows that before Coraza reaches it.
//
// The planner puts a candidate on the first free line after each marker
// (a file's start, in the CRS), reaching to the last marker before the
// first rule of the phase the screen may not judge or seldom removes
// (barrier: a SecAction, an operator that is not this project's, a target
// other than the stable collections, a rule with skipAfter or ctl). After the compile, a candidate
// whose reach holds anything else is refused (removed from every
// transaction by Start), as is one inside a skip of its phase. When the
// jump matches, MATCHED_VAR is the request method, where the markers
// would have left it empty: this holds only in a rule set with a prelude,
// which guarantees that no rule reads MATCHED_VAR before it matches; the
// jump is among the matched rules with nolog and noauditlog, as a marker
// jump.

// jumpOperator is the operator of the screened jumps.
const jumpOperator = "preselectjump"

// newJumpOperator builds the operator of a screened jump; outside a
// compile with a builder it never matches.
func newJumpOperator(plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	return jumpOp{}, nil
}

type jumpOp struct{}

func (jumpOp) Evaluate(plugintypes.TransactionState, string) bool { return false }

// screenable reports whether the screen may judge a rule written so, and
// will often remove it (index.go decides for good): a SecRule with an
// operator of this project's, on stable collections only, without
// skipAfter or ctl.
func screenable(p parsedRule) bool {
	if !p.secRule || !fastpath.Owns(p.opName) || hasAction(p.actions, "skipafter") || hasAction(p.actions, "ctl") {
		// A rule with a ctl is housekeeping that matches most requests
		// (the CRS's 941010).
		return false
	}
	for _, t := range p.targets {
		if _, ok := stableTargets[t.name]; !ok && !t.exclusion {
			return false
		}
	}
	return true
}

// placeScreened plans the screened jumps of phase: on the first free line
// after each marker that no jump of the phase covers (taken), reaching to
// the last marker before the first barrier, over minJumpMarkers markers or
// more and some rule of the phase.
func (s *RuleSet) placeScreened(p *JumpPlan, used map[int]bool, gone, taken []bool, phase types.RulePhase) {
	afterMarker := true
	for k := 0; k < len(s.items) && len(p.ids) < maxJumps; k++ {
		it := s.items[k]
		if it.kind == jMarker {
			afterMarker = true
		}
		if it.kind != jFree || !afterMarker || used[k] || gone[k] || taken[k] || s.reads[it.file] > 1 {
			continue
		}
		afterMarker = false
		last, markers, atLast, rules := -1, 0, 0, 0
		names := map[string]int{} // markers by name, up to last
		for j := k + 1; j < len(s.items); j++ {
			x := s.items[j]
			if x.kind == jRule && x.phase == phase && !gone[j] {
				if x.mark != "" || s.barrier(j) {
					break
				}
				rules++
			}
			if x.kind == jMarker {
				markers++
				names[x.mark]++
				if plainMark(x.mark) && names[x.mark] == 1 {
					last, atLast = j, markers
				}
			}
		}
		if last < 0 || atLast < minJumpMarkers || rules == 0 {
			continue
		}
		used[k] = true
		id := p.add(it, fmt.Sprintf(`SecRule REQUEST_METHOD "@%s" "id:%d,phase:%d,pass,nolog,noauditlog,skipAfter:%s"`,
			jumpOperator, jumpBase+len(p.ids), phase, s.items[last].mark))
		p.screened = append(p.screened, id)
	}
}

// ScreenedIDs returns the IDs of the planned screened jumps.
func (p *JumpPlan) ScreenedIDs() []int {
	if p == nil {
		return nil
	}
	return p.screened
}

// screenedJump is a screened jump of the compiled rule set.
type screenedJump struct {
	id    int
	phase types.RulePhase
	pos   int
	// drops are the phase plan's rules (indexes) it passes over, all of
	// which the screen must drop (but those the prelude removes, left out
	// by checkScreened); others the other rules of its phase it passes
	// over, all of which the prelude must remove.
	drops  []int
	others []int
	on     bool
}

// findScreened ties the screened jumps (ids) among the observed rules to
// their triggers and to the rules they pass over, and marks the stretch
// each ends as one the screen goes on past (the jump is taken only when
// every rule of it is dropped). A jump refused here (it does not land on
// a marker of its name, lies in a skip, the rule set's defaults or ctl
// may change it) is in ix.refused.
func (ix *Index) findScreened(rules []observed, triggers []*trigger, ids []int, facts directiveFacts) {
	if len(ids) == 0 {
		return
	}
	jr := jumpRules(rules)
	all := facts.defaultsOther || facts.defaultsSkip || facts.runtime.any || inRanges(0, facts.runtime.ids)
	byPos := map[int]*srule{} // the plans' rules by position
	for _, pp := range ix.plans {
		if pp != nil {
			for _, sr := range pp.rules {
				byPos[sr.pos] = sr
			}
		}
	}
	for i, r := range rules {
		if r.secMark != "" || !slices.Contains(ids, r.id) {
			continue
		}
		j := &screenedJump{id: r.id, phase: r.phase, pos: i}
		pp := ix.plans[r.phase]
		ok := !all && pp != nil && outsideSkips(jr, i)
		if ok {
			ok = false
			mark := jr[i].jump
			for k := i + 1; k < len(rules); k++ {
				o := rules[k]
				if o.secMark == mark {
					ok = true
					break
				}
				switch {
				case o.secMark != "" || o.phase != r.phase || IsJump(o.id):
				case byPos[k] != nil:
					j.drops = append(j.drops, byPos[k].idx)
				default:
					j.others = append(j.others, o.id)
				}
			}
		}
		var t *trigger
		for _, tr := range triggers {
			if tr.pos == i {
				t = tr
				break
			}
		}
		if !ok || t == nil || len(j.drops) == 0 {
			ix.refused = append(ix.refused, r.id)
			continue
		}
		t.jump = j
		pp.segs[r.seg].screenedJump = true
		pp.screened = append(pp.screened, j)
		ix.screened = append(ix.screened, j)
	}
}

// checkScreened turns on the screened jumps all of whose other rules the
// prelude removes; the others, and those findScreened refused, go to
// jumpsOff.
func (ix *Index) checkScreened(removed map[int]bool) {
	for _, id := range ix.refused {
		if !slices.Contains(ix.jumpsOff, id) {
			ix.jumpsOff = append(ix.jumpsOff, id)
		}
	}
	for _, j := range ix.screened {
		j.on = ix.prelude != nil
		for _, id := range j.others {
			if !removed[id] {
				j.on = false
			}
		}
		// The rules the prelude removes (the paranoia-level gates that
		// always jump, and what they jump over) are never evaluated,
		// whatever the screen finds.
		pp := ix.plans[j.phase]
		j.drops = slices.DeleteFunc(j.drops, func(idx int) bool { return removed[pp.rules[idx].id] })
		if !j.on && !slices.Contains(ix.jumpsOff, j.id) {
			ix.jumpsOff = append(ix.jumpsOff, j.id)
		}
	}
}

// takes reports whether the screened jump j is taken in tx: the screen of
// its phase dropped every rule it passes over.
func (ix *Index) takes(tx plugintypes.TransactionState, j *screenedJump) bool {
	return j.on && ix.inState(tx, j.phase, func(st *txState) bool {
		for _, idx := range j.drops {
			if st.rules[idx] != dropped {
				return false
			}
		}
		return true
	})
}

// dropJumps removes from the transaction the screened jumps of the plan,
// ahead of pos, that the screen has just found will not be taken: one of
// the rules they pass over is decided and kept.
func (st *txState) dropJumps(pp *phasePlan, calls txCalls, pos int) {
	for _, j := range pp.screened {
		if !j.on || j.pos <= pos {
			continue
		}
		for _, idx := range j.drops {
			if s := st.rules[idx]; s == matched || s == recorded {
				calls.RemoveRuleByID(j.id)
				break
			}
		}
	}
}

// removedIDs returns the rules the prelude removes, none without one.
func removedIDs(pre *prelude) map[int]bool {
	out := map[int]bool{}
	if pre != nil {
		for _, id := range pre.removed {
			out[id] = true
		}
	}
	return out
}
