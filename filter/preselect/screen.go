package preselect

import (
	"strconv"
	"sync/atomic"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"

	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/internal/scratch"
)

// Report is what one screen did: in Phase, Removed of the Screened rules
// (the rules it judged) were removed from the transaction. It holds no
// time: in wasm each clock reading is a host call (two for time.Now),
// and timing every screen cost 1.5% of a GET's CPU on V8.
type Report struct {
	TxID              string
	Phase             types.RulePhase
	Screened, Removed int
	// Excluded counts the collections kept rules were told to skip
	// (exclusions.go).
	Excluded int
}

// OnScreen, when set, receives a Report after each screen. The plugin sets
// it once, before any WAF is compiled; it runs inside Coraza's rule loop.
var OnScreen func(Report)

// Register wraps the operator factories (name: factory, the names Coraza
// registers operators under) so that an operator built while a builder
// compiles (between Begin and End) first runs that builder's screen, once
// per transaction and phase, then evaluates as itself. Operators built
// outside such a compile are returned as they are. It only fills Coraza's
// registry (no host call), so it may run from an init function, after the
// factories' own registration.
func Register(factories map[string]plugintypes.OperatorFactory) {
	for name, factory := range factories {
		plugins.RegisterOperator(name, screening(factory))
	}
	plugins.RegisterOperator(jumpOperator, screening(newJumpOperator))
}

func screening(factory plugintypes.OperatorFactory) plugintypes.OperatorFactory {
	return func(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
		if compiling == nil {
			return factory(opts)
		}
		op, err := factory(opts)
		if err != nil {
			return op, err
		}
		t := &trigger{op: op, b: compiling, seg: compiling.segment, pos: compiling.position()}
		compiling.lastTrigger = t
		compiling.triggers = append(compiling.triggers, t)
		return t, nil
	}
}

// trigger is an operator of a rule set with a builder. A rule that
// reaches one (every rule the screen may remove has one) runs the screen
// from its stretch before Coraza evaluates anything else the screen
// decides on: the phase's collections are filled by then and do not
// change until the phase ends.
type trigger struct {
	op  plugintypes.Operator
	b   *Builder
	seg int // the stretch of the rule it belongs to
	pos int // that rule's place in the rule set (Builder.position)
	// boundary: its rule has a skipAfter, so it ends stretch seg. When
	// the operator does not match, the rule does not jump (a rule with
	// one value, like the CRS's paranoia-level gates on TX), and the
	// screen goes on from the next stretch at once, before Coraza starts
	// on its first rule. This matters where the screen could not judge
	// the rule itself; screening a stretch that a jump skips after all
	// only costs time.
	boundary bool
	// adds: its rule has nothing but these additions for effects; when
	// they all add 0, the operator does not match (noop.go).
	adds []addition
	// ctls: its rule has nothing but these removals of targets for
	// effects; the operator makes them itself and does not match.
	ctls []targetRemoval
	// negated: its rule's operator is written "!@" (set with adds or
	// ctls).
	negated bool
	// rec: its rule is a record rule (records.go), and this is the
	// starter's operator.
	rec *record
	// jump: its rule is a screened jump (screenedjumps.go).
	jump *screenedJump
	// starter: it is the operator of a rule, not of a chained rule.
	// flow: its rule may start a skip, and it shows the hidden markers
	// when it matches; plain: its rule cannot, and it hides them again
	// (markers.go).
	starter, flow, plain bool
}

// txCalls is the part of Coraza's transaction the screen needs
// (corazawaf.Transaction): removing a rule for this transaction only, and
// the rule ID ranges removed from it, where the screen marks the
// transactions it has seen.
type txCalls interface {
	RemoveRuleByID(id int)
	RemoveRuleByIDRange(start, end int)
	GetRuleRemoveByIDRanges() [][2]int
}

// What the screen knows of a rule in the current phase.
const (
	undecided uint8 = iota
	inBatch         // the trie pass under way judges it
	matched         // some value matches: Coraza evaluates it
	dropped         // none does: removed from the transaction
	recorded        // a record rule none of whose values makes its chain match (records.go)
)

