package preselect

import (
	"math"
	"strings"

	"github.com/corazawaf/coraza/v3"
)

// Hidden markers.
//
// Coraza evaluates every SecMarker in each of the five phases (it gives
// markers phase 0), and a marker costs what a matching rule costs (about
// four allocations in v3.8.1). A marker does only two things: it ends a
// pending skipAfter that names it, and it counts as one of the rules a
// pending skip:N passes over. While neither is pending, evaluating it
// leaves nothing a later rule can see, in a rule set with a prelude: it
// writes RULE's id, rev and severity (the next rule writes them again
// before it reads anything), an empty MATCHED_VAR and MATCHED_VAR_NAME
// (which no rule reads before it matches and sets them itself: the
// prelude's condition) and an empty MATCHED_VARS entry (Coraza empties
// MATCHED_VARS before each rule).
//
// So every transaction starts with the markers removed: every marker has
// rule ID 0, which no other rule of the rule set has (chained rules are
// not in the rule list), and Start adds the range [0, 0] to the
// transaction's removed ranges. The marker jumps (jumps.go), which exist
// only to pass over markers, are removed with them: a jump's marker must
// not be removed while its skipAfter is pending.
//
// A pending skip is set only by a rule that matches and has skip or
// skipAfter (a flow rule), and only after its operator matched: Coraza
// runs a rule's flow actions after its operator, and after the rules of
// its chain. Every flow rule has an operator of this project's (a
// trigger; otherwise the rule set keeps its markers), and when it
// answers "match" (for a negated operator, "no match") the trigger puts
// the markers back: it turns the range into one that holds no ID, in
// place, so the markers are there when Coraza takes the jump. The next
// trigger of a rule that is not chained and has no skip hides them again:
// Coraza is evaluating that rule, so no skip is pending (Coraza evaluates
// no rule while one is), and the rule cannot start one. A skip pending at
// the end of a phase goes on in the next one, with the markers in place,
// since no trigger runs while it is pending.
//
// The range is turned around through GetRuleRemoveByIDRanges, whose slice
// is the transaction's own: Snapshot checks that on a transaction of the
// WAF, and a Coraza that returned a copy would leave the rule set with its
// markers.

// Ranges of the markers' ID: markersHidden removes them from the
// transaction, markersShown (empty) holds no ID, and neither is a token of
// the screen (whose ranges are [t, t], t < 0).
var (
	markersHidden = [2]int{0, 0}
	markersShown  = [2]int{math.MaxInt, math.MinInt}
)

// markerRules reports whether the rule set's markers can be hidden
// (see above), as far as its rules tell; Snapshot decides for good. It
// marks the triggers of the rules: flow or plain. A rule counts as a flow
// rule when its text mentions "skip" anywhere, or when a
// SecRuleUpdate*ById may have changed its actions.
func (b *Builder) markerRules(facts directiveFacts) bool {
	if len(b.jumps) != 0 && len(b.jumps) != b.jumps[len(b.jumps)-1]-b.jumps[0]+1 {
		return false
	}
	starters := make(map[int]*trigger, len(b.triggers))
	for _, t := range b.triggers {
		if t.starter {
			starters[t.pos] = t
		}
	}
	var flow, plain []*trigger
	for i, r := range b.rules {
		switch {
		case r.secMark != "" || isPlannedJump(r.id, b.jumps):
			continue
		case r.id == 0:
			return false
		}
		t := starters[i]
		if !strings.Contains(strings.ToLower(r.raw), "skip") && !inRanges(r.id, facts.updated) {
			if t != nil {
				plain = append(plain, t)
			}
			continue
		}
		if t == nil || !r.parsed.secRule {
			return false
		}
		flow = append(flow, t)
	}
	for _, t := range flow {
		t.flow = true
	}
	for _, t := range plain {
		t.plain = true
	}
	return true
}

func isPlannedJump(id int, jumps []int) bool {
	return len(jumps) != 0 && id >= jumps[0] && id <= jumps[len(jumps)-1]
}

// checkMarkerRanges reports whether a transaction of waf hands out its
// own removed ranges (see above).
func checkMarkerRanges(waf coraza.WAF) bool {
	tx := waf.NewTransaction()
	defer func() { _ = tx.Close() }()
	calls, ok := tx.(txCalls)
	if !ok {
		return false
	}
	calls.RemoveRuleByIDRange(markersHidden[0], markersHidden[1])
	r := calls.GetRuleRemoveByIDRanges()
	if len(r) == 0 || r[len(r)-1] != markersHidden {
		return false
	}
	r[len(r)-1] = markersShown
	r = calls.GetRuleRemoveByIDRanges()
	return len(r) != 0 && r[len(r)-1] == markersShown
}

// setMarkers turns the transaction's marker range from one state to the
// other, and reports whether it did: not when the range is not in from.
func setMarkers(calls txCalls, from, to [2]int) bool {
	r := calls.GetRuleRemoveByIDRanges()
	for i := range r {
		if r[i] == from {
			r[i] = to
			return true
		}
	}
	return false
}

// showMarkers and rehideMarkers turn the marker range of a transaction
// (markers.go). Index.shown tells rehideMarkers whether a transaction may
// have its markers shown: most triggers of a transaction then need not
// look for the range. It is a hint: where transactions of a WAF run at
// once (natively), one may find it cleared by another and keep its
// markers shown for longer, which only costs time.
func (ix *Index) showMarkers(calls txCalls) {
	if setMarkers(calls, markersHidden, markersShown) {
		ix.shown.Store(true)
	}
}

func (ix *Index) rehideMarkers(calls txCalls) {
	if ix.shown.Load() && setMarkers(calls, markersShown, markersHidden) {
		ix.shown.Store(false)
	}
}
