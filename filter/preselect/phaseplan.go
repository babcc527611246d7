package preselect

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/filter/transform"
)

// phasePlan is one phase of the rule set as the screen sees it: its
// screened rules, its stretches and how Coraza goes from one to the next,
// and the trie of the transformation chains of the rules that read only
// collections that are stable during the phase.
type phasePlan struct {
	rules []*srule // in rule-set order; srule.idx indexes it
	// initial is the state every screen of a transaction starts its
	// rules in (by idx): the decisions of the prelude's rules, which no
	// transaction evaluates (preludeStates); nil without a prelude.
	initial []uint8
	segs    []segment
	root    *node
	nodes   []*node
	// vars are the collections the trie's rules read, whole or by a
	// plain key; bit i of srule.vars and node.vars stands for vars[i].
	vars       []varSlot
	keyedSlots int // of vars
	// union finds in one pass over a value which of the @rx rules of the
	// trie may match it (see fastpath.Union); hitWords is the size of its
	// hit set.
	union    *fastpath.Union
	hitWords int
	bySlot   []*srule // the rule of each slot of the union
	united   bool     // unite has built union for the plan as it is
	// triggers are the distinct trigger byte sets of the trie's
	// transformations (node.trig is the bit of one); sigBits[c] holds the
	// bits of those that hold byte c.
	triggers []*[256]bool
	sigBits  [256]uint64
	// memo remembers, across transactions, which trie rules match a
	// value (see memo.go), for the collections memoVar says.
	memo    memo
	memoVar []memoRule
	// order is the order a screen reads the slots in: the collections of
	// names first (exclusions.go).
	order []int
	// ids are the rule set's rules in the order of their IDs, for the
	// ranges a screen removes (removeDropped); slotOf is the place of
	// each of rules there.
	ids    []idSlot
	slotOf []int32
	// skippers are the phase's rules with skip:N whose decisions the
	// screen reads (skips.go).
	skippers []*skipper
	// screened are the phase's screened jumps (screenedjumps.go).
	screened []*screenedJump
	// keyRx holds the expressions of the keys kept rules skip (keyrx.go).
	keyRx keyRxCache
	// tids numbers the trie's transformations by name (node.tid);
	// chainNext[c][tid] is the made chain of chain c followed by
	// transformation tid, 0 while not numbered (made.go).
	tids      map[string]int32
	chainNext [][]int32
}

// idSlot is one rule of the rule set, for the ranges of IDs a screen of
// the phase removes: the rule's index in phasePlan.rules, or slotDone for
// a rule the rest of the transaction never evaluates after the phase has
// begun (a rule of an earlier phase; one the prelude removes from every
// transaction, see Snapshot), or slotKeep for a rule no range may cover
// (a rule of the phase the screen does not decide on, one of a later
// phase).
type idSlot struct {
	id  int
	idx int32
}

const (
	slotDone = -1
	slotKeep = -2
)

// orderByID fills ids and slotOf from the observed rules (the rules of
// the WAF, and those a configuration-time removal took out, which keep
// their slots: a range over a rule that is not there removes nothing).
func (pp *phasePlan) orderByID(rules []observed, p types.RulePhase, byPos map[int]*srule) {
	pp.ids = pp.ids[:0]
	for pos, r := range rules {
		if r.secMark != "" || r.id <= 0 {
			continue
		}
		slot := idSlot{id: r.id, idx: slotKeep}
		switch sr := byPos[pos]; {
		case sr != nil:
			slot.idx = int32(sr.idx)
		case r.phase < p:
			slot.idx = slotDone
		}
		pp.ids = append(pp.ids, slot)
	}
	slices.SortFunc(pp.ids, func(a, b idSlot) int { return cmp.Compare(a.id, b.id) })
	pp.slotOf = make([]int32, len(pp.rules))
	for k, s := range pp.ids {
		if s.idx >= 0 {
			pp.slotOf[s.idx] = int32(k)
		}
	}
}

// segment is one stretch of a phase: the rules between two places a
// skipAfter jumps from or to.
type segment struct {
	rules []*srule // the screened ones
	// jump: the stretch ends with a rule of this phase that has a
	// skipAfter; jumpBy is that rule when the screen judges it (nil when
	// it does not), target the stretch Coraza goes on with when it
	// jumps (-1: no marker of that name follows, the rest of the phase
	// is skipped).
	jump   bool
	jumpBy *srule
	target int
	// screenedJump: the rule with the skipAfter is a screened jump
	// (screenedjumps.go); markerJump: a marker jump (jumps.go), which
	// passes over no rule of its phase, taken or not.
	screenedJump, markerJump bool
}