// txState is what the screens of one transaction share in its current
// phase: the stretches screened, what each rule's judgement was, the
// values read from the stable collections (which do not change until the
// phase ends), and scratch space.
type txState struct {
	// token marks the transaction: the range [token, token] is in its
	// removed rule ID ranges. Tokens are negative, and no rule has a
	// negative ID, so the mark removes nothing. Coraza empties the ranges
	// of every new transaction (corazawaf.WAF.newTransaction), so a mark
	// cannot be carried over from an earlier transaction that reused the
	// same object, whatever its ID says (an ID can come from a request
	// header).
	token int
	phase types.RulePhase
	done  []bool  // per stretch: screened
	rules []uint8 // per phasePlan rule: undecided, matched, dropped
	// pending counts, per stretch, its rules judged on their own that a
	// screen could not judge yet (TX values not final).
	pending []int32
	open    []int32 // per trie node: rules of the pass below it, undecided
	// The union scans of the value being walked down the trie: one per
	// distinct value (see visit), hitWords words each.
	scans []bool // done
	hits  []uint64
	// For the memo: the batch's trie rules are those with member[idx] ==
	// gen, all[node] of them below each node; seen[idx] == valueGen marks
	// those found to match the value being walked, listed in found.
	gen, valueGen uint32
	member, seen  []uint32
	all           []int32
	found         []int32
	values        [][]string
	have          []bool
	// strs holds the values read this phase (values and txValues are
	// slices of it), emptied when a phase starts.
	strs []string
	// named: the values and keys of the collections whose keys make
	// another (namedParents), read once each this phase: in the
	// current phase when gen is namedGen.
	named    [len(namedParents)]namedRead
	namedGen uint32
	// tbuf holds the transformed values of the walk down the trie under
	// way (step); those below tfloor are kept for the rest of the value's
	// walk. made holds what the walk of the value made, per made chain,
	// for the walk madeGen counts (made.go).
	tbuf      []byte
	tfloor    int
	madeSteps []madeStep
	madeGen   uint32
	// constTX: the index's constant TX values (Index.constTX).
	constTX map[string][]string
	// blocked holds, for each rule of the phase (two entries: what its
	// operator reads, what its additions read), one past the position of
	// a rule that may write those values and that the screen keeps; the
	// values are not final for a screen before it (final). Zero: none
	// found yet.
	blocked []int
	// Per screen: the TX values read, the stretches of the batch, the
	// rules to remove (their indexes in phasePlan.rules; now[idx] ==
	// nowGen marks them), how many were judged.
	tx      []txValues
	batch   []int
	drop    []int
	now     []uint32
	nowGen  uint32
	judged  int
	removed int
	// hit: per rule, one past the slot it matched in while the screen
	// read the values (0: none); candidates counts such rules that may
	// skip collections, and excluded the collections this screen told
	// Coraza to skip (exclusions.go).
	hit                  []uint8
	candidates, excluded int
	// hitAt: per rule with exclusions, the index of the value it matched
	// in its slot; walking is the index of the value being walked.
	hitAt   []int32
	walking int32
	// keyHits: the values the memo says such rules match, by slot;
	// walked and memoMax: per slot, how many of its values the screen
	// walked, and the longest value it asked the memo about (-1: none);
	// keyAll and keyKept: keysToSkip's buffers; lastSkip: its last
	// answer, for the screen skipGen counts. See keyrx.go.
	keyHits  []keyHit
	keyAll   []string
	keyKept  []string
	lastSkip keySkip
	skipGen  uint32
	walked   [maxSlots]int32
	memoMax  [maxSlots]int32
	// skips: per skipper of the plan, whether it matches (readSkips).
	skips []bool
	// links: the rule set has a prelude: the chained rules of starters
	// are read (links.go) and setters judged (setters.go).
	links bool
}

type txValues struct {
	key    string
	values []string
}

// lastToken hands out tokens: -1, -2, ...
var lastToken atomic.Int64

func (st *txState) marks(tx txCalls) bool {
	if st.token == 0 {
		return false
	}
	for _, r := range tx.GetRuleRemoveByIDRanges() {
		if r[0] == st.token && r[1] == st.token {
			return true
		}
	}
	return false
}

