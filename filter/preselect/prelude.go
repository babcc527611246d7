package preselect

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"

	"github.com/wafguard/wafguard/filter/fastpath"
)

// A rule set usually opens phase 1 with rules whose effect is the same in
// every transaction: the CRS's initialisation (crs-setup.conf's SecActions
// and REQUEST-901's "&TX:x @eq 0 -> setvar:tx.x=default" defaults, 25
// rules) writes the same TX values each time, and reads nothing but those
// values. The prelude is that opening: the longest run of phase-1 rules,
// from the first, each of which is either
//
//   - constant: a SecAction, or a SecRule that reads only TX keys with an
//     operator of this project's whose argument expands only TX keys; its
//     actions pass, with nolog (no log, no audit log), without severity
//     (which would change HIGHEST_SEVERITY) and with setvar of plain TX
//     keys, whose values expand only TX keys; no chain, ctl, capture,
//     skip or any other action; or
//   - judged: a rule the screen judges on TX values alone (screen.go),
//     whose keys no later constant rule of the run writes (so the values
//     the constant rules leave are the ones it reads): one that matches
//     none of them (inertRule), or a jump that always jumps (gateRule),
//     whose rules up to its marker then never run; or
//   - aside: a rule that reads and writes no TX and cannot stop, skip or
//     remove rules (asideRule); it stays, and Coraza evaluates it; or
//   - a guard: a rule that would be aside but for a deny or drop, and
//     reads only flags Coraza sets before phase 1 (guardRule), such as
//     rules 200009 (URI_PARSE_ERROR) and 200004 (ARGUMENTS_LIMIT_REACHED)
//     of Coraza's recommended configuration; it stays too.
//
// A transaction then starts with the TX values the run leaves, and without
// its other rules. Since nothing in the run reads anything but TX, and
// nothing before it runs, its rules decide and write the same in every
// transaction: no rule reads TX in between (the asides read none) and
// every rule after the run reads the same values.
//
// What the run leaves is taken from Coraza itself, once per WAF: Snapshot
// runs a transaction in which only the constant rules are left, and reads
// its TX collection. The judged rules are then judged on those values; if
// one decides otherwise, the rule set has no prelude.
//
// Past the opening, a rule that reads only TX keys that no rule before it
// may write but the opening's constant ones decides the same in every
// transaction too (constantDecisions): one that never matches is removed,
// and so is a paranoia-level gate that always jumps, with the rules it
// jumps over.
//
// A guard that matches stops the transaction in blocking mode before the
// rules of the run would have run: the transaction must then not have the
// prelude, whose TX values the logging phase would read (the CRS's
// reporting rules decide on them). So with guards in a blocking rule set,
// Start leaves the TX values and the removals to the first of this
// project's operators that Coraza evaluates in phase 1 (startGuarded): by
// then the guards' flags are set, and it judges each guard with its own
// operator on them, and gives the transaction the prelude only when none
// matches. Coraza then evaluates the guards on the same values. In
// DetectionOnly a guard stops nothing, and Start gives the prelude at
// once, as without guards.
//
// What differs: these rules are not among the transaction's matched rules
// (they log nothing and have no severity), and MATCHED_VAR is the last
// matching rule's among the others; a rule set in which a rule reads
// MATCHED_VAR before it matches has no prelude.
type prelude struct {
	// keys and values are the TX entries the run leaves.
	keys   []string
	values [][]string
	// ranges and single remove the rules it stands for (removed, in ID
	// order) from a transaction: ranges of IDs that hold no other rule of
	// the WAF, single IDs one by one (see minRange).
	ranges  [][2]int
	single  []int
	removed []int
}