// srule is one rule the screen may remove.
type srule struct {
	id  int
	idx int // in phasePlan.rules
	seg int // its stretch
	pos int // its place in the rule set (observed order)
	// op is the operator instance the rule uses; judge its decision
	// when it needs no transaction (nil when the argument has a macro:
	// fastpath.JudgeIn expands it per screen).
	op    plugintypes.Operator
	judge func(string) bool
	// argTX: the TX keys the macros of its argument read (none without
	// a macro); Snapshot makes judge once when they are all constant.
	argTX []string
	// slot is the rule's operator in the phase's union, -1 when the union
	// does not stand for it; confirm is then its decision without the
	// literal filter.
	slot    int32
	confirm func(string) bool
	negated bool
	multi   bool // judged at every step of its chain that changed the value
	// A trie rule reads stable collections only: vars are their bits,
	// node is where its chain ends in the trie.
	vars uint64
	node *node
	// A rule judged on its own reads targets, after chain. It reads TX
	// (or expands TX in its argument) when txKeys is not empty; txFinal
	// is where those values are the ones it will read.
	targets []starget
	chain   []plugintypes.Transformation
	txKeys  []string
	txFinal finality
	// rec: a record rule (records.go).
	rec *record
	// windows: the skippers (phasePlan.skippers) whose skip may land on
	// it; it is removed only when none of them matches (skips.go).
	windows []int
	// links: a chain starter's chained rules, read when the rule set has
	// a prelude (links.go).
	links []link
	// sets: a setter (setters.go), judged from its keys (targets), to
	// which it writes these values.
	sets []string
	// adds: an addition (noop.go), dropped when it adds 0; addsFinal is
	// where the TX values its additions read are final.
	adds      []addition
	addsFinal finality
	// excl: for a trie rule Coraza may be told to skip collections of
	// (exclusions.go), each collection it reads with the slots that stand
	// for it; nil for any other rule.
	excl []exclusion
}

// finality is where the TX values some rule reads are the ones it will
// read, for a screen at a position (txState.final): from frozenFrom on,
// one past the last writer; before that, where each writer ahead of the
// screen is dropped.
type finality struct {
	frozenFrom int
	// writers are the rules of the phase before the rule that may write
	// one of the values, in order (r nil where the screen does not judge
	// the rule).
	writers []writer
}

// ruleWrites is what the rule with this ID may write in TX.
type ruleWrites struct {
	id int
	w  *txWrites
}

// writer is a rule that may write a TX key another rule reads.
type writer struct {
	pos int
	r   *srule
}

// starget is one target of a rule judged on its own.
type starget struct {
	v variables.RuleVariable
	// key is the key looked up, as Coraza looks it up (lower case but
	// for the ARGS collections); "" reads the whole collection.
	key   string
	count bool
	// vi indexes phasePlan.vars for a whole stable collection, whose
	// values the screen reads once per phase.
	vi int
}

// node is one transformation chain prefix; the root is the value as read.
// A rule is judged at the node where its chain ends; a multiMatch rule at
// every node of its path, root included.
type node struct {
	name string
	fn   plugintypes.Transformation
	// into is fn writing into the screen's buffer (transform.Into), nil
	// for a transformation without one.
	into     transform.Into
	parent   *node
	children []*node
	rules    []*srule
	vars     uint64 // the collections the rules below read
	idx      int
	tid      int32 // the number of the transformation (phasePlan.tidOf)
	// trig is the bit of the node's trigger bytes (transform.Triggers)
	// in the plan's signatures, 0 when it has none.
	trig uint64
	// byVar[i] are the rules judged here that read collection i of the
	// plan.
	byVar [][]*srule
	// The same rules split by how a screen judges them (unite builds
	// these, slotRules): plain[i] are those the union does not stand for,
	// or that are negated, each judged in turn; united[i] are the others,
	// whose union slots unitedMask[i] holds, so that a screen runs the
	// confirmation of only those whose literals the union found, without
	// going through the rest (a JSON order of the bench tested some
	// 14,000 slots this way, of which 184 held a literal). unite runs
	// before any screen (screenFrom), so every node has these.
	plain, united [][]*srule
	unitedMask    [][]uint64
}

