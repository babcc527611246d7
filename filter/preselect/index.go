package preselect

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// screenedPhases are the phases screened: the request and response
// phases. The logging phase is not: its rules run after the verdict.
var screenedPhases = [...]types.RulePhase{types.PhaseRequestHeaders, types.PhaseRequestBody,
	types.PhaseResponseHeaders, types.PhaseResponseBody}

// stableTargets are the collections a screen may read: filled before the
// phase's first rule runs (request line, headers and cookies before phase
// 1, the parsed body before phase 2, the response status line and headers
// before phase 3, its body before phase 4) and never written by a rule's
// actions, so what the screen reads is what each rule will read. Every
// other variable (TX, MATCHED_VAR(S), RULE, ENV, counts, times, body
// processor errors set by ctl) makes a rule one the screen keeps.
var stableTargets = map[string]variables.RuleVariable{}

func init() {
	for _, v := range []variables.RuleVariable{
		variables.Args, variables.ArgsGet, variables.ArgsPost, variables.ArgsPath,
		variables.ArgsNames, variables.ArgsGetNames, variables.ArgsPostNames,
		variables.RequestHeaders, variables.RequestHeadersNames,
		variables.RequestCookies, variables.RequestCookiesNames,
		variables.RequestURI, variables.RequestURIRaw, variables.RequestFilename,
		variables.RequestBasename, variables.RequestLine, variables.RequestMethod,
		variables.RequestProtocol, variables.QueryString, variables.RequestBody,
		variables.Files, variables.FilesNames, variables.MultipartName,
		variables.MultipartFilename, variables.MultipartPartHeaders, variables.XML,
		variables.ResponseHeaders, variables.ResponseHeadersNames, variables.ResponseBody,
		variables.ResponseStatus, variables.ResponseProtocol, variables.StatusLine,
	} {
		stableTargets[v.Name()] = v
	}
}

// Index is, for one WAF, the rules a screen may remove from a transaction,
// grouped by phase.
type Index struct {
	plans [types.PhaseLogging + 1]*phasePlan
	// alwaysJumps are the gates the prelude found to jump in every
	// transaction (Snapshot; AlwaysJumps).
	alwaysJumps map[int]bool
	// txWriters are the rules that may write TX, when knowsWriters (no
	// SecRuleUpdateActionById may have added a setvar); constTX are the
	// TX values every transaction keeps from the prelude on: no rule left
	// to it writes them (Snapshot).
	txWriters    []ruleWrites
	knowsWriters bool
	constTX      map[string][]string
	// canHide: the rules allow hiding the markers; hideMarkers: Start
	// hides them, and removes the marker and screened jumps, the IDs of
	// jumpRange (zero when there are none) (markers.go).
	canHide, hideMarkers bool
	jumpRange            [2]int
	shown                atomic.Bool // a transaction may have them shown
	// ctlTriggers are the operators that make a rule's target removals
	// themselves (noop.go); Snapshot drops the prelude's rules from them.
	ctlTriggers []*trigger
	// state is what the screens of the transaction in progress share.
	stateMu sync.Mutex
	state   txState
	// Skipped counts, per reason, the rules of the screened phases that
	// are always evaluated (see Reasons).
	Skipped map[string]int
	// why holds the reason of each rule counted in Skipped.
	why map[int]string
	// prelude is what every transaction starts past (prelude.go), nil
	// when there is none; plan is what Snapshot makes it from.
	prelude *prelude
	plan    *preludePlan
	// guards are the prelude's guards in a blocking rule set: the
	// transactions get the prelude from startGuarded, not Start.
	guards []guard
	// jumps are the marker jumps the compiled rule set holds (jumps.go),
	// jumpsOff those of them that checkJumps refused, which Start removes
	// from every transaction.
	jumps, jumpsOff []int
	jumpCheck       *jumpCheck // until Snapshot
	// adders are the rules whose additions of 0, or whose ctl removing
	// targets by tag, do not match (noop.go).
	adders []int
	// records are the record rules (records.go).
	records []*record
	// screened are the screened jumps (screenedjumps.go), refused the
	// IDs of those findScreened refused (jumpsOff once Snapshot ran).
	screened []*screenedJump
	refused  []int
}

// jumpCheck is what Snapshot needs to check the jumps again on the
// prelude's removals.
type jumpCheck struct {
	rules []jrule
	facts directiveFacts
}