// preludePlan is what the builder finds (buildPrelude); Snapshot makes the
// prelude from it.
type preludePlan struct {
	constant map[int]bool // the opening's constant rules
	judged   []judged     // the opening's rules whose decision Snapshot checks
	opening  map[int]bool // every rule of the opening Coraza no longer evaluates
	decided  []decision   // past the opening
	ids      []int        // the ID of every rule of the WAF, ascending
	phase1   []int        // the IDs of the rules of phase 1
	// guards are the positions of the opening's guards, when a guard
	// may stop a transaction (the rule engine is On).
	guards []int
}

// preludeActions are the actions a constant rule may have.
var preludeActions = map[string]bool{
	"id": true, "phase": true, "pass": true, "nolog": true, "noauditlog": true, "t": true,
	"tag": true, "ver": true, "rev": true, "msg": true, "logdata": true, "maturity": true,
	"accuracy": true, "setvar": true,
}

// constantRule reports whether r is a constant rule (see prelude).
func constantRule(r observed, facts directiveFacts) bool {
	if r.id == 0 || inRanges(r.id, facts.updated) || inRanges(r.id, facts.targetsUpdated) {
		return false
	}
	p := r.parsed
	if !hasAction(p.actions, "nolog") || !hasAction(p.actions, "pass") {
		return false
	}
	for _, a := range p.actions {
		if !preludeActions[a.name] {
			return false
		}
		if a.name == "setvar" && !constantSetvar(a.value) {
			return false
		}
	}
	if !p.secRule {
		return p.secAction
	}
	if len(p.targets) == 0 || !fastpath.Owns(p.opName) {
		return false
	}
	for _, t := range p.targets {
		if t.name != "TX" || t.exclusion || !plainKey(t.key) {
			return false
		}
	}
	_, ok := macroTXKeys(p.opArgs)
	return ok
}

// constantSetvar reports whether a setvar value ("tx.key=value",
// "tx.key=+n") writes a plain TX key with a value that expands only TX
// keys. Deleting a key ("!tx.key") is not constant here.
func constantSetvar(v string) bool {
	v = strings.Trim(v, `'"`)
	key, value, _ := strings.Cut(v, "=")
	col, k, ok := strings.Cut(key, ".")
	if !ok || !strings.EqualFold(col, "tx") || !plainKey(k) {
		return false
	}
	_, ok = macroTXKeys(value)
	return ok
}

// buildPrelude finds the prelude of phase 1 (inPhase: its rules in order,
// pp: its plan) among the WAF's rules (kept). It returns nil when the rule
// set has none, or when a directive makes it unsafe.
func buildPrelude(kept []observedAt, byPhase map[types.RulePhase][]observedAt, plans [types.PhaseLogging + 1]*phasePlan,
	windowed map[int]bool, facts directiveFacts) *preludePlan {
	inPhase, pp := byPhase[types.PhaseRequestHeaders], plans[types.PhaseRequestHeaders]
	if pp == nil || facts.updateAll || facts.targetsUpdateAll || facts.defaultsWrite ||
		facts.defaultsSkip || facts.defaultsOther {
		return nil
	}
	for _, r := range kept {
		if readsMatchedVar(r.parsed) {
			return nil
		}
	}
	byPos := map[int]*srule{}
	for _, r := range pp.rules {
		byPos[r.pos] = r
	}
	p := &preludePlan{constant: map[int]bool{}, opening: map[int]bool{}}
	var judgedAt []int // index in inPhase of each rule of p.judged
run:
	for i := 0; i < len(inPhase); i++ {
		r := inPhase[i]
		switch {
		case constantRule(r.observed, facts):
			p.constant[r.id] = true
		case asideRule(r.observed, facts), slices.Contains(facts.screenedJumps, r.id):
			// A screened jump passes over nothing but rules the screen
			// drops and rules the prelude removes (checkScreened).
			continue
		case guardRule(r.observed, facts):
			if !facts.engineNotOn {
				p.guards = append(p.guards, r.pos)
			}
			continue
		case gateRule(r.observed, byPos[r.pos]):
			// It must jump (Snapshot checks), over the rules up to its
			// marker, which then never run.
			ok, over := jumpsOver(kept, inPhase, i, facts)
			if !ok {
				break run
			}
			p.judged = append(p.judged, judged{byPos[r.pos], true})
			judgedAt = append(judgedAt, i)
			for _, id := range over {
				p.opening[id] = true
			}
			i += len(over)
		case inertRule(byPos[r.pos]):
			p.judged = append(p.judged, judged{byPos[r.pos], false})
			judgedAt = append(judgedAt, i)
		default:
			break run
		}
		p.opening[r.id] = true
	}
	// A judged rule must read the values the run leaves: no constant
	// rule after it writes its keys.
	for n, i := range judgedAt {
		for _, later := range inPhase[i+1:] {
			if !p.constant[later.id] {
				continue
			}
			for _, k := range p.judged[n].r.txKeys {
				if later.writes.touches(k) {
					return nil
				}
			}
		}
	}
	if len(p.constant) == 0 {
		return nil
	}
	for _, r := range kept {
		if r.id != 0 {
			p.ids = append(p.ids, r.id)
		}
	}
	for _, r := range inPhase {
		p.phase1 = append(p.phase1, r.id)
	}
	slices.Sort(p.ids)
	p.ids = slices.Compact(p.ids)
	p.decided = constantDecisions(kept, byPhase, plans, windowed, facts, p.opening, p.constant)
	return p
}

