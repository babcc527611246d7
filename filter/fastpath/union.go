package fastpath

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// Union answers, for several operators at once and in one pass over a
// value, which of them may match it: for an @rx, the same answer as its
// literal filter's mayMatch; for the other operators it stands in for,
// a necessary condition (unionLiterals). That costs one scan instead of
// one per operator. A screen that judges many rules on the same value
// (filter/preselect) asks it first, and runs an operator's own test
// (Confirm) only when the union names it.
//
// It is an Aho-Corasick automaton over the literals of every operator,
// lower-cased (the filters compare ASCII letters case-insensitively),
// whose states list the operators one of whose literals ends there. A value holding U+212A or U+017F, which fold to
// ASCII letters, may match every filter, as mayMatch says.
type Union struct {
	acTable
	// outOf[s] is the set of operators (their index in the list NewUnion
	// got) with a literal that ends at state s, itself or through its
	// failure links: sets[outOf[s]*words:][:words], a bit set; set 0 is
	// empty. States share sets: few distinct ones exist.
	outOf []uint32
	sets  []uint64
	words int
	n     int
}

// Filtered reports whether op is an operator this package built that a
// Union can stand in for (unionLiterals).
func Filtered(op plugintypes.Operator) bool {
	_, ok := unionLiterals(op)
	return ok
}

// unionLiterals returns the literals, lower-cased, one of which a value
// must hold (ASCII case aside) for op to match it:
//   - an @rx: those of its literal filter;
//   - a @pm or @pmFromFile, when none of its patterns is empty (an empty
//     one makes the verdict the library's prefilter's, see pmSet):
//     pmLiterals;
//   - a @validateByteRange with an argument: the bytes out of its range,
//     when there are at most maxUnionBytes;
//   - a byte pattern with first bytes (firstBytes): those, when there are
//     at most maxUnionBytes.
//
// Upper-case bytes are lower-cased, as the union reads values: the
// literals may then let through more than the operator's own test, never
// less.
func unionLiterals(op plugintypes.Operator) ([]string, bool) {
	switch o := op.(type) {
	case *rx:
		if o.filter != nil {
			return o.filter.lits, true
		}
	case *pm:
		if o.minLen > 0 && o.set != nil && !o.set.empty {
			// Worked out once per list: the rules that share it share
			// its compiledPM.
			o.unionOnce.Do(func() { o.unionLits = pmLiterals(o.patterns) })
			return o.unionLits, true
		}
	case *byteRange:
		if !o.all {
			return byteLiterals(func(c byte) bool { return !o.allowed[c] })
		}
	case *byteRx:
		if o.first != nil {
			return byteLiterals(func(c byte) bool { return o.first[c] })
		}
	}
	return nil, false
}

// pmLiterals returns the literals a union takes for a list of patterns:
// the patterns themselves when they hold at most maxUnionPM bytes, else
// a piece of each, its rarest (litOdds) of pmPiece bytes.
//
// Every value a union scans pays for its size, while a list scans only
// the values of its own rule: the CRS's long lists (of files, of shell
// commands: 7-14 KB) as they are would make the scans of the other values
// slower by more than they save. Their pieces are few (709 shell commands
// and variables take 29, most with a $ or a /), and a value holds a
// pattern only if it holds its piece; the rule's own list then decides.
func pmLiterals(patterns []string) []string {
	lits := make([]string, len(patterns))
	whole := patternBytes(patterns) <= maxUnionPM
	for i, p := range patterns {
		p = lowerASCII(p)
		if !whole && len(p) > pmPiece {
			best, odds := p[:pmPiece], litOdds(p[:pmPiece])
			for j := 1; j+pmPiece <= len(p); j++ {
				if o := litOdds(p[j : j+pmPiece]); o < odds {
					best, odds = p[j:j+pmPiece], o
				}
			}
			p = best
		}
		lits[i] = p
	}
	if whole {
		return lits
	}
	return minimal(lits)
}

// maxUnionPM is the most bytes of patterns a union takes whole from one
// list; pmPiece is the length of the pieces it takes from a longer one.
const (
	maxUnionPM = 4096
	pmPiece    = 4
)

// patternBytes is the length of the patterns together.
func patternBytes(patterns []string) int {
	n := 0
	for _, p := range patterns {
		n += len(p)
	}
	return n
}

// maxUnionBytes is the most one-byte literals unionLiterals gives an
// operator.
const maxUnionBytes = 32

// byteLiterals returns the bytes in, lower-cased, as one-byte literals,
// when there are at most maxUnionBytes.
func byteLiterals(in func(c byte) bool) ([]string, bool) {
	var seen [256]bool
	var lits []string
	for c := range 256 {
		if l := asciiLower(byte(c)); in(byte(c)) && !seen[l] {
			seen[l] = true
			lits = append(lits, string([]byte{l}))
		}
	}
	return lits, len(lits) > 0 && len(lits) <= maxUnionBytes
}

// lowerASCII maps the ASCII upper-case letters of s to lower case.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = asciiLower(b[j])
			}
			return string(b)
		}
	}
	return s
}