// Jumps returns the IDs of the marker jumps the rule set holds (the
// screened ones last), and of those among them that every transaction
// removes because they would change a decision, or, screened, could not
// be taken.
func (ix *Index) Jumps() (all, off []int) {
	all = slices.Clone(ix.jumps)
	for _, j := range ix.screened {
		all = append(all, j.id)
	}
	return all, ix.jumpsOff
}

// Quiet returns the IDs of the rules that, with the preselection, may be
// missing from a transaction's matched rules, or be there in addition,
// though they log nothing: the prelude's, the marker jumps and the rules
// whose additions of 0, or whose removals of targets, do not match, and
// the setters (setters.go).
func (ix *Index) Quiet() map[int]bool {
	q := map[int]bool{}
	all, _ := ix.Jumps()
	for _, ids := range [][]int{ix.PreludeIDs(), all} {
		for _, id := range ids {
			q[id] = true
		}
	}
	if ix.prelude != nil {
		for _, id := range ix.adders {
			q[id] = true
		}
		for _, pp := range ix.plans {
			if pp == nil {
				continue
			}
			for _, r := range pp.rules {
				if r.sets != nil {
					q[r.id] = true
				}
			}
		}
	}
	return q
}

// NeedsStart reports whether a transaction must start through Start:
// the rule set has a prelude, or jumps to remove.
func (ix *Index) NeedsStart() bool { return ix.prelude != nil || len(ix.jumpsOff) != 0 }