// decision is a rule after the opening that the screen judges on TX
// values alone, none of which a rule that runs before it may write but
// the opening's constant rules: it decides the same in every transaction.
// When it does not match, it has no effect at all; when it matches and is
// a gate (a jump, see gateRule) whose marker follows it with no other
// marker in between, that no skip passes over and no ctl may remove while
// leaving a rule it jumps over, the rules it jumps over (over) never run.
type decision struct {
	r    *srule
	gate bool
	over []int
}

// constantDecisions finds the decisions (see decision) of the rule set
// past the opening (opening: its rules, constant: its constant rules).
func constantDecisions(kept []observedAt, byPhase map[types.RulePhase][]observedAt, plans [types.PhaseLogging + 1]*phasePlan,
	windowed map[int]bool, facts directiveFacts, opening, constant map[int]bool) []decision {
	// firstWriter: for a TX key, the earliest rule (phase, position)
	// other than a constant one that may write it.
	firstWriter := map[string][2]int{}
	writer := func(k string) [2]int {
		if w, ok := firstWriter[k]; ok {
			return w
		}
		w := [2]int{int(types.PhaseLogging) + 1, 0}
		for _, r := range kept {
			if r.secMark != "" || constant[r.id] || !r.writes.touches(k) {
				continue
			}
			if at := [2]int{int(r.phase), r.pos}; at[0] < w[0] || at[0] == w[0] && at[1] < w[1] {
				w = at
			}
		}
		firstWriter[k] = w
		return w
	}
	var out []decision
	for _, ph := range screenedPhases {
		pp := plans[ph]
		if pp == nil {
			continue
		}
		byPos := map[int]*srule{}
		for _, r := range pp.rules {
			byPos[r.pos] = r
		}
		inPhase := byPhase[ph]
	rules:
		for i, r := range inPhase {
			sr := byPos[r.pos]
			if opening[r.id] || windowed[r.pos] || !inertRule(sr) {
				continue
			}
			for _, k := range sr.txKeys {
				if w := writer(k); w[0] < int(ph) || w[0] == int(ph) && w[1] < r.pos {
					continue rules
				}
			}
			d := decision{r: sr}
			if gateRule(r.observed, sr) {
				d.gate, d.over = jumpsOver(kept, inPhase, i, facts)
			}
			out = append(out, d)
		}
	}
	return out
}