// enter sets the state up for phase of the plan pp.
func (st *txState) enter(pp *phasePlan, phase types.RulePhase) {
	st.phase = phase
	st.done = resize(st.done, len(pp.segs))
	st.pending = resize(st.pending, len(pp.segs))
	st.rules = resize(st.rules, len(pp.rules))
	copy(st.rules, pp.initial)
	st.open = resize(st.open, len(pp.nodes))
	st.all = resize(st.all, len(pp.nodes))
	st.member = resize(st.member, len(pp.rules))
	st.seen = resize(st.seen, len(pp.rules))
	st.now = resize(st.now, len(pp.rules))
	st.hit = resize(st.hit, len(pp.rules))
	st.hitAt = resize(st.hitAt, len(pp.rules))
	st.blocked = resize(st.blocked, 2*len(pp.rules))
	st.have = resize(st.have, len(pp.vars))

	if cap(st.values) < len(pp.vars) {
		st.values = make([][]string, len(pp.vars))
	}
	st.values = st.values[:len(pp.vars)]
	clear(st.values)
	// Cleared too: it would keep the last transaction's strings alive.
	clear(st.strs)
	st.strs = st.strs[:0]
	st.namedGen++
	if cap(st.tbuf) > maxKeptTbuf {
		// A large value walked before: not kept for the VM's life.
		scratch.Release(st.tbuf)
		st.tbuf = nil
	}
}

// maxKeptTbuf is the largest buffer of transformed values kept from one
// phase to the next.
const maxKeptTbuf = 256 << 10

// resize returns s with length n, all zero.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Evaluate implements plugintypes.Operator.
func (t *trigger) Evaluate(tx plugintypes.TransactionState, value string) bool {
	ix := t.b.index.Load()
	matched := t.evaluate(ix, tx, value)
	if ix != nil && ix.hideMarkers && (t.flow || t.plain) {
		if calls, ok := tx.(txCalls); ok {
			switch {
			case t.flow && matched != t.negated:
				ix.showMarkers(calls)
			case t.plain:
				ix.rehideMarkers(calls)
			}
		}
	}
	return matched
}

func (t *trigger) evaluate(ix *Index, tx plugintypes.TransactionState, value string) bool {
	if ix != nil {
		if ix.guards != nil {
			ix.startGuarded(tx)
		}
		ix.screenFrom(tx, t.seg, t.pos)
	}
	if t.jump != nil {
		return ix != nil && ix.prelude != nil && ix.takes(tx, t.jump)
	}
	if t.rec != nil && ix != nil && ix.prelude != nil && ix.recorded(tx, t.rec) {
		t.rec.write(tx, value)
		return false
	}
	matched := t.op.Evaluate(tx, value)
	if !matched && t.boundary && ix != nil {
		ix.screenFrom(tx, t.seg+1, t.pos)
	}
	// Coraza negates the operator's answer for a rule with "!@": the
	// rule matches when the answer differs from negated, and does not
	// when the answer is negated.
	if matched != t.negated && ix != nil && ix.prelude != nil {
		if t.adds != nil && addsZero(t.adds, tx) {
			return t.negated
		}
		if t.ctls != nil {
			if rm, ok := tx.(targetRemover); ok {
				removeTargets(t.ctls, rm)
				return t.negated
			}
		}
	}
	return matched
}

// screenFrom runs the screen of the transaction's current phase from
// stretch seg, for a rule at position pos that is being evaluated: the
// rules Coraza may still evaluate are judged and those that cannot match
// are removed. From seg it follows the phase as Coraza will: into the next
// stretch, or, where a stretch ends with a rule with skipAfter that the
// screen judges, to where that rule jumps when it matches, until it meets
// a stretch already screened, a jump it cannot judge, or the end of the
// phase. All the stretches it passes are screened in one pass over the
// values. A stretch screened before is not screened again; only its rules
// that read TX values which were not final then are tried again.
//
// A VM runs one transaction's callback at a time; natively, transactions
// of one WAF that run at once take turns here, and one that finds
// another's state starts over (screening a stretch again removes the same
// rules: it only costs time).
func (ix *Index) screenFrom(tx plugintypes.TransactionState, seg, pos int) {
	phase := tx.LastPhase()
	if phase < 1 || int(phase) >= len(ix.plans) {
		return
	}
	pp := ix.plans[phase]
	calls, ok := tx.(txCalls)
	if pp == nil || len(pp.rules) == 0 || seg >= len(pp.segs) || !ok {
		return
	}
	ix.stateMu.Lock()
	defer ix.stateMu.Unlock()
	if !pp.united {
		pp.unite()
	}
	st := &ix.state
	if !st.marks(calls) {
		st.token = int(lastToken.Add(-1))
		calls.RemoveRuleByIDRange(st.token, st.token)
		st.phase = 0
	}
	if st.phase != phase {
		st.enter(pp, phase)
	}
	if st.done[seg] && st.pending[seg] == 0 {
		return
	}
	st.tx, st.drop, st.judged, st.removed, st.excluded = st.tx[:0], st.drop[:0], 0, 0, 0
	st.links, st.constTX = ix.prelude != nil, ix.constTX
	if st.done[seg] {
		// What this rule's stretch judges now may make the values of
		// the rules waiting in the stretches after it final too.
		st.retry(pp, tx, seg, pos)
		for s := seg + 1; s < len(pp.segs) && st.done[s]; s++ {
			if st.pending[s] != 0 {
				st.retry(pp, tx, s, pos)
			}
		}
	} else {
		st.plan(pp, tx, seg, pos)
	}
	st.removeDropped(pp, calls)
	if len(pp.screened) != 0 {
		st.dropJumps(pp, calls, pos)
	}
	if OnScreen != nil && st.judged != 0 {
		OnScreen(Report{TxID: tx.ID(), Phase: phase, Screened: st.judged, Removed: st.removed, Excluded: st.excluded})
	}
}

