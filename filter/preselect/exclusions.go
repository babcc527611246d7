package preselect

import (
	mbits "math/bits"
	"regexp"
	"slices"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// Collections a kept rule is told to skip.
//
// A trie rule the screen keeps matched some value, and Coraza evaluates it
// on every value of every collection it reads: each through the rule's
// transformations, with an entry in Coraza's transformation cache per
// value and step. For an attack in a JSON body, the SQL injection and XSS
// rules the screen keeps read ARGS_NAMES too, some 150 names for a 15 KB
// body, besides the cookies and a few headers, while the attack is in
// ARGS.
//
// The screen reads the collections of a batch one after the other
// (phasePlan.order) and judges every rule still open on every value of
// each. A rule is open until it matches: every collection it reads that
// the screen read before the one it matched in holds no value it matches.
// The screen tells Coraza to skip those collections for that rule in this
// transaction, as ctl:ruleRemoveTargetById=ID;ARGS_NAMES would
// (Transaction.RemoveRuleTargetByID with no key, which excludes every key
// of the collection). The rule matches the same values as before, in the
// same order, with the same captures, so its actions, matched data and log
// line are the same; only values that cannot match are not transformed
// and tried.
//
// The collections of names come first in that order: an attack is seldom
// in a name, so a rule that matches in ARGS has had ARGS_NAMES read
// before it.
//
// A rule qualifies when nothing else reads what an exclusion changes
// (excludable):
//   - it has no chained rule: Coraza applies a rule's exclusions to its
//     chained rules too (corazawaf.Rule.doEvaluate looks them up by the
//     starter's ID);
//   - it is a trie rule, so it counts no collection (a count would change)
//     and is not negated;
//   - no directive adds to its targets (SecRuleUpdateTargetById, ByTag,
//     ByMsg), so the collections the screen read hold every value the
//     rule reads. One that only excludes ("!REQUEST_COOKIES:__gads", as
//     the CRS does for 941100) leaves the rule fewer values: none it
//     matches in a collection the screen found no match in.
//
// A keyed target (REQUEST_HEADERS:User-Agent) is skipped with its whole
// collection, only when every slot of the rule that reads that collection,
// whole or by key, was read before the match.

// exclusion is a collection a trie rule reads and the slots (bits of
// phasePlan.vars) the screen reads it through.
type exclusion struct {
	v    variables.RuleVariable
	bits uint64
}

// excludable reports whether Coraza may be told to skip collections of
// trie rule r (see above).
func excludable(r observed, facts directiveFacts) bool {
	return !hasAction(r.parsed.actions, "chain") && !facts.updateAll && !inRanges(r.id, facts.updated)
}

// exclusionsOf lists bits in the order of the collections, for a rule
// that reads them.
func exclusionsOf(bits map[variables.RuleVariable]uint64) []exclusion {
	out := make([]exclusion, 0, len(bits))
	for v, b := range bits {
		if b != 0 {
			out = append(out, exclusion{v: v, bits: b})
		}
	}
	slices.SortFunc(out, func(a, b exclusion) int { return int(a.v) - int(b.v) })
	return out
}

// namesFirst are the collections of names, which a screen reads first.
var namesFirst = map[variables.RuleVariable]bool{
	variables.ArgsNames: true, variables.ArgsGetNames: true, variables.ArgsPostNames: true,
	variables.RequestHeadersNames: true, variables.RequestCookiesNames: true,
	variables.FilesNames: true, variables.ResponseHeadersNames: true,
}

// slotOrder is the order a screen reads the slots in: those of the
// collections of names, then the others, each group in slot order.
func slotOrder(vars []varSlot) []int {
	order := make([]int, 0, len(vars))
	for i, v := range vars {
		if namesFirst[v.v] {
			order = append(order, i)
		}
	}
	for i, v := range vars {
		if !namesFirst[v.v] {
			order = append(order, i)
		}
	}
	return order
}

// matchedIn notes that trie rule r matched a value of slot i while the
// screen read the values.
func (st *txState) matchedIn(r *srule, i int) {
	st.hit[r.idx] = uint8(i) + 1
	if r.excl != nil {
		st.candidates++
		st.hitAt[r.idx] = st.walking
	}
}

// excludeRead tells Coraza, for each rule of the batch the screen kept on
// a match, to skip the collections it read before the one the rule
// matched in (see above). vars are the slots the screen read, in the
// order phasePlan.order; st.hit holds one past the slot each rule matched
// in while the screen read them (0: none; enter clears it, and a rule is in
// a batch once a phase).
func (st *txState) excludeRead(pp *phasePlan, tx plugintypes.TransactionState, vars uint64) {
	rm, ok := tx.(targetRemover)
	if !ok {
		return
	}
	st.skipGen++
	var rank [maxSlots]int8
	n := int8(0)
	for _, i := range pp.order {
		if vars&(1<<i) != 0 {
			rank[i], n = n, n+1
		} else {
			rank[i] = -1
		}
	}
	for _, s := range st.batch {
		for _, r := range pp.segs[s].rules {
			if r.excl == nil || st.rules[r.idx] != matched || st.hit[r.idx] == 0 {
				continue
			}
			slot := int(st.hit[r.idx] - 1)
			h := rank[slot]
			for _, e := range r.excl {
				switch {
				case readBefore(e.bits, &rank, h):
					rm.RemoveRuleTargetByID(r.id, e.v, "", nil)
					st.excluded++
				case e.bits&(1<<slot) != 0:
					// The collection it matched in: its keys (keyrx.go).
					for _, rx := range st.keysToSkip(pp, tx, r, e, &rank) {
						rm.RemoveRuleTargetByID(r.id, e.v, "", rx)
						st.excluded++
					}
				}
			}
		}
	}
}

// readBefore reports whether every slot of bits was read before the one
// of rank h.
func readBefore(bits uint64, rank *[maxSlots]int8, h int8) bool {
	for b := bits; b != 0; b &= b - 1 {
		if r := rank[mbits.TrailingZeros64(b)]; r < 0 || r >= h {
			return false
		}
	}
	return true
}

// keyHit is a value of a slot that the memo says a trie rule with
// exclusions matches.
type keyHit struct {
	rule  int32
	slot  uint8
	value int32
}

// keysToSkip returns the expressions by which r skips the keys of
// collection e it cannot match, none when there are none to skip, or too
// many keys to keep (keyrx.go). The screen reads the collection
// through the slots of e.bits (ARGS as ARGS_GET, ARGS_POST and
// ARGS_PATH), each whole.
func (st *txState) keysToSkip(pp *phasePlan, tx plugintypes.TransactionState, r *srule, e exclusion, rank *[maxSlots]int8) []*regexp.Regexp {
	judge, ok := r.judgeFor(tx)
	if !ok {
		return nil
	}
	all, kept := st.keyAll[:0], st.keyKept[:0]
	for b := e.bits; b != 0; b &= b - 1 {
		slot := mbits.TrailingZeros64(b)
		keys := st.keysOf(slot, pp.vars[slot], tx)
		vals := st.valuesOf(slot, pp.vars[slot], tx)
		if len(keys) != len(vals) {
			return nil
		}
		all = append(all, keys...)
		for _, k := range st.keyHits {
			if int(k.rule) == r.idx && int(k.slot) == slot {
				kept = append(kept, keys[k.value])
			}
		}
		// The values without the memo's answer are judged here, but for
		// those the screen judged r on before it matched: every value of
		// a slot read before the one it matched in, and of that slot
		// those before the value it matched (kept whatever the path).
		from := 0
		switch h := int(st.hit[r.idx] - 1); {
		case rank[slot] >= 0 && rank[slot] < rank[h]:
			from = len(vals)
		case slot == h:
			at := int(st.hitAt[r.idx])
			kept = append(kept, keys[at])
			from = at + 1
		}
		for j := from; j < len(vals); j++ {
			if v := vals[j]; (int32(j) >= st.walked[slot] || int32(len(v)) > st.memoMax[slot]) && r.matchesValue(judge, v) {
				kept = append(kept, keys[j])
			}
		}
	}
	st.keyAll, st.keyKept = all, kept
	lower, ok := keptKeys(all, kept)
	if !ok {
		return nil
	}
	// The rules that matched the same value keep the same keys: their
	// expressions are worked out once.
	last := &st.lastSkip
	if last.gen == st.skipGen && last.bits == e.bits && slices.Equal(last.kept, lower) {
		return last.rx
	}
	out := last.rx[:0]
	for _, src := range skipSources(all, lower) {
		rx, err := pp.keyRx.compile(src)
		if err != nil {
			return nil
		}
		out = append(out, rx)
	}
	*last = keySkip{gen: st.skipGen, bits: e.bits, kept: lower, rx: out}
	return out
}

// keySkip is the last expressions keysToSkip worked out: for the keys of
// the slots bits in the screen st.skipGen counts, keeping kept.
type keySkip struct {
	gen  uint32
	bits uint64
	kept []string
	rx   []*regexp.Regexp
}

// keysOf returns the keys of the values of whole slot i, in the order of
// valuesOf; nil for a slot by key, or a collection without keys.
func (st *txState) keysOf(i int, v varSlot, tx plugintypes.TransactionState) []string {
	if v.key != "" {
		return nil
	}
	if k := namedParent(v.v); k >= 0 {
		return st.namedRead(tx, k).keys
	}
	switch v.v {
	case variables.Args:
		start := len(st.strs)
		for _, k := range [...]int{argsGet, argsPost, argsPath} {
			st.strs = append(st.strs, st.namedRead(tx, k).keys...)
		}
		return st.strs[start:len(st.strs):len(st.strs)]
	case variables.ArgsNames, variables.ArgsGetNames, variables.ArgsPostNames,
		variables.RequestHeadersNames, variables.RequestCookiesNames, variables.ResponseHeadersNames:
		// A name is its own key (collections.NamedCollectionNames).
		return st.valuesOf(i, v, tx)
	}
	return nil
}