// jumpsOver returns the rules the gate inPhase[i] jumps over, with ok
// false when a jump from before it may land among them (a marker in
// between), its marker does not follow, or a ctl may remove the gate while
// leaving one of them.
func jumpsOver(kept, inPhase []observedAt, i int, facts directiveFacts) (bool, []int) {
	g := inPhase[i]
	mark := strings.Trim(actionValue(g.parsed.actions, "skipafter"), `"'`)
	end := -1
	for _, m := range kept {
		if m.pos <= g.pos || m.secMark == "" {
			continue
		}
		if m.secMark != mark {
			return false, nil
		}
		end = m.pos
		break
	}
	if end < 0 {
		return false, nil
	}
	var over []int
	for _, q := range inPhase[i+1:] {
		if q.pos >= end {
			break
		}
		if facts.runtime.mayRemoveKeeping(g.observed, q.observed) {
			return false, nil
		}
		over = append(over, q.id)
	}
	return true, over
}

// readsMatchedVar reports whether a rule reads MATCHED_VAR or
// MATCHED_VAR_NAME before it matches itself: in its targets or its
// operator's argument. Coraza keeps them from the last rule that matched,
// which is another one once the prelude's rules no longer run. (A chained
// rule reads its starter's; MATCHED_VARS is emptied before each rule.)
func readsMatchedVar(p parsedRule) bool {
	for _, t := range p.targets {
		if t.name == "MATCHED_VAR" || t.name == "MATCHED_VAR_NAME" {
			return true
		}
	}
	return strings.Contains(strings.ToLower(p.opArgs), "%{matched_var")
}

// judged is a rule of the prelude whose decision Snapshot checks: an inert
// rule must not match, a gate must.
type judged struct {
	r     *srule
	match bool
}

func actionValue(acts []action, name string) string {
	for _, a := range acts {
		if a.name == name {
			return a.value
		}
	}
	return ""
}

// inertRule reports whether the screen judges r (nil: not screened) on
// TX values alone.
func inertRule(r *srule) bool {
	if r == nil || len(r.txKeys) == 0 || r.sets != nil {
		return false
	}
	for _, t := range r.targets {
		if t.v != variables.TX {
			return false
		}
	}
	return true
}

// gateRule reports whether r is a jump the prelude may stand for: a rule
// judged on TX values alone (sr) whose only effect is a skipAfter.
func gateRule(r observed, sr *srule) bool {
	if !inertRule(sr) || !hasAction(r.parsed.actions, "nolog") || !hasAction(r.parsed.actions, "pass") {
		return false
	}
	jumps := 0
	for _, a := range r.parsed.actions {
		switch {
		case a.name == "skipafter":
			jumps++
		case a.name == "setvar" || !preludeActions[a.name]:
			return false
		}
	}
	return jumps == 1
}

// asideActions are the actions of a rule the prelude may leave to Coraza
// among its own: it reads no TX, writes none, and cannot stop, skip or
// change the rules after it.
var asideActions = map[string]bool{
	"id": true, "phase": true, "pass": true, "nolog": true, "noauditlog": true, "log": true,
	"auditlog": true, "t": true, "tag": true, "ver": true, "rev": true, "msg": true,
	"logdata": true, "maturity": true, "accuracy": true, "severity": true, "ctl": true,
}

// asideCtl are the ctl options such a rule may set: they choose how the
// request body is read, not which rules run.
var asideCtl = map[string]bool{"requestbodyprocessor": true, "forcerequestbodyvariable": true}

// asideReads are the variables whose values the prelude changes at the
// places its rules were (MATCHED_VAR* and RULE are set by the rules that
// no longer run) or that it reads (TX).
var asideReads = []string{"tx", "matched_var", "rule"}