func (n *node) child(name string, fn plugintypes.Transformation, pp *phasePlan) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	into, _ := transform.LookupInto(name)
	c := &node{name: name, fn: fn, into: into, parent: n, idx: len(pp.nodes), tid: pp.tidOf(name)}
	if t, ok := transform.Triggers(name); ok {
		c.trig = pp.triggerBit(t)
	}
	pp.nodes = append(pp.nodes, c)
	n.children = append(n.children, c)
	return c
}

// triggerBit returns the bit of the trigger bytes t in the plan's
// signatures, adding it; 0 (no bit) past 63 sets.
func (pp *phasePlan) triggerBit(t *[256]bool) uint64 {
	for i, u := range pp.triggers {
		if *u == *t {
			return 1 << i
		}
	}
	if len(pp.triggers) == 63 {
		return 0
	}
	bit := uint64(1) << len(pp.triggers)
	pp.triggers = append(pp.triggers, t)
	for c, in := range t {
		if in {
			pp.sigBits[c] |= bit
		}
	}
	return bit
}

// signature is the set of trigger bytes value holds: the bits of the
// plan's trigger sets one of whose bytes it holds.
func (pp *phasePlan) signature(value string) uint64 {
	var sig uint64
	for i := 0; i < len(value); i++ {
		sig |= pp.sigBits[value[i]]
	}
	return sig
}

// bit returns the bit of collection v, adding it.
func (pp *phasePlan) bit(v variables.RuleVariable) (uint64, bool) {
	return pp.slotBit(varSlot{v: v})
}

// varSlot is a collection a trie rule reads: whole (key "") or the values
// of one plain key, as Coraza looks it up (lookupKey).
type varSlot struct {
	v   variables.RuleVariable
	key string
}

// maxSlots is the most collections a phase's trie reads, whole or by key:
// they are the bits of a uint64. Keys take at most the room the whole
// collections leave (maxSlots - len(stableTargets)), so that every whole
// collection always has its slot; a keyed target past them is read as its
// whole collection, a superset.
const maxSlots = 64

// slotBit returns the bit of slot s, adding it; ok is false when there is
// no room for it.
func (pp *phasePlan) slotBit(s varSlot) (uint64, bool) {
	for i, have := range pp.vars {
		if have == s {
			return 1 << i, true
		}
	}
	if len(pp.vars) == maxSlots || s.key != "" && pp.keyedSlots == maxSlots-len(stableTargets) {
		return 0, false
	}
	if s.key != "" {
		pp.keyedSlots++
	}
	pp.vars = append(pp.vars, s)
	return 1 << (len(pp.vars) - 1), true
}

