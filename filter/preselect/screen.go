package preselect

import (
	"time"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
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
		return &trigger{op: op, b: compiling}, nil
	}
}

// trigger is an operator of a rule set with a builder. The first rule of
// a phase that reaches a screened operator (every rule the screen may
// remove has one) runs the screen before Coraza evaluates anything else
// the screen decides on: the phase's collections are filled by then and
// do not change until the phase ends.
type trigger struct {
	op plugintypes.Operator
	b  *Builder
}

// remover is the part of Coraza's transaction the screen needs: removing
// a rule for this transaction only (corazawaf.Transaction.RemoveRuleByID).
type remover interface {
	RemoveRuleByID(id int)
}

// Evaluate implements plugintypes.Operator.
func (t *trigger) Evaluate(tx plugintypes.TransactionState, value string) bool {
	if ix := t.b.index.Load(); ix != nil {
		ix.screenOnce(tx)
	}
	return t.op.Evaluate(tx, value)
}

// screenOnce runs the screen of the transaction's current phase unless it
// ran for this transaction and phase already. Running it twice would
// remove the same rules again: it only costs time, so a transaction that
// looks like the last one screened (Coraza reuses transaction objects,
// and the ID can come from a request header) at worst goes unscreened.
func (ix *Index) screenOnce(tx plugintypes.TransactionState) {
	phase := tx.LastPhase()
	if phase < 1 || int(phase) >= len(ix.phases) {
		return
	}
	pi := ix.phases[phase]
	if pi == nil || len(pi.rules) == 0 {
		return
	}
	key := screenedKey{tx: tx, id: tx.ID()}
	pi.lastMu.Lock()
	done := pi.last == key
	pi.last = key
	pi.lastMu.Unlock()
	rm, ok := tx.(remover)
	if done || !ok {
		return
	}
	start := time.Now()
	removed := pi.screen(noCapture{tx}, rm)
	if OnScreen != nil {
		OnScreen(Report{TxID: key.id, Phase: phase, Screened: len(pi.rules), Removed: removed, Took: time.Since(start)})
	}
}

// noCapture is the transaction as the screen's operators see it: never
// capturing, whatever the rule that triggered the screen does, so that
// judging a value leaves TX.0-9 alone.
type noCapture struct{ plugintypes.TransactionState }

func (noCapture) Capturing() bool { return false }

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
	clear(s.open)
	for _, n := range pi.nodes {
		for a := n; a != nil && len(n.rules) != 0; a = a.parent {
			s.open[a.idx] += int32(len(n.rules))
		}
	}
	return s
}

// screen evaluates each indexed rule's operator, after the rule's
// transformations, on the values of the collections it reads, until one
// matches; it removes from the transaction the rules none matched, and
// returns how many. Each value is transformed once per chain prefix.
func (pi *phaseIndex) screen(tx plugintypes.TransactionState, rm remover) int {
	s := pi.getScratch()
	defer pi.pool.Put(s)
	for i, v := range pi.vars {
		col := tx.Collection(v)
		if col == nil {
			continue
		}
		bit := uint64(1) << i
		for _, md := range col.FindAll() {
			value := md.Value()
			if s.open[0] != 0 && pi.root.vars&bit != 0 {
				pi.visit(tx, s, pi.root, value, bit)
			}
			for _, r := range pi.multi {
				if !s.kept[r.idx] && r.vars&bit != 0 && multiMatches(tx, r, value) {
					s.kept[r.idx] = true
				}
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

// visit evaluates the rules whose chain ends at n on value (already
// transformed by the chain to n), then goes down the children that still
// have undecided rules reading this collection.
func (pi *phaseIndex) visit(tx plugintypes.TransactionState, s *scratch, n *node, value string, bit uint64) {
	for _, r := range n.rules {
		if s.kept[r.idx] || r.vars&bit == 0 {
			continue
		}
		if r.op.Evaluate(tx, value) {
			s.kept[r.idx] = true
			for a := n; a != nil; a = a.parent {
				s.open[a.idx]--
			}
		}
	}
	for _, c := range n.children {
		if s.open[c.idx] == 0 || c.vars&bit == 0 {
			continue
		}
		out, _, err := c.fn(value)
		if err != nil {
			// Coraza keeps the previous value when a transformation
			// fails (corazawaf.Rule.transformArg).
			out = value
		}
		pi.visit(tx, s, c, out, bit)
	}
}

// multiMatches reports whether a multiMatch rule's operator matches the
// value as read or any changed value along its chain, the values Coraza
// evaluates for such a rule (corazawaf.Rule.executeTransformationsMultimatch).
func multiMatches(tx plugintypes.TransactionState, r *srule, value string) bool {
	if r.op.Evaluate(tx, value) {
		return true
	}
	for _, fn := range r.chain {
		out, changed, err := fn(value)
		if err != nil || !changed {
			continue
		}
		value = out
		if r.op.Evaluate(tx, value) {
			return true
		}
	}
	return false
}