// asideRule reports whether r can stay among the prelude's rules (see
// asideActions): a SecRule without a chain that reads none of asideReads
// in its targets, its argument or its actions.
func asideRule(r observed, facts directiveFacts) bool {
	p := r.parsed
	if r.id == 0 || !p.secRule || inRanges(r.id, facts.updated) || !hasAction(p.actions, "pass") {
		return false
	}
	for _, a := range p.actions {
		if !asideActions[a.name] {
			return false
		}
		if a.name == "ctl" {
			opt, _, _ := strings.Cut(a.value, "=")
			if !asideCtl[strings.ToLower(strings.TrimSpace(opt))] {
				return false
			}
		}
	}
	for _, t := range p.targets {
		for _, name := range asideReads {
			if strings.HasPrefix(strings.ToLower(t.name), name) {
				return false
			}
		}
	}
	lower := strings.ToLower(r.raw)
	for i := strings.Index(lower, "%{"); i >= 0; i = strings.Index(lower, "%{") {
		lower = lower[i+2:]
		for _, name := range asideReads {
			if strings.HasPrefix(lower, name) {
				return false
			}
		}
	}
	return true
}

// guardActions are the actions a guard may have besides asideActions
// (without ctl): it stops the transaction.
var guardActions = map[string]bool{"deny": true, "drop": true, "status": true}

// guardVariables are the variables a guard may read: flags Coraza sets
// while it reads the request line and headers, before phase 1, and that
// no rule writes.
var guardVariables = map[string]bool{"URI_PARSE_ERROR": true, "ARGUMENTS_LIMIT_REACHED": true}

// guardRule reports whether r is a guard (see prelude): a SecRule without
// a chain or negation, with t:none or no transformation, that reads only
// guardVariables whole and stops the transaction with deny or drop when
// it matches, with no other effect than logging.
func guardRule(r observed, facts directiveFacts) bool {
	p := r.parsed
	if r.id == 0 || !p.secRule || p.negated || inRanges(r.id, facts.updated) || inRanges(r.id, facts.targetsUpdated) ||
		facts.defaultsTransform || len(p.targets) == 0 || !fastpath.Owns(p.opName) ||
		!hasAction(p.actions, "deny") && !hasAction(p.actions, "drop") {
		return false
	}
	for _, a := range p.actions {
		if a.name == "ctl" || !asideActions[a.name] && !guardActions[a.name] {
			return false
		}
		if a.name == "t" && !strings.EqualFold(strings.Trim(a.value, `"'`), "none") {
			return false
		}
	}
	for _, t := range p.targets {
		if t.count || t.exclusion || t.keyed || !guardVariables[t.name] {
			return false
		}
	}
	return !strings.Contains(r.raw, "%{")
}

// guard is a guard of the prelude with what judges it: its rule's own
// operator (not the trigger around it) and the variables it reads.
type guard struct {
	op   plugintypes.Operator
	vars []variables.RuleVariable
}

// guardsOf finds the operators of the prelude's guards among the
// builder's triggers. ok is false when one is missing.
func guardsOf(plan *preludePlan, rules []observed, triggers []*trigger) ([]guard, bool) {
	var out []guard
	for _, pos := range plan.guards {
		var g guard
		for _, t := range triggers {
			if t.pos == pos && t.starter {
				g.op = t.op
			}
		}
		if g.op == nil || pos >= len(rules) {
			return nil, false
		}
		for _, t := range rules[pos].parsed.targets {
			v, err := variables.Parse(t.name)
			if err != nil {
				return nil, false
			}
			g.vars = append(g.vars, v)
		}
		out = append(out, g)
	}
	return out, true
}

// guardMark, a removed rule ID range no rule is in, marks a transaction
// whose prelude startGuarded decided. The screens' tokens count down from
// -1; this is below any of them.
const guardMark = -1 << 40