// add indexes one rule, or returns why the screen must keep it.
func (pp *phasePlan) add(r observed, pos int, window []int, facts directiveFacts) (*srule, string) {
	inSkipWindow := slices.Contains(window, -1)
	if r.id == 0 {
		return nil, reasonNoID
	}
	if facts.updateAll {
		return nil, reasonConfigWhole
	}
	rt, ok := r.parsed.ruleText, r.parsed.secRule
	if keys, values, setter := setterOf(r); setter && !inSkipWindow && !facts.defaultsSkip && !facts.defaultsWrite &&
		!inRanges(r.id, facts.updated) {
		sr := setterSrule(r, pos, keys, values)
		sr.idx = len(pp.rules)
		pp.rules = append(pp.rules, sr)
		return sr, ""
	}
	switch {
	case !ok:
		return nil, reasonNotSecRule
	case inSkipWindow || facts.defaultsSkip:
		return nil, reasonSkipWindow
	case inRanges(r.id, facts.updated):
		return nil, reasonUpdated
	case !fastpath.Owns(rt.opName):
		return nil, reasonOperator
	}
	sr := &srule{id: r.id, seg: r.seg, pos: pos, negated: rt.negated, windows: window}
	if strings.Contains(rt.opArgs, "%{") {
		keys, ok := macroTXKeys(rt.opArgs)
		if !ok {
			return nil, reasonMacro
		}
		sr.txKeys = append(sr.txKeys, keys...)
		sr.argTX = keys
	}
	// Targets. Exclusions narrow what a rule reads: a screen that reads
	// the whole collection reads a superset, which is enough for a rule
	// that matches when one value does; a count is changed by them.
	excluded := map[string]bool{}
	for _, t := range rt.targets {
		if t.exclusion {
			excluded[t.name] = true
		}
	}
	// countSafe: no update of r's targets may change what a count of
	// collection col counts.
	countsUpdated := facts.targetsUpdateAll || inRanges(r.id, facts.targetsUpdated)
	countSafe := func(col string) bool { return !countsUpdated && !facts.runtimeTargets.mayChangeCount(r, col) }
	var vars uint64
	// exclBits: per collection the rule reads, the slots that stand for
	// it (exclusions.go).
	exclBits := map[variables.RuleVariable]uint64{}
	stable, keyed := 0, 0 // whole stable collections read, and those with a plain key
	// The plain keys a trie rule reads, beside whole collections.
	var keys []varSlot
	for _, t := range rt.targets {
		if t.exclusion {
			continue
		}
		if t.name == "TX" {
			if t.key == "" {
				// The whole collection, or a regexp key: any write
				// may change it.
				return nil, reasonTarget
			}
			if t.count && (excluded["TX"] || !countSafe("TX")) {
				return nil, reasonCount
			}
			key := strings.ToLower(t.key)
			sr.txKeys = append(sr.txKeys, key)
			sr.targets = append(sr.targets, starget{v: variables.TX, key: key, count: t.count, vi: -1})
			continue
		}
		v, ok := stableTargets[t.name]
		if !ok {
			return nil, reasonTarget
		}
		if !t.count {
			stable++
		}
		if t.count {
			if (t.keyed && t.key == "") || excluded[t.name] || !countSafe(t.name) {
				return nil, reasonCount
			}
			st := starget{v: v, key: lookupKey(v, t.key), count: true, vi: -1}
			if t.key == "" {
				bit, ok := pp.bit(v)
				if !ok {
					return nil, reasonSlots
				}
				st.vi = bits.TrailingZeros64(bit)
			}
			sr.targets = append(sr.targets, st)
			continue
		}
		if t.key != "" && v != variables.Args {
			// Read by key: a slot of its own once the rule is known
			// to be a trie rule (below).
			st := starget{v: v, key: lookupKey(v, t.key), vi: -1}
			keyed++
			sr.targets = append(sr.targets, st)
			keys = append(keys, varSlot{v: v, key: st.key})
			continue
		}
		bit, ok := pp.bit(v)
		if !ok {
			return nil, reasonSlots
		}
		st := starget{v: v, vi: bits.TrailingZeros64(bit)}
		if t.key != "" {
			st.key = lookupKey(v, t.key)
			keyed++
		}
		sr.targets = append(sr.targets, st)
		if v == variables.Args {
			// A trie rule reads ARGS as the three collections Coraza
			// joins into it (corazawaf.NewTransactionVariables), so that
			// the values of the query string and those of the body are
			// told apart (see memoized).
			bit = 0
			for _, a := range []variables.RuleVariable{variables.ArgsGet, variables.ArgsPost, variables.ArgsPath} {
				b, ok := pp.bit(a)
				if !ok {
					return nil, reasonSlots
				}
				bit |= b
			}
		}
		vars |= bit
		exclBits[v] |= bit
	}
	if sr.txKeys != nil && facts.defaultsWrite {
		return nil, reasonDefaultsTX
	}
	if sr.txKeys != nil {
		sr.adds = additionsOf(r, facts)
	}
	var names []string
	reset := false
	for _, a := range rt.actions {
		switch a.name {
		case "t":
			if a.value == "none" {
				sr.chain, names, reset = sr.chain[:0], names[:0], true
				continue
			}
			fn, ok := transform.Lookup(a.value)
			if !ok {
				return nil, reasonTransform
			}
			sr.chain, names = append(sr.chain, fn), append(names, strings.ToLower(a.value))
		case "multimatch":
			sr.multi = true
		}
	}
	if facts.defaultsTransform && !reset {
		return nil, reasonDefaults
	}
	op, ok := fastpath.Instance(rt.opName, rt.opArgs)
	if !ok {
		return nil, reasonNoInstance
	}
	sr.op = op
	// A rule that reads TX but whose argument has no macro is judged by
	// the same function in every transaction: it is made once, here.
	if judge, ok := fastpath.Judge(op); ok {
		sr.judge = judge
	} else if sr.txKeys == nil || !fastpath.JudgesIn(op) {
		return nil, reasonMacro
	}
	// Judged on its own, from its targets: those that read TX or count,
	// and those that read only some keys or are negated, for which the
	// whole collection (what the trie reads) would be a superset that
	// matches far more often than the rule.
	alone := sr.txKeys != nil || hasCount(sr.targets) || sr.negated || (stable > 0 && keyed == stable)
	if !alone {
		// A trie rule reads its plain keys as collections of their own
		// (the values of that key alone, as Coraza reads them:
		// REQUEST_HEADERS:User-Agent is not every header).
		for _, k := range keys {
			bit, ok := pp.slotBit(k)
			if !ok {
				if bit, ok = pp.bit(k.v); !ok {
					return nil, reasonSlots
				}
			}
			vars |= bit
			exclBits[k.v] |= bit
		}
	}
	sr.idx = len(pp.rules)
	pp.rules = append(pp.rules, sr)
	if alone {
		return sr, ""
	}
	// A trie rule: stable collections, whole or by plain key, no macro.
	// It keeps its targets and chain too, for when the screen judges it
	// on its own (a rule with skipAfter, to know where Coraza goes on).
	sr.vars = vars
	if excludable(r, facts) {
		sr.excl = exclusionsOf(exclBits)
	}
	chain := sr.chain
	// Coraza evaluates a multiMatch rule on the value as read and on every
	// value a transformation of its chain changed
	// (corazawaf.Rule.executeTransformationsMultimatch): the screen judges
	// it at the nodes of its path where the value changed.
	n := pp.root
	if sr.multi {
		n.rules = append(n.rules, sr)
	}
	for i, fn := range chain {
		n = n.child(names[i], fn, pp)
		if sr.multi {
			n.rules = append(n.rules, sr)
		}
	}
	sr.node = n
	if !sr.multi {
		n.rules = append(n.rules, sr)
	}
	return sr, ""
}

