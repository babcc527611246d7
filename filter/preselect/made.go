package preselect

import (
	"unsafe"

	"github.com/wafguard/wafguard/internal/scratch"
)

// Paths of the trie that make the same string.
//
// Most transformations leave most values as they are: a value without
// '%' comes out of t:urlDecodeUni as it went in, and the screen knows it
// without running the transformation (transform.Triggers). So on a value
// of plain text the CRS's chains t:urlDecodeUni,t:removeWhitespace,
// t:urlDecodeUni,t:jsDecode,t:removeWhitespace and
// t:utf8toUnicode,...,t:removeWhitespace all make the same string:
// t:removeWhitespace of the value as read. Walked path by path, that
// string is made, and scanned by the union, once per path.
//
// What a value has been through is the chain of the transformations that
// changed it, in order (a transformation that left it as it was adds
// nothing): the value's made chain. Two paths with the same made chain
// hold the same string, and a transformation applied to the same string
// makes the same result, whether it changes it or not, and reports the
// same "changed". So the walk of one value keeps, per made chain and
// transformation, what the step made (made): the string, whether it
// changed, its union scan and its made chain. A step that finds its
// (chain, transformation) done already in this value's walk takes that
// instead of transforming and scanning again.
//
// The chains are numbered per phase plan (phasePlan.chainOf), 0 for the
// value as read, up to maxChains; a step past them is not kept (chain -1,
// and so are the steps below it). A string made into the walk's buffer
// (tbuf) stays there for the rest of the value's walk once kept
// (txState.tfloor), up to maxMadeBytes of buffer; past them a step's
// string is not kept, and the buffer is truncated after each path as
// before.

// madeStep is what one step of a value's walk made, for the step's
// (made chain, transformation): valid when gen is the walk's madeGen.
type madeStep struct {
	gen     uint32
	changed bool
	scan    int32
	chain   int32 // the made chain of out
	out     string
	sig     uint64
}

const (
	// maxChains bounds the made chains one phase plan numbers. The CRS's
	// phase 2 has some 60 paths of up to 8 transformations; a few hundred
	// made chains come up in practice.
	maxChains = 1024
	// maxMadeBytes bounds the walk's buffer while it keeps the strings
	// made: past it, a value of many long results walks as if nothing
	// were kept, with its buffer at most one path's results long.
	maxMadeBytes = 64 << 10
)

// tidOf returns the number of transformation name in the plan, adding
// it.
func (pp *phasePlan) tidOf(name string) int32 {
	if t, ok := pp.tids[name]; ok {
		return t
	}
	if pp.tids == nil {
		pp.tids = map[string]int32{}
	}
	t := int32(len(pp.tids))
	pp.tids[name] = t
	return t
}

// chainOf returns the made chain of chain followed by transformation tid,
// numbering it the first time; -1 when the plan numbers maxChains
// already. Screens take turns under the index's lock, as for the memo.
func (pp *phasePlan) chainOf(chain int32, tid int32) int32 {
	if len(pp.chainNext) == 0 {
		pp.chainNext = append(pp.chainNext, nil) // 0: the value as read
	}
	row := pp.chainNext[chain]
	if int(tid) >= len(row) {
		row = append(row, make([]int32, len(pp.tids)+1-len(row))...)
		pp.chainNext[chain] = row
	}
	if c := row[tid]; c != 0 {
		return c
	}
	if len(pp.chainNext) >= maxChains {
		return -1
	}
	c := int32(len(pp.chainNext))
	pp.chainNext = append(pp.chainNext, nil)
	row[tid] = c
	return c
}

// madeFor returns the entry of made chain c in the walk's table.
func (st *txState) madeFor(c int32) *madeStep {
	if int(c) >= len(st.madeSteps) {
		st.madeSteps = append(st.madeSteps, make([]madeStep, int(c)+1-len(st.madeSteps))...)
	}
	return &st.madeSteps[c]
}

// startValue starts the walk of a new value: nothing made yet. It
// returns the length of the buffer to truncate to when the walk ends
// (endValue).
func (st *txState) startValue() int {
	st.madeGen++
	if st.madeGen == 0 {
		// Wrapped: an entry of 2^32 values ago would look current.
		clear(st.madeSteps)
		st.madeGen = 1
	}
	st.tfloor = len(st.tbuf)
	return st.tfloor
}

// endValue drops what the value's walk made.
func (st *txState) endValue(base int) {
	st.tbuf = scratch.Truncate(st.tbuf, base)
	st.tfloor = 0
	// The strings made stay in the table until overwritten, as the
	// buffer they point into stays in the state.
}

// keepMade reports whether s may be kept for the rest of the value's walk,
// and makes it so: s must stay as it is until endValue. A string outside
// the buffer's current array (the value as read, a result in memory of
// its own, a result left in an array the buffer has outgrown) and one
// below tfloor stay. One that reaches above tfloor (a result just made
// into the buffer, the parent's result passed on unchanged, a slice of it
// that t:trim returns) stays when the buffer is at most maxMadeBytes
// long: tfloor rises to the buffer's end, and truncate leaves it there.
// Past that it would be overwritten by the next path, and is not kept.
func (st *txState) keepMade(s string) bool {
	if len(s) == 0 || cap(st.tbuf) == 0 {
		return true
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(st.tbuf)))
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	if p < base || p >= base+uintptr(cap(st.tbuf)) {
		return true
	}
	if int(p-base)+len(s) <= st.tfloor {
		return true
	}
	if len(st.tbuf) > maxMadeBytes {
		return false
	}
	st.tfloor = len(st.tbuf)
	return true
}

// truncate drops the strings a path made after mark, but none kept.
func (st *txState) truncate(mark int) {
	st.tbuf = scratch.Truncate(st.tbuf, max(mark, st.tfloor))
}