// startGuarded decides, once per transaction, at the first of this
// project's operators Coraza evaluates in phase 1, whether the
// transaction gets the prelude: when no guard matches (see prelude).
func (ix *Index) startGuarded(tx plugintypes.TransactionState) {
	if tx.LastPhase() != types.PhaseRequestHeaders {
		return
	}
	calls, ok := tx.(txCalls)
	if !ok {
		return
	}
	for _, r := range calls.GetRuleRemoveByIDRanges() {
		if r[0] == guardMark {
			return
		}
	}
	calls.RemoveRuleByIDRange(guardMark, guardMark)
	for _, g := range ix.guards {
		for _, v := range g.vars {
			col := tx.Collection(v)
			if col == nil {
				continue
			}
			for _, md := range col.FindAll() {
				if g.op.Evaluate(tx, md.Value()) {
					return
				}
			}
		}
	}
	ix.applyPrelude(tx, calls)
}

// txRemover is what the prelude needs of Coraza's transaction besides its
// state: removing rules for this transaction only.
type txRemover interface {
	RemoveRuleByID(id int)
	RemoveRuleByIDRange(start, end int)
}

// Snapshot computes the prelude's TX values with a transaction of waf (the
// WAF this index was built for): only the constant rules are left in it.
// It then judges the inert rules on those values. When one of them would
// match, or the transaction is not Coraza's, the rule set runs without a
// prelude and the error says why. It reports the number of rules each
// transaction no longer evaluates.
func (ix *Index) Snapshot(waf coraza.WAF) (int, error) {
	n, err := ix.snapshot(waf)
	if ix.prelude == nil {
		ix.guards = nil
	}
	removed := removedIDs(ix.prelude)
	if ix.prelude != nil {
		if jc := ix.jumpCheck; jc != nil {
			ix.jumpsOff = checkJumps(jc.rules, jc.facts, ix.jumps, removed)
		}
		ix.activateRecords(removed)
		// A target removed from a rule that no transaction evaluates
		// changes nothing: Coraza reads a rule's removed targets only
		// when it evaluates it. 941010 removes REQUEST_FILENAME from
		// 41 rules, 8 of them of the higher paranoia levels.
		for _, t := range ix.ctlTriggers {
			for i := range t.ctls {
				t.ctls[i].ids = slices.DeleteFunc(slices.Clone(t.ctls[i].ids), func(id int) bool { return removed[id] })
			}
		}
		// Start removes them from every transaction: a range of a
		// screen may cover them.
		for _, pp := range ix.plans {
			if pp == nil {
				continue
			}
			for k, s := range pp.ids {
				if removed[s.id] {
					pp.ids[k].idx = slotDone
				}
			}
		}
	}
	ix.checkScreened(removed)
	ix.jumpCheck = nil
	ix.constTX = constantTX(ix.prelude, ix.txWriters, ix.knowsWriters, removed)
	ix.txWriters = nil
	ix.constantJudges(waf)
	ix.hideMarkers = ix.prelude != nil && ix.canHide && checkMarkerRanges(waf)
	// The unions, now that the prelude and the records are known, so that
	// no request builds one.
	for _, pp := range ix.plans {
		if pp != nil && !pp.united {
			pp.unite()
		}
	}
	return n, err
}

