package preselect

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/corazawaf/coraza/v3/types"
	"github.com/wafguard/wafguard/filter/fastpath"
)

// Builder collects the rules of one WAF while Coraza compiles it, through
// the rule observer, and turns them into an Index. Create it with
// NewBuilder and the rule set as ReadRuleSet read it (the texts Coraza
// compiles are that rule set with a JumpPlan's lines), pass Observe to
// experimental.WAFConfigWithRuleObserver, call coraza.NewWAF between
// Begin and End, and call Finish after it succeeded.
type Builder struct {
	rules []observed
	set   *RuleSet
	index atomic.Pointer[Index] // nil until Finish
	// segment numbers the stretches of the rule set between the places a
	// skipAfter can jump from or to: it grows after each SecMarker and
	// after each rule with skipAfter. Each stretch is screened on its own,
	// when its first rule with a screened operator runs, so a stretch a
	// skipAfter jumps over (the CRS's higher paranoia levels) costs
	// nothing.
	segment int
	// lastTrigger is the last operator built for this rule set (the
	// current rule's, while Coraza parses it).
	lastTrigger *trigger
	// chainOpen: the last rule observed starts a chain, so the operators
	// built until the next one belong to its chained rules.
	chainOpen bool
	// jumps are the IDs of the marker jumps planned into the texts
	// (PlanJumps), screened those of the screened jumps among them.
	jumps, screened []int
	// triggers are the operators built for this rule set, in order.
	triggers []*trigger
	// keepMarkers: the rule set keeps its markers, even where they could
	// be hidden (markers.go).
	keepMarkers bool
}

// Jumps tells the builder the IDs of the marker jumps planned into the
// rule set's texts, which Finish checks on the compiled rules, and of the
// screened jumps among them.
func (b *Builder) Jumps(ids, screened []int) { b.jumps, b.screened = ids, screened }

type observed struct {
	id      int
	phase   types.RulePhase
	raw     string
	tags    []string
	secMark string
	parsed  parsedRule // raw, read once
	seg     int        // see Builder.segment
	// writes is what the rule and its chain may write in TX (set by
	// Finish).
	writes *txWrites
}

// NewBuilder returns an empty builder for the rule set set.
func NewBuilder(set *RuleSet) *Builder { return &Builder{set: set} }

// compileMu serialises the compiles with a builder: while one runs, the
// operators Coraza builds belong to its rule set (see Register).
var (
	compileMu sync.Mutex
	compiling *Builder
)

// Begin marks the start of the compile of the builder's rule set: from
// now until End, the operators Coraza builds (those of filter/fastpath)
// run the builder's screen before their first evaluation in each phase of
// a transaction.
func (b *Builder) Begin() {
	compileMu.Lock()
	compiling = b
}

// End marks the end of the compile Begin started.
func (b *Builder) End() {
	compiling = nil
	compileMu.Unlock()
}

// Observe is the rule observer: Coraza calls it for each top-level rule
// (a chain starter, a SecAction or a SecMarker) in the order of the rule
// set, with the raw text of that rule alone (not its chained rules).
func (b *Builder) Observe(r types.RuleMetadata) {
	o := observed{id: r.ID(), phase: r.Phase(), raw: r.Raw(), tags: r.Tags(), secMark: r.SecMark(), seg: b.segment}
	o.parsed = parseRule(o.raw)
	// The last operator built is this rule's when the rule has one of
	// this project's: Coraza builds a rule's operator while it parses the
	// rule, after every operator of the rules before it and their chains.
	// Built right after a chain, it was taken for one of the chain's.
	own := b.lastTrigger
	if own != nil && !(o.parsed.secRule && fastpath.Owns(o.parsed.opName)) {
		own = nil
	}
	if own != nil {
		own.pos, own.starter = len(b.rules), true
	}
	b.rules = append(b.rules, o)
	if o.secMark != "" || hasAction(o.parsed.actions, "skipafter") {
		if own != nil {
			own.boundary = true
		}
		b.segment++
	}
	b.lastTrigger = nil
	b.chainOpen = hasAction(o.parsed.actions, "chain")
}

// position is the place in the rule set of the rule whose operator is
// being built: the index the next observed rule gets, or, while a chain
// is being read, the index of its starter (the chained rules run as part
// of it).
func (b *Builder) position() int {
	if b.chainOpen {
		return len(b.rules) - 1
	}
	return len(b.rules)
}

