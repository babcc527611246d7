package preselect

import (
	"sync/atomic"
	"time"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// Report is what one screen did: in Phase, Removed of the Screened rules
// (the rules the index may remove) were removed from the transaction.
type Report struct {
	TxID              string
	Phase             types.RulePhase
	Screened, Removed int
	Took              time.Duration
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
}

func screening(factory plugintypes.OperatorFactory) plugintypes.OperatorFactory {
	return func(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
		op, err := factory(opts)
		if err != nil || compiling == nil {
			return op, err
		}
		t := &trigger{op: op, b: compiling, seg: compiling.segment}
		compiling.lastTrigger = t
		return t, nil
	}
}

// trigger is an operator of a rule set with a builder. The first rule of
// a phase that reaches a screened operator (every rule the screen may
// remove has one) runs the screen before Coraza evaluates anything else
// the screen decides on: the phase's collections are filled by then and
// do not change until the phase ends.
type trigger struct {
	op  plugintypes.Operator
	b   *Builder
	seg int // the stretch of the rule set of the rule it belongs to
	// boundary: its rule has a skipAfter, so it ends stretch seg. When
	// the operator does not match, the rule does not jump (a rule with
	// one value, like the CRS's paranoia-level gates on TX), and the
	// next stretch is screened at once, before Coraza starts on its
	// first rule: that rule is then not evaluated in vain. Screening a
	// stretch that a jump skips after all only costs time.
	boundary bool
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

// txState is what the screens of one transaction share: which stretches
// of the current phase were screened, and the values read from its
// collections, which do not change until the phase ends.
type txState struct {
	// token marks the transaction: the range [token, token] is in its
	// removed rule ID ranges. Tokens are negative, and no rule has a
	// negative ID, so the mark removes nothing. Coraza empties the ranges
	// of every new transaction (corazawaf.WAF.newTransaction), so a mark
	// cannot be carried over from an earlier transaction that reused the
	// same object, whatever its ID says (an ID can come from a request
	// header).
	token  int
	phase  types.RulePhase
	done   []bool
	values map[variables.RuleVariable][]types.MatchData
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

// Evaluate implements plugintypes.Operator.
func (t *trigger) Evaluate(tx plugintypes.TransactionState, value string) bool {
	ix := t.b.index.Load()
	if ix != nil {
		ix.screenOnce(tx, t.seg)
	}
	matched := t.op.Evaluate(tx, value)
	if !matched && t.boundary && ix != nil {
		ix.screenOnce(tx, t.seg+1)
	}
	return matched
}

// screenOnce runs the screen of one stretch of the transaction's current
// phase, unless it ran for this transaction, phase and stretch already or
// the stretch has nothing to screen. A VM runs one transaction's callback
// at a time; natively, transactions of one WAF that run at once take
// turns here, and one that finds another's state starts over (screening a
// stretch again removes the same rules: it only costs time).
func (ix *Index) screenOnce(tx plugintypes.TransactionState, seg int) {
	phase := tx.LastPhase()
	if phase < 1 || int(phase) >= len(ix.parts) || seg >= len(ix.parts[phase]) {
		return
	}
	pi := ix.parts[phase][seg]
	calls, ok := tx.(txCalls)
	if pi == nil || len(pi.rules) == 0 || !ok {
		return
	}
	ix.stateMu.Lock()
	defer ix.stateMu.Unlock()
	st := &ix.state
	if !st.marks(calls) {
		st.token = int(lastToken.Add(-1))
		calls.RemoveRuleByIDRange(st.token, st.token)
		st.phase = 0
	}
	if st.phase != phase {
		st.phase = phase
		if n := len(ix.parts[phase]); cap(st.done) < n {
			st.done = make([]bool, n)
		} else {
			st.done = st.done[:n]
			clear(st.done)
		}
		if st.values == nil {
			st.values = map[variables.RuleVariable][]types.MatchData{}
		}
		clear(st.values)
	}
	if st.done[seg] {
		return
	}
	st.done[seg] = true
	start := time.Now()
	removed := pi.screen(tx, calls, st.values)
	if OnScreen != nil {
		OnScreen(Report{TxID: tx.ID(), Phase: phase, Screened: len(pi.rules), Removed: removed, Took: time.Since(start)})
	}
}

// scratch is the per-screen state: which rules matched a value, and how
// many undecided rules each trie node still has below it.
type scratch struct {
	kept []bool
	open []int32
}

func (pi *phaseIndex) getScratch() *scratch {
	s, _ := pi.pool.Get().(*scratch)
	if s == nil {
		s = &scratch{kept: make([]bool, len(pi.rules)), open: make([]int32, len(pi.nodes))}
	}
	clear(s.kept)
	copy(s.open, pi.open)
	return s
}

// screen evaluates each indexed rule's operator, after the rule's
// transformations, on the values of the collections it reads, until one
// matches; it removes from the transaction the rules none matched, and
// returns how many. Each value is transformed once per chain prefix.
func (pi *phaseIndex) screen(tx plugintypes.TransactionState, rm txCalls, values map[variables.RuleVariable][]types.MatchData) int {
	s := pi.getScratch()
	defer pi.pool.Put(s)
	for i, v := range pi.vars {
		vals, ok := values[v]
		if !ok {
			if col := tx.Collection(v); col != nil {
				vals = col.FindAll()
			}
			values[v] = vals
		}
		bit := uint64(1) << i
		for _, md := range vals {
			value := md.Value()
			if s.open[0] != 0 && pi.root.vars&bit != 0 {
				pi.visit(s, pi.root, value, true, bit)
			}
		}
	}
	removed := 0
	for _, r := range pi.rules {
		if !s.kept[r.idx] {
			rm.RemoveRuleByID(r.id)
			removed++
		}
	}
	return removed
}

// visit evaluates the rules judged at n on value (already transformed by
// the chain to n), then goes down the children that still have undecided
// rules reading this collection. changed says whether n's transformation
// changed the value: a multiMatch rule is judged only on changed values,
// as Coraza collects them.
func (pi *phaseIndex) visit(s *scratch, n *node, value string, changed bool, bit uint64) {
	for _, r := range n.rules {
		if s.kept[r.idx] || r.vars&bit == 0 || (r.multi && !changed) {
			continue
		}
		if r.judge(value) {
			s.kept[r.idx] = true
			for a := r.node; a != nil; a = a.parent {
				s.open[a.idx]--
			}
		}
	}
	for _, c := range n.children {
		if s.open[c.idx] == 0 || c.vars&bit == 0 {
			continue
		}
		out, changed, err := c.fn(value)
		if err != nil {
			// Coraza keeps the previous value when a transformation
			// fails (corazawaf.Rule.transformArg).
			out, changed = value, false
		}
		pi.visit(s, c, out, changed, bit)
	}
}