func (ix *Index) snapshot(waf coraza.WAF) (int, error) {
	p := ix.plan
	if p == nil {
		return 0, nil
	}
	ix.plan = nil
	tx := waf.NewTransaction()
	defer func() { _ = tx.Close() }()
	ts, ok1 := tx.(plugintypes.TransactionState)
	rm, ok2 := tx.(txRemover)
	if !ok1 || !ok2 || tx.IsRuleEngineOff() {
		return 0, errors.New("the transaction is not Coraza's, or the rule engine is off")
	}
	for _, id := range p.phase1 {
		if !p.constant[id] {
			rm.RemoveRuleByID(id)
		}
	}
	tx.ProcessURI("/", "GET", "HTTP/1.1")
	if it := tx.ProcessRequestHeaders(); it != nil {
		return 0, fmt.Errorf("the constant rules interrupted (rule %d)", it.RuleID)
	}
	for _, j := range p.judged {
		if match, ok := matchesTX(j.r, ts); !ok || match != j.match {
			return 0, fmt.Errorf("rule %d decides otherwise on the TX values the rules before it leave", j.r.id)
		}
	}
	removed := p.opening
	jumps := map[int]bool{} // the removed rules that always jump
	for _, j := range p.judged {
		if j.match {
			jumps[j.r.id] = true
		}
	}
	for _, d := range p.decided {
		switch match, ok := matchesTX(d.r, ts); {
		case !ok:
			// Left to Coraza.
		case !match:
			removed[d.r.id] = true
		case d.gate:
			removed[d.r.id] = true
			jumps[d.r.id] = true
			for _, id := range d.over {
				removed[id] = true
			}
		}
	}
	ix.preludeStates(removed, jumps)
	ix.alwaysJumps = jumps
	pre := &prelude{}
	pre.ranges, pre.single, pre.removed = removals(p.ids, removed)
	// FindAll reads a Go map: the keys are kept in one order.
	values := map[string][]string{}
	for _, md := range ts.Variables().TX().FindAll() {
		values[md.Key()] = append(values[md.Key()], md.Value())
	}
	pre.keys = slices.Sorted(maps.Keys(values))
	for _, k := range pre.keys {
		pre.values = append(pre.values, values[k])
	}
	ix.prelude = pre
	return len(pre.removed), nil
}

// preludeStates sets the state the screens start each transaction's
// rules in: a rule the prelude removes (removed) is decided before any
// screen, since no transaction evaluates it. A jump that always jumps
// (jumps) is matched, so that a screen passes over what it jumps over as
// before; every other removed rule is dropped (a jump among them never
// jumps: Coraza does not evaluate it), and never removed again. Without
// this, every screen judged the CRS's paranoia-level gates and the
// additions of the higher levels' scores again: 83 of the 242 rules the
// screens of a GET judged (TestPrelude_states).
func (ix *Index) preludeStates(removed, jumps map[int]bool) {
	for _, pp := range ix.plans {
		if pp == nil {
			continue
		}
		pp.initial = make([]uint8, len(pp.rules))
		for _, r := range pp.rules {
			switch {
			case !removed[r.id]:
			case jumps[r.id]:
				pp.initial[r.idx] = matched
			default:
				pp.initial[r.idx] = dropped
			}
		}
		// The union without the rules decided here (unite).
		pp.united = false
	}
}

// constantTX returns the TX values of the prelude that no rule it leaves
// to the transactions (writers but removed) may write: each transaction
// starts with them (Start) and keeps them. The screens read these from
// here, not from Coraza, whose Get makes a copy of the values each time.
func constantTX(p *prelude, writers []ruleWrites, known bool, removed map[int]bool) map[string][]string {
	if p == nil || !known {
		return nil
	}
	out := map[string][]string{}
keys:
	for i, k := range p.keys {
		for _, w := range writers {
			if !removed[w.id] && w.w.touches(k) {
				continue keys
			}
		}
		out[k] = p.values[i]
	}
	return out
}

// constantJudges makes, once, the judgement of each rule whose argument
// expands only constant TX values (Index.constTX): in the CRS the score
// checks, `@ge %{tx.inbound_anomaly_score_threshold}`. Each transaction
// starts with those values and keeps them, so the macro expands to the
// same argument in all of them; it is expanded on a transaction given
// the prelude, as the screens would expand it (fastpath.JudgeIn).
func (ix *Index) constantJudges(waf coraza.WAF) {
	if len(ix.constTX) == 0 {
		return
	}
	// A rule with a macro in its argument has no judge of its own yet
	// (phasePlan.add): argTX lists what the macro reads.
	var ts plugintypes.TransactionState
	for _, pp := range ix.plans {
		if pp == nil {
			continue
		}
		for _, r := range pp.rules {
			if len(r.argTX) == 0 || !allIn(r.argTX, ix.constTX) {
				continue
			}
			if ts == nil {
				tx := waf.NewTransaction()
				defer func() { _ = tx.Close() }()
				var ok bool
				if ts, ok = tx.(plugintypes.TransactionState); !ok {
					return
				}
				ix.Start(tx)
				if rm, ok := tx.(txRemover); ok && ix.guards != nil {
					ix.applyPrelude(ts, rm)
				}
			}
			if judge, ok := fastpath.JudgeIn(r.op, ts); ok {
				r.judge = judge
			}
		}
	}
}

