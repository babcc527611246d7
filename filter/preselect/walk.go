package preselect

import (
	"math/bits"
	"strings"
	"unsafe"
)

// newScan adds a union scan, not done yet, for a new value.
func (st *txState) newScan(pp *phasePlan) int {
	k := len(st.scans)
	st.scans = append(st.scans, false)
	if need := (k + 1) * pp.hitWords; len(st.hits) < need {
		st.hits = append(st.hits, make([]uint64, need-len(st.hits))...)
	}
	return k
}

// hitsOf returns the union's hits on value, the value of scan k, scanning
// it the first time.
func (st *txState) hitsOf(pp *phasePlan, k int, value string) []uint64 {
	h := st.hits[k*pp.hitWords : (k+1)*pp.hitWords]
	if !st.scans[k] {
		st.scans[k] = true
		clear(h)
		pp.union.Scan(value, h)
	}
	return h
}

// visit evaluates the rules of the pass judged at n that read collection
// vi on value (already transformed by the chain to n), then goes down the children that still
// have undecided rules reading this collection. changed says whether n's
// transformation changed the value: a multiMatch rule is judged only on
// changed values, as Coraza collects them. scan is the union scan that
// stands for value: the one of the parent when n's transformation left
// the value as it was, or only changed the case of ASCII letters (the
// literal filters ignore ASCII case).
func (st *txState) visit(pp *phasePlan, n *node, value string, changed bool, vi int, scan int, sig uint64, chain int32) {
	bit := uint64(1) << vi
	for _, r := range n.plain[vi] {
		if st.rules[r.idx] != inBatch || (r.multi && !changed) {
			continue
		}
		if st.judges(pp, r, value, scan) {
			st.match(r)
			st.matchedIn(r, vi)
		}
	}
	if rs := n.united[vi]; len(rs) != 0 {
		// The union's hits are read (a pass over the value, the first
		// time) only when one of these rules is still to be judged.
		for _, r := range rs {
			if st.rules[r.idx] == inBatch && (changed || !r.multi) {
				st.visitUnited(pp, n.unitedMask[vi], value, changed, vi, scan)
				break
			}
		}
	}
	for _, c := range n.children {
		if st.open[c.idx] == 0 || c.vars&bit == 0 {
			continue
		}
		mark := len(st.tbuf)
		out, changed, k, osig, ochain := st.step(pp, c, value, scan, &sig, chain)
		st.visit(pp, c, out, changed, vi, k, osig, ochain)
		st.truncate(mark)
	}
}

// step transforms value by child c's transformation and returns the
// result, whether the transformation changed it, and the union scan that
// stands for the result: the parent's when the value is the same, or only
// the case of ASCII letters changed (the literal filters ignore ASCII
// case), or the result is the start or the end of the value (within),
// else a new one; and the result's signature (sigUnknown when it
// is a new value). sig is value's signature, which step works out the
// first time a child needs it: a value without the bytes a
// transformation needs to change anything (transform.Triggers) is not
// transformed at all. Most values hold none of '%', '&', '\\', NUL and
// the comment marks, and so skip most of the CRS's decodings.
//
// A transformation with an Into writes its result after the others in
// tbuf; the caller drops it (truncates tbuf to where it was) once the
// rules below c are judged. Nothing keeps a transformed value past that:
// the operators only read it, and the memos copy what they keep, and key
// on the value as read.
func (st *txState) step(pp *phasePlan, c *node, value string, scan int, sig *uint64, chain int32) (string, bool, int, uint64, int32) {
	if c.trig != 0 {
		if *sig == sigUnknown {
			*sig = pp.signature(value)
		}
		if *sig&c.trig == 0 {
			// None of the bytes the transformation needs to change
			// anything (transform.Triggers): the value as it is.
			return value, false, scan, *sig, chain
		}
	}
	var m *madeStep
	id := int32(-1)
	if chain >= 0 {
		if id = pp.chainOf(chain, c.tid); id >= 0 {
			if m = st.madeFor(id); m.gen == st.madeGen {
				// Made on another path of this value's walk (made.go).
				return m.out, m.changed, int(m.scan), m.sig, m.chain
			}
		}
	}
	var out string
	var changed bool
	if c.into != nil {
		mark := len(st.tbuf)
		buf, unchanged, ch := c.into(st.tbuf, value)
		out, changed = value, ch
		if !unchanged {
			st.tbuf = buf
			out = unsafe.String(unsafe.SliceData(buf[mark:]), len(buf)-mark)
		}
	} else {
		var err error
		if out, changed, err = c.fn(value); err != nil {
			// Coraza keeps the previous value when a transformation
			// fails (corazawaf.Rule.transformArg).
			out, changed = value, false
		}
	}
	osig, ochain := *sig, chain
	if out != value {
		osig, ochain = sigUnknown, id
		if !sameButCase(out, value) && !(st.scans[scan] && within(out, value)) {
			scan = st.newScan(pp)
		}
	} else {
		out = value
	}
	if m != nil && st.keepMade(out) {
		*m = madeStep{gen: st.madeGen, changed: changed, scan: int32(scan), chain: ochain, out: out, sig: osig}
	}
	return out, changed, scan, osig, ochain
}