// plan walks the phase from stretch seg, judges the rules of every
// stretch it passes, and removes those that cannot match.
func (st *txState) plan(pp *phasePlan, tx plugintypes.TransactionState, seg, pos int) {
	if len(pp.skippers) != 0 {
		st.readSkips(pp, tx)
	}
	batch := st.batch[:0]
	for s := seg; s >= 0 && s < len(pp.segs); {
		sg := &pp.segs[s]
		if !st.done[s] {
			st.done[s] = true
			batch = append(batch, s)
		}
		if !sg.jump || sg.screenedJump || sg.markerJump {
			// A screened jump is taken only when every rule it
			// passes over is dropped: those rules are screened. A
			// marker jump passes over no rule of the phase: the
			// stretches up to its marker are empty.
			s++
			continue
		}
		j := sg.jumpBy
		if j == nil || j.pos < pos || (st.rules[j.idx] == undecided && !st.judgeAlone(pp, tx, j, pos)) {
			break
		}
		if st.rules[j.idx] == matched {
			s = sg.target
		} else {
			s++
		}
	}
	st.batch = batch
	var vars uint64
	trie := 0
	for _, s := range batch {
		for _, r := range pp.segs[s].rules {
			switch {
			case st.rules[r.idx] != undecided || r.pos < pos:
				// Judged already, or behind the rule being evaluated.
			case r.links != nil && st.links && st.chainFails(r, tx):
				// A chained rule can match nothing (links.go).
				st.decide(r, false)
			case r.node != nil:
				st.rules[r.idx] = inBatch
				vars |= r.vars
				trie++
				for a := r.node; a != nil; a = a.parent {
					st.open[a.idx]++
				}
			case !st.judgeAlone(pp, tx, r, pos):
				st.pending[s]++
			}
		}
	}
	if trie == 0 {
		st.judgePending(pp, tx, batch, pos)
		return
	}
	batchID := pp.memo.batchID(batch)
	// members marks the batch's trie rules, decided or not, for a value
	// the memo does not know (visitAll); most screens find every value
	// in the memo and need none of it. The rules decided before any
	// screen (phasePlan.initial) are left out: no transaction needs their
	// answer.
	members := false
	markMembers := func() {
		members = true
		st.gen++
		clear(st.all)
		for _, s := range batch {
			for _, r := range pp.segs[s].rules {
				if r.node != nil && (pp.initial == nil || pp.initial[r.idx] == undecided) {
					st.member[r.idx] = st.gen
					for a := r.node; a != nil; a = a.parent {
						st.all[a.idx]++
					}
				}
			}
		}
	}
	st.candidates = 0
	st.keyHits = st.keyHits[:0]
	for _, i := range pp.order {
		v := pp.vars[i]
		bit := uint64(1) << i
		if vars&bit == 0 {
			continue
		}
		mr := pp.memoVar[i]
		remember := batchID >= 0 && mr.max > 0
		vals := st.valuesOf(i, v, tx)
		st.walked[i], st.memoMax[i] = int32(len(vals)), -1
		if remember {
			st.memoMax[i] = int32(mr.max)
		}
		for j, value := range vals {
			if st.open[0] == 0 {
				st.walked[i] = int32(j)
				break
			}
			st.walking = int32(j)
			st.scans = st.scans[:0]
			if !remember || len(value) > mr.max {
				base := st.startValue()
				st.visit(pp, pp.root, value, true, i, st.newScan(pp), sigUnknown, 0)
				st.endValue(base)
				continue
			}
			found, ok := pp.memo.get(batchID, i, value, mr.body)
			if !ok {
				if !members {
					markMembers()
				}
				st.found = st.found[:0]
				st.valueGen++
				base := st.startValue()
				st.visitAll(pp, pp.root, value, true, i, st.newScan(pp), sigUnknown, 0)
				st.endValue(base)
				found = st.found
				pp.memo.put(batchID, i, value, found, mr.body)
			}
			for _, idx := range found {
				r := pp.rules[idx]
				if st.rules[idx] == inBatch {
					st.match(r)
					st.matchedIn(r, i)
				}
				if r.excl != nil {
					st.keyHits = append(st.keyHits, keyHit{rule: idx, slot: uint8(i), value: int32(j)})
				}
			}
		}
	}
	for _, s := range batch {
		for _, r := range pp.segs[s].rules {
			if st.rules[r.idx] == inBatch {
				st.decide(r, false)
			}
		}
	}
	if st.candidates != 0 {
		st.excludeRead(pp, tx, vars)
	}
	clear(st.open)
	st.judgePending(pp, tx, batch, pos)
}