// Confirm returns the match decision of an operator a Union stands in for
// (Filtered), for a value the union may match.
func Confirm(op plugintypes.Operator) func(string) bool {
	switch o := op.(type) {
	case *rx:
		return o.matches
	case *pm:
		return o.judge
	case *byteRange:
		return o.matches
	case *byteRx:
		return o.matches
	}
	panic("fastpath: Confirm of an operator no union stands in for")
}

// NewUnion builds the union of the literals of ops (unionLiterals), each
// of which must be Filtered. It takes at most 65,536 operators.
func NewUnion(ops []plugintypes.Operator) *Union {
	u := &Union{n: len(ops), words: (len(ops) + 63) / 64}
	// Sorted, a literal shares with the ones before it at most the path
	// of the one just before it, and a node's children are added in byte
	// order: the child to follow is always the last one added.
	type litOf struct {
		lit string
		op  int
	}
	var all []litOf
	size := 1
	for i, op := range ops {
		lits, _ := unionLiterals(op)
		for _, lit := range lits {
			all = append(all, litOf{lit, i})
			size += len(lit)
		}
	}
	slices.SortFunc(all, func(a, b litOf) int { return strings.Compare(a.lit, b.lit) })
	t := newTrie(size)
	// out holds, per trie node, the set of the operators with a literal
	// that ends there: words bits each.
	w := u.words
	out := make([]uint64, size*w)
	for _, l := range all {
		n := int32(0)
		for j := 0; j < len(l.lit); j++ {
			if k := t.nodes[n].last; k >= 0 && t.nodes[k].label == l.lit[j] {
				n = k
				continue
			}
			n = t.addChild(n, l.lit[j])
		}
		out[int(n)*w+l.op>>6] |= 1 << (l.op & 63)
	}
	// Breadth first: failure links, and the outputs of each state, its
	// own and its failure link's (computed before it).
	fail, queue, rootKid := t.breadthFirst(func(int32, []int32) bool { return true })
	n := len(t.nodes)
	id := make([]uint32, n)
	u.first = make([]uint32, len(queue)+1)
	u.fail = make([]uint32, len(queue))
	u.outOf = make([]uint32, len(queue))
	u.sets = make([]uint64, w)       // set 0, empty
	u.edges = make([]uint32, 0, n-1) // one per node but the root
	setID := map[string]uint32{}
	for qi, m := range queue {
		id[m] = uint32(qi)
	}
	for qi, m := range queue {
		set := out[int(m)*w : int(m+1)*w]
		if m != 0 {
			for i, bits := range out[int(fail[m])*w : int(fail[m]+1)*w] {
				set[i] |= bits
			}
		}
		u.first[qi] = uint32(len(u.edges))
		u.fail[qi] = id[fail[m]]
		if slices.ContainsFunc(set, func(b uint64) bool { return b != 0 }) {
			key := string(unsafe.Slice((*byte)(unsafe.Pointer(&set[0])), 8*len(set)))
			sid, ok := setID[key]
			if !ok {
				sid = uint32(len(u.sets) / w)
				setID[key] = sid
				u.sets = append(u.sets, set...)
			}
			u.outOf[qi] = sid
		}
		if m == 0 {
			continue
		}
		for k := t.nodes[m].kid; k >= 0; k = t.nodes[k].sibling {
			u.edges = append(u.edges, id[k]<<8|uint32(t.nodes[k].label))
		}
	}
	u.first[len(queue)] = uint32(len(u.edges))
	u.sets = slices.Clip(u.sets)
	for c := range 256 {
		if k := rootKid[asciiLower(byte(c))]; k >= 0 {
			u.root[c] = id[k]
		}
	}
	u.densify()
	return u
}

// Scan sets bit i of hits (len(hits) ≥ (n+63)/64 words, cleared by the
// caller) for every operator i whose filter may match value, and reports
// whether it set any.
func (u *Union) Scan(value string, hits []uint64) bool {
	any := false
	st := uint32(0)
	// The shallow states' rows, read here rather than through next: most
	// bytes of a text move between those states.
	rows, classes, dense, outOf := u.rows, u.classes, u.dense, u.outOf
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c >= 0x80 && foldsToASCII(value[i:]) {
			for j := 0; j < u.n; j++ {
				hits[j>>6] |= 1 << (j & 63)
			}
			return u.n > 0
		}
		switch {
		case st == 0:
			st = u.root[c]
		case st <= dense:
			st = rows[(st-1)*classes+uint32(u.class[c])]
		default:
			st = u.next(st, c)
		}
		if sid := outOf[st]; sid != 0 {
			for w, bits := range u.sets[int(sid)*u.words:][:u.words] {
				hits[w] |= bits
			}
			any = true
		}
	}
	return any
}

// Size is the memory the automaton holds, in bytes.
func (u *Union) Size() int {
	return 256*4 + 4*(len(u.first)+len(u.edges)+len(u.fail)+len(u.outOf)) + 8*len(u.sets)
}