// lookupKey is key as Coraza looks it up in collection v: lower case, but
// for the ARGS collections, whose keys are case-sensitive
// (corazawaf.newRuleVariableParams).
func lookupKey(v variables.RuleVariable, key string) string {
	switch v {
	case variables.Args, variables.ArgsNames, variables.ArgsGet, variables.ArgsPost,
		variables.ArgsGetNames, variables.ArgsPostNames:
		return key
	}
	return strings.ToLower(key)
}

func hasCount(ts []starget) bool {
	for _, t := range ts {
		if t.count {
			return true
		}
	}
	return false
}

// unite gives the plan the union of the literals of the trie's rules
// whose operators a union stands in for (fastpath.Filtered), but those the
// prelude decides (phasePlan.initial) and the record rules judged from
// their list (records.go): no screen judges the former, and the literals
// of the higher paranoia levels' rules (one letter each, for some) would
// have the union report a literal at most bytes of a text. Snapshot
// builds it, once the prelude is known, or else the first screen of the
// plan (united): a VM's start builds each union once.
func (pp *phasePlan) unite() {
	var ops []plugintypes.Operator
	pp.union, pp.hitWords, pp.united = nil, 0, true
	for _, r := range pp.rules {
		if r.rec != nil && r.rec.on {
			continue // its slot is -1 (activateRecords)
		}
		r.slot = -1
		if r.node != nil && fastpath.Filtered(r.op) && (pp.initial == nil || pp.initial[r.idx] == undecided) {
			r.slot = int32(len(ops))
			ops = append(ops, r.op)
			r.confirm = fastpath.Confirm(r.op)
		}
	}
	if len(ops) != 0 {
		pp.union = fastpath.NewUnion(ops)
		pp.hitWords = (len(ops) + 63) / 64
	}
	pp.slotRules()
}

// slotRules splits each node's rules into those a screen judges one by
// one and those it reaches through the union's hits (node.plain,
// node.united), as the rules' slots are now. A rule without a slot, or
// negated (it matches where the union finds nothing), is plain.
func (pp *phasePlan) slotRules() {
	pp.bySlot = make([]*srule, pp.hitWords*64)
	for _, n := range pp.nodes {
		n.plain = make([][]*srule, len(n.byVar))
		n.united = make([][]*srule, len(n.byVar))
		n.unitedMask = make([][]uint64, len(n.byVar))
		for i, rs := range n.byVar {
			for _, r := range rs {
				if r.slot < 0 || r.negated {
					n.plain[i] = append(n.plain[i], r)
					continue
				}
				pp.bySlot[r.slot] = r
				n.united[i] = append(n.united[i], r)
				if n.unitedMask[i] == nil {
					n.unitedMask[i] = make([]uint64, pp.hitWords)
				}
				n.unitedMask[i][r.slot>>6] |= 1 << (r.slot & 63)
			}
		}
	}
}