// judgePending judges again, in order, the rules of the batch's
// stretches that could not be judged on their own during the walk: with
// the trie's rules decided, the TX values they read may be final
// (final), where every rule that may write them is dropped.
func (st *txState) judgePending(pp *phasePlan, tx plugintypes.TransactionState, batch []int, pos int) {
	for _, s := range batch {
		if st.pending[s] == 0 {
			continue
		}
		for _, r := range pp.segs[s].rules {
			if st.rules[r.idx] == undecided && r.node == nil && r.pos >= pos && r.txKeys != nil && st.judgeAlone(pp, tx, r, pos) {
				st.pending[s]--
			}
		}
	}
}

// retry judges the rules of stretch seg, screened before, that could not
// be judged then, are still ahead of the rule at pos, and can be now.
func (st *txState) retry(pp *phasePlan, tx plugintypes.TransactionState, seg, pos int) {
	n := int32(0)
	for _, r := range pp.segs[seg].rules {
		if st.rules[r.idx] != undecided || r.node != nil {
			continue
		}
		if r.pos < pos || !st.judgeAlone(pp, tx, r, pos) {
			// Behind the rule being evaluated (Coraza has it), or
			// still not final. The rule being evaluated is judged
			// too: what it will not write is final for those after
			// it.
			if r.pos > pos {
				n++
			}
		}
	}
	st.pending[seg] = n
}

// removeDropped removes the rules of this screen's drop list from the
// transaction. Coraza keeps the removed IDs in a map it makes anew for
// every transaction, so each ID costs an insertion that grows the map;
// a screen drops some 140 rules of the CRS in phase 2 alone. A run of
// them that is consecutive in the order of IDs, counting the rules
// removed before and those the phase can no longer reach (slotDone) but
// no other, goes as one range when it holds minRange rules dropped now
// or more (what a range costs, see minRange), the rest one by one.
func (st *txState) removeDropped(pp *phasePlan, calls txCalls) {
	if len(st.drop) < minRange {
		for _, idx := range st.drop {
			calls.RemoveRuleByID(pp.rules[idx].id)
		}
		return
	}
	st.nowGen++
	lo, hi := len(pp.ids), -1
	for _, idx := range st.drop {
		st.now[idx] = st.nowGen
		k := int(pp.slotOf[idx])
		lo, hi = min(lo, k), max(hi, k)
	}
	start, count := -1, 0
	for k := lo; k <= hi; k++ {
		s := pp.ids[k]
		if s.idx != slotDone && (s.idx < 0 || st.rules[s.idx] != dropped) {
			st.removeRun(pp, calls, start, k, count)
			start, count = -1, 0
			continue
		}
		if start < 0 {
			start = k
		}
		if s.idx >= 0 && st.now[s.idx] == st.nowGen {
			count++
		}
	}
	st.removeRun(pp, calls, start, hi+1, count)
}

// removeRun removes the rules dropped now among pp.ids[start:end], a run
// that holds count of them (none when start is negative): as one range
// when they are minRange or more, else one by one.
func (st *txState) removeRun(pp *phasePlan, calls txCalls, start, end, count int) {
	switch {
	case start < 0:
	case count >= minRange:
		calls.RemoveRuleByIDRange(pp.ids[start].id, pp.ids[end-1].id)
	default:
		for _, s := range pp.ids[start:end] {
			if s.idx >= 0 && st.now[s.idx] == st.nowGen {
				calls.RemoveRuleByID(s.id)
			}
		}
	}
}