// Droppable returns the IDs of the rules the screen may remove in phase,
// in rule-set order.
func (ix *Index) Droppable(phase types.RulePhase) []int {
	var ids []int
	if pp := ix.plans[phase]; pp != nil {
		for _, r := range pp.rules {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// Reason returns why the rule with this ID is always evaluated, and false
// when the screen may remove it (or there is no such rule).
func (ix *Index) Reason(id int) (string, bool) {
	r, ok := ix.why[id]
	return r, ok
}

// Reasons a rule of a screened phase is always evaluated.
const (
	reasonNoID        = "no id (SecMarker)"
	reasonNotSecRule  = "SecAction or unreadable text"
	reasonOperator    = "operator not screened"
	reasonMacro       = "a macro in the operator argument that reads more than TX"
	reasonTarget      = "a target the screen does not read"
	reasonSlots       = "more collections in the phase than the screen has slots for"
	reasonCount       = "a count whose values a target exclusion may change"
	reasonTransform   = "a transformation that is not this project's"
	reasonDefaults    = "inherits SecDefaultAction transformations"
	reasonDefaultsTX  = "reads TX, which a SecDefaultAction may write"
	reasonSkipWindow  = "a skip of an earlier rule can land on it"
	reasonUpdated     = "changed by SecRuleUpdate*"
	reasonNoInstance  = "operator instance not found"
	reasonConfigWhole = "SecRuleUpdateTargetByTag/ByMsg adds targets"
)

// newIndex decides, for each observed rule of a screened phase, whether
// the screen may remove it, and builds the phase plans.
// removedAtConfig reports whether a SecRuleRemoveById or ByTag took r
// out of the WAF after the observer saw it.
func removedAtConfig(r observed, facts directiveFacts) bool {
	if r.id == 0 {
		return false
	}
	if inRanges(r.id, facts.removedIDs) {
		return true
	}
	for _, t := range facts.removedTags {
		if slices.Contains(r.tags, t) {
			return true
		}
	}
	return false
}

func newIndex(rules []observed, facts directiveFacts, rulesInWAF, segments int) *Index {
	ix := &Index{Skipped: map[string]int{}, why: map[int]string{}}
	var kept []observedAt
	for i, r := range rules {
		if !removedAtConfig(r, facts) {
			kept = append(kept, observedAt{r, i})
		}
	}
	// When the count disagrees, some removal was not understood: a skip
	// may then land anywhere after its rule.
	skipToEnd := len(kept) != rulesInWAF
	byPhase := map[types.RulePhase][]observedAt{}
	windowed := map[int]bool{} // by position: in some skip window
	for _, p := range screenedPhases {
		pp := &phasePlan{root: &node{}, segs: make([]segment, segments+1)}
		pp.nodes = append(pp.nodes, pp.root)
		var inPhase []observedAt
		for _, r := range kept {
			if r.phase == p {
				inPhase = append(inPhase, r)
			}
		}
		// Positions a skip:N of an earlier rule of this phase can land
		// on, with the rules whose skips can (their indexes in
		// pp.skippers, -1 for one whose decision the screen cannot
		// read: skips.go).
		window := make([][]int, len(inPhase))
		for i, r := range inPhase {
			for _, a := range r.parsed.actions {
				if a.name != "skip" {
					continue
				}
				n, err := strconv.Atoi(a.value)
				if err != nil || skipToEnd {
					n = len(inPhase)
				}
				k := -1
				if sk := skipperOf(r.observed, facts, facts.bodyCtl[p]); sk != nil {
					k = len(pp.skippers)
					pp.skippers = append(pp.skippers, sk)
				}
				// The skip passes over the next n rules still in the
				// transaction; rules a ctl may have removed (while
				// leaving this one) do not count, so the window
				// reaches past them.
				for j, counted := i+1, 0; j < len(inPhase) && counted < n; j++ {
					window[j] = append(window[j], k)
					if !facts.runtime.mayRemoveKeeping(inPhase[j].observed, r.observed) {
						counted++
					}
				}
			}
		}
		byPos := map[int]*srule{}
		for i, r := range inPhase {
			sr, reason := pp.add(r.observed, r.pos, window[i], facts)
			if reason != "" {
				ix.why[r.id] = reason
				ix.Skipped[reason]++
				continue
			}
			byPos[r.pos] = sr
			if sr.txKeys != nil {
				sr.txFinal = finalityOf(inPhase, i, sr.txKeys, byPos)
			}
			if sr.adds != nil {
				sr.addsFinal = finalityOf(inPhase, i, addedKeys(sr.adds), byPos)
			}
		}
		// How each stretch ends in this phase.
		for i, r := range kept {
			if r.secMark != "" || r.phase != p {
				continue
			}
			for _, a := range r.parsed.actions {
				if a.name != "skipafter" {
					continue
				}
				sg := &pp.segs[r.seg]
				sg.jump, sg.jumpBy, sg.target = true, byPos[r.pos], -1
				sg.markerJump = slices.Contains(facts.markerJumps, r.id)
				mark := strings.Trim(a.value, `"'`)
				for _, m := range kept[i+1:] {
					if m.secMark == mark {
						sg.target = m.seg + 1
						break
					}
				}
			}
		}
		for _, sr := range pp.rules {
			pp.segs[sr.seg].rules = append(pp.segs[sr.seg].rules, sr)
			for a := sr.node; a != nil; a = a.parent {
				a.vars |= sr.vars
			}
		}
		// The union is built by the first screen (unite): Snapshot
		// leaves out the rules the prelude decides.
		for _, r := range pp.rules {
			r.slot = -1
		}
		for _, n := range pp.nodes {
			n.byVar = make([][]*srule, len(pp.vars))
			for _, r := range n.rules {
				for i := range pp.vars {
					if r.vars&(1<<i) != 0 {
						n.byVar[i] = append(n.byVar[i], r)
					}
				}
			}
		}
		for _, v := range pp.vars {
			pp.memoVar = append(pp.memoVar, memoized(v.v))
		}
		pp.order = slotOrder(pp.vars)
		pp.orderByID(rules, p, byPos)
		ix.plans[p] = pp
		byPhase[p] = inPhase
		for i, w := range window {
			if len(w) != 0 {
				windowed[inPhase[i].pos] = true
			}
		}
	}
	if !skipToEnd {
		ix.plan = buildPrelude(kept, byPhase, ix.plans, windowed, facts)
	}
	return ix
}

// observedAt is an observed rule with its place among the observed rules
// (trigger positions count the same way).
type observedAt struct {
	observed
	pos int
}

// finalityOf returns where the TX keys rule inPhase[i] reads are final:
// the rules of the phase before it that may write one of them, with the
// screen's rule for each (byPos), and one past the last of them (0 when
// none does).
func finalityOf(inPhase []observedAt, i int, keys []string, byPos map[int]*srule) finality {
	var f finality
	for _, r := range inPhase[:i] {
		for _, k := range keys {
			if r.writes.touches(k) {
				f.writers = append(f.writers, writer{pos: r.pos, r: byPos[r.pos]})
				f.frozenFrom = r.pos + 1
				break
			}
		}
	}
	return f
}