// allIn reports whether every key is one of m's.
func allIn(keys []string, m map[string][]string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// matchesTX judges r, which reads only TX, on tx's values as Coraza would;
// ok is false when it cannot.
func matchesTX(r *srule, tx plugintypes.TransactionState) (match, ok bool) {
	judge, ok := r.judgeFor(tx)
	if !ok {
		return false, false
	}
	col := tx.Variables().TX()
	for _, t := range r.targets {
		var vals []string
		if t.key != "" {
			vals = col.Get(t.key)
		} else {
			for _, md := range col.FindAll() {
				vals = append(vals, md.Value())
			}
		}
		if r.matchesTarget(judge, t, vals) {
			return true, true
		}
	}
	return false, true
}

// Start gives a new transaction the prelude: the TX values its rules
// leave, and their removal; and it removes the marker jumps checkJumps
// refused. It does nothing for a transaction whose rule engine is off (it
// evaluates nothing).
func (ix *Index) Start(tx types.Transaction) {
	if tx.IsRuleEngineOff() {
		return
	}
	rm, ok := tx.(txRemover)
	if !ok {
		return
	}
	for _, id := range ix.jumpsOff {
		rm.RemoveRuleByID(id)
	}
	if ts, ok := tx.(plugintypes.TransactionState); ok && ix.guards == nil {
		ix.applyPrelude(ts, rm)
	}
	if ix.hideMarkers {
		// A transaction before this one may have ended with its
		// markers shown (Index.shown is a hint).
		ix.shown.Store(false)
		rm.RemoveRuleByIDRange(markersHidden[0], markersHidden[1])
		if ix.jumpRange != [2]int{} {
			rm.RemoveRuleByIDRange(ix.jumpRange[0], ix.jumpRange[1])
		}
	}
}

// applyPrelude gives the transaction the prelude's TX values and removes
// the rules it stands for.
func (ix *Index) applyPrelude(ts plugintypes.TransactionState, rm txRemover) {
	p := ix.prelude
	if p == nil {
		return
	}
	col := ts.Variables().TX()
	for i, k := range p.keys {
		col.Set(k, p.values[i])
	}
	for _, r := range p.ranges {
		rm.RemoveRuleByIDRange(r[0], r[1])
	}
	for _, id := range p.single {
		rm.RemoveRuleByID(id)
	}
}

// removals splits the removed rules among ids (every rule ID of the WAF,
// ascending) into runs of consecutive IDs: a run of minRange rules or
// more is one range, a shorter one single IDs. all is every removed ID,
// ascending.
func removals(ids []int, removed map[int]bool) (ranges [][2]int, single, all []int) {
	var run []int
	flush := func() {
		if len(run) >= minRange {
			ranges = append(ranges, [2]int{run[0], run[len(run)-1]})
		} else {
			single = append(single, run...)
		}
		run = run[:0]
	}
	for _, id := range ids {
		if removed[id] {
			run = append(run, id)
			all = append(all, id)
		} else if len(run) != 0 {
			flush()
		}
	}
	flush()
	return ranges, single, all
}

// minRange is the fewest rules a range stands for: Coraza compares the ID
// of every rule of a phase with each range, where an ID removed alone is
// one insertion in a map it looks up anyway.
const minRange = 8

// PreludeIDs returns the IDs of the rules the prelude stands for, in
// ascending order (none before Snapshot).
func (ix *Index) PreludeIDs() []int {
	if ix.prelude == nil {
		return nil
	}
	return slices.Clone(ix.prelude.removed)
}