// decide records the judgement of r.
func (st *txState) decide(r *srule, match bool) {
	st.judged++
	if match {
		st.rules[r.idx] = matched
		return
	}
	if r.windows != nil && st.skipsOver(r) {
		// A skip may land on it: kept.
		st.rules[r.idx] = matched
		return
	}
	if r.rec != nil && r.rec.on {
		// Kept: its operator writes the records (records.go).
		st.rules[r.idx] = recorded
		return
	}
	st.rules[r.idx] = dropped
	st.drop = append(st.drop, r.idx)
	st.removed++
}

// judgeAlone judges a rule from its own targets, when the values it reads
// are final for a screen at pos, and reports whether it could.
func (st *txState) judgeAlone(pp *phasePlan, tx plugintypes.TransactionState, r *srule, pos int) bool {
	if !st.final(r.txFinal, pos, &st.blocked[2*r.idx]) {
		return false
	}
	if r.sets != nil {
		// A setter (setters.go): kept without a prelude.
		st.decide(r, !st.links || st.setsAnything(r, tx))
		return true
	}
	judge, ok := r.judgeFor(tx)
	if !ok {
		return false
	}
	match := false
	for _, t := range r.targets {
		var vals []string
		switch {
		case t.v == variables.TX:
			vals = st.txValuesOf(t.key, tx)
		case t.key != "":
			vals = st.read(tx, t.v, t.key)
		default:
			vals = st.valuesOf(t.vi, pp.vars[t.vi], tx)
		}
		if match = r.matchesTarget(judge, t, vals); match {
			break
		}
	}
	if match && r.adds != nil && st.links {
		// An addition of 0 changes nothing (noop.go), as its operator
		// would answer. Until what it adds is final, it waits.
		if !st.final(r.addsFinal, pos, &st.blocked[2*r.idx+1]) {
			return false
		}
		match = !addsZeroTo(r.adds, func(key string) []string { return st.txValuesOf(key, tx) })
	}
	st.decide(r, match)
	return true
}

// final reports whether the TX values some rule reads are, for a screen
// at pos, the ones it will read: pos is past the last rule that may
// write them (frozenFrom), or every such rule from pos on is dropped,
// and Coraza will not evaluate it.
//
// A writer the screen kept stays kept for the phase: blocked remembers it,
// so that the rules that wait, tried again at each screen, do not walk
// their writers again until the screen is past it.
func (st *txState) final(f finality, pos int, blocked *int) bool {
	if pos >= f.frozenFrom {
		return true
	}
	if pos < *blocked {
		return false
	}
	for i := len(f.writers) - 1; i >= 0 && f.writers[i].pos >= pos; i-- {
		w := f.writers[i].r
		if w == nil {
			*blocked = f.writers[i].pos + 1
			return false
		}
		switch st.rules[w.idx] {
		case dropped:
			continue
		case matched, recorded:
			*blocked = f.writers[i].pos + 1
		}
		return false
	}
	return true
}

// judgeFor returns r's decision on one value with the macros of its
// argument expanded from tx; false when it needs a transaction and cannot
// have one.
func (r *srule) judgeFor(tx plugintypes.TransactionState) (func(string) bool, bool) {
	if r.judge != nil {
		return r.judge, true
	}
	return fastpath.JudgeIn(r.op, tx)
}

// matchesTarget evaluates r on the values one of its targets read, as
// Coraza does: a count as one value, the number; else each value.
func (r *srule) matchesTarget(judge func(string) bool, t starget, vals []string) bool {
	if t.count {
		return r.matchesValue(judge, strconv.Itoa(len(vals)))
	}
	for _, v := range vals {
		if r.matchesValue(judge, v) {
			return true
		}
	}
	return false
}

// matchesValue evaluates r on one value as Coraza does
// (corazawaf.Rule.doEvaluate): after its transformations, a failed one
// leaving the value as it was; a multiMatch rule on the value as read and
// after each transformation that changed it.
func (r *srule) matchesValue(judge func(string) bool, value string) bool {
	if r.multi {
		if judge(value) != r.negated {
			return true
		}
		for _, fn := range r.chain {
			out, changed, err := fn(value)
			if err != nil || !changed {
				continue
			}
			value = out
			if judge(value) != r.negated {
				return true
			}
		}
		return false
	}
	for _, fn := range r.chain {
		if out, _, err := fn(value); err == nil {
			value = out
		}
	}
	return judge(value) != r.negated
}