// sameButCase reports whether a and b differ only in the case of ASCII
// letters, which the union ignores (it reads values lower-cased):
// t:lowercase on an ASCII value, and cmdLine on most words of a text.
func sameButCase(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if x, y := a[i], b[i]; x != y && (x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z') {
			return false
		}
	}
	return true
}

// within reports whether out, shorter than value, is its start or its
// end: t:normalizePathWin on a sentence that ends with a dot, t:trim. The
// union's literals found in value are then a superset of those in out,
// and value's scan, once done (a scan is done on the first value that
// asks for it, hitsOf), stands for out: the union only tells which
// operators to run (judges), and a literal found in the part cut off
// costs one operator run that finds no match, never a match missed.
func within(out, value string) bool {
	return len(out) < len(value) && (strings.HasPrefix(value, out) || strings.HasSuffix(value, out))
}

// sigUnknown stands for a value's signature not worked out yet
// (phasePlan.signature); the signatures use the other bits.
const sigUnknown = 1 << 63

// visitUnited judges the rules of the pass at a node whose union slots
// mask holds, on value (of union scan scan), as visit does: of those, only
// the ones whose literals the union found in the value can match, and
// those run their confirmation. None is negated (node.united).
func (st *txState) visitUnited(pp *phasePlan, mask []uint64, value string, changed bool, vi int, scan int) {
	h := st.hitsOf(pp, scan, value)
	for w, m := range mask {
		for x := h[w] & m; x != 0; x &= x - 1 {
			r := pp.bySlot[w<<6|bits.TrailingZeros64(x)]
			if st.rules[r.idx] != inBatch || (r.multi && !changed) {
				continue
			}
			if r.confirm(value) {
				st.match(r)
				st.matchedIn(r, vi)
			}
		}
	}
}

// visitAllUnited is visitUnited for visitAll.
func (st *txState) visitAllUnited(pp *phasePlan, mask []uint64, value string, changed bool, scan int) {
	h := st.hitsOf(pp, scan, value)
	for w, m := range mask {
		for x := h[w] & m; x != 0; x &= x - 1 {
			r := pp.bySlot[w<<6|bits.TrailingZeros64(x)]
			if st.member[r.idx] != st.gen || st.seen[r.idx] == st.valueGen || (r.multi && !changed) {
				continue
			}
			if r.confirm(value) {
				st.seen[r.idx] = st.valueGen
				st.found = append(st.found, int32(r.idx))
			}
		}
	}
}

// judges reports whether trie rule r matches value (the value of union
// scan scan): an @rx rule the union stands for runs its automaton only
// when its literal filter may match.
func (st *txState) judges(pp *phasePlan, r *srule, value string, scan int) bool {
	var m bool
	if s := r.slot; s >= 0 {
		h := st.hitsOf(pp, scan, value)
		m = h[s>>6]&(1<<(s&63)) != 0 && r.confirm(value)
	} else {
		m = r.judge(value)
	}
	return m != r.negated
}

// match records that trie rule r of the pass matches a value.
func (st *txState) match(r *srule) {
	st.decide(r, true)
	for a := r.node; a != nil; a = a.parent {
		st.open[a.idx]--
	}
}

// visitAll is visit for the memo: it judges every rule of the batch at n
// that reads this collection, decided before or not, and adds those that
// match to st.found, each once.
func (st *txState) visitAll(pp *phasePlan, n *node, value string, changed bool, vi int, scan int, sig uint64, chain int32) {
	bit := uint64(1) << vi
	for _, r := range n.plain[vi] {
		if st.member[r.idx] != st.gen || st.seen[r.idx] == st.valueGen || (r.multi && !changed) {
			continue
		}
		if st.judges(pp, r, value, scan) {
			st.seen[r.idx] = st.valueGen
			st.found = append(st.found, int32(r.idx))
		}
	}
	if rs := n.united[vi]; len(rs) != 0 {
		for _, r := range rs {
			if st.member[r.idx] == st.gen && st.seen[r.idx] != st.valueGen && (changed || !r.multi) {
				st.visitAllUnited(pp, n.unitedMask[vi], value, changed, scan)
				break
			}
		}
	}
	for _, c := range n.children {
		if st.all[c.idx] == 0 || c.vars&bit == 0 {
			continue
		}
		mark := len(st.tbuf)
		out, changed, k, osig, ochain := st.step(pp, c, value, scan, &sig, chain)
		st.visitAll(pp, c, out, changed, vi, k, osig, ochain)
		st.truncate(mark)
	}
}