// Finish builds the index from what was observed. rulesInWAF is the
// number of rules the compiled WAF holds (experimental.WAFWithRules), used
// to check the configuration-time removals it accounted for.
func (b *Builder) Finish(rulesInWAF int) *Index {
	known := make(map[string]*parsedRule, len(b.rules))
	for i := range b.rules {
		known[b.rules[i].raw] = &b.rules[i].parsed
	}
	writes := b.set.chainWrites(known)
	for i := range b.rules {
		if w := writes[b.rules[i].raw]; w == nil && slices.Contains(b.jumps, b.rules[i].id) {
			// A planned jump is not in the texts as read: its own text
			// is all there is of it.
			writes[b.rules[i].raw] = &ruleChain{txWrites: writesOf(b.rules[i].parsed)}
		}
		if w := writes[b.rules[i].raw]; w != nil {
			b.rules[i].writes = &w.txWrites
		} else if b.rules[i].secMark == "" {
			// A rule whose text was not found may write anything.
			b.rules[i].writes = &txWrites{any: true}
		} else {
			b.rules[i].writes = &txWrites{}
		}
	}
	facts := b.set.facts
	if b.set.failed {
		// What the directives say is not known: no rule is screened.
		facts.updateAll = true
	}
	facts.bodyCtl = bodyProcessorCtls(b.rules, writes)
	facts.screenedJumps = b.screened
	for _, id := range b.jumps {
		if !slices.Contains(b.screened, id) {
			facts.markerJumps = append(facts.markerJumps, id)
		}
	}
	ix := newIndex(b.rules, facts, rulesInWAF, b.segment)
	if ix.plan != nil && len(ix.plan.guards) != 0 {
		if g, ok := guardsOf(ix.plan, b.rules, b.triggers); ok {
			ix.guards = g
		} else {
			ix.plan = nil
		}
	}
	var tagged map[string][]int // found when a rule needs them
	taggedDone := false
	for _, t := range b.triggers {
		if t.pos < len(b.rules) && !hasAction(b.rules[t.pos].parsed.actions, "chain") {
			r := b.rules[t.pos]
			if t.adds = additionsOf(r, facts); t.adds != nil {
				ix.adders = append(ix.adders, r.id)
			}
			if ctls := targetRemovalsOf(r); ctls != nil {
				if !taggedDone {
					tagged, taggedDone = taggedRules(b.rules, facts, rulesInWAF), true
				}
				if t.ctls = withRules(ctls, tagged); t.ctls != nil {
					ix.adders = append(ix.adders, r.id)
					ix.ctlTriggers = append(ix.ctlTriggers, t)
				}
			}
			t.negated = r.parsed.negated
		}
	}
	ix.findRecords(b.rules, b.triggers, writes, facts)
	ix.findScreened(b.rules, b.triggers, b.screened, facts)
	ix.findLinks(b.rules, writes, facts)
	for _, r := range b.rules {
		if r.secMark == "" && slices.Contains(b.jumps, r.id) && !slices.Contains(b.screened, r.id) {
			ix.jumps = append(ix.jumps, r.id)
		}
	}
	if len(ix.jumps) != 0 {
		// Checked without the prelude, and again by Snapshot with it.
		ix.jumpCheck = &jumpCheck{rules: jumpRules(b.rules), facts: facts}
		ix.jumpsOff = checkJumps(ix.jumpCheck.rules, facts, ix.jumps, nil)
	}
	ix.jumpsOff = append(ix.jumpsOff, ix.refused...)
	if len(facts.updated) == 0 && !facts.updateAll {
		for _, r := range b.rules {
			if w := r.writes; w.any || len(w.keys) != 0 || len(w.prefixes) != 0 {
				ix.txWriters = append(ix.txWriters, ruleWrites{r.id, w})
			}
		}
		ix.knowsWriters = true
	}
	if !b.keepMarkers && b.markerRules(facts) {
		ix.canHide = true
		if len(b.jumps) != 0 {
			ix.jumpRange = [2]int{b.jumps[0], b.jumps[len(b.jumps)-1]}
		}
	}
	b.rules, b.set, b.triggers = nil, nil, nil
	b.index.Store(ix)
	return ix
}
