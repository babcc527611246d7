package fastpath

import (
	"slices"
	"unsafe"

	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// pmSet is the verdict of the Aho-Corasick automaton @pm and @pmFromFile
// build (ahocorasick, ASCII case-insensitive, leftmost-longest), decided
// without allocating: the library allocates an iterator, and a prefilter
// state, on every search.
//
// What the library decides: its case insensitivity adds, for each pattern
// byte that is an ASCII letter, the transition on the other case, and
// nothing else; so a value byte matches a pattern byte when both are equal
// once 'A'-'Z' are mapped to 'a'-'z' (asciiLower). Non-ASCII bytes only
// match themselves: 'ſ' (U+017F) is not 's', the Kelvin sign is not 'k'.
// Its leftmost automaton never returns to the start state once it has seen
// a match, so with no empty pattern the first search finds a match exactly
// when one of the patterns occurs in the value: that is what the automaton
// below decides, stopping at the first pattern end it reaches.
//
// An empty pattern is the exception. It matches at offset 0, but the
// library searches from the start state with a prefilter (the bytes that
// start the other patterns, or some rare bytes of theirs, when there are
// at most three such) and gives up when the prefilter finds no candidate
// in the value, even with the empty match in hand: the patterns "" and
// "abc" do not match "xyz". So with an empty pattern the verdict is: the value is
// empty, or it holds one of the prefilter's bytes (every byte when there
// is no prefilter). newPMSet learns those bytes by asking the library
// about each one-byte value.
type pmSet struct {
	// The automaton; pmHit is the state after a pattern's last byte.
	acTable
	// empty is set when one of the patterns is empty; the verdict is then
	// taken from anyOf alone.
	empty bool
	anyOf byteSet
}

// pmHit is the state after a pattern's last byte: the search stops there.
// States after a match are never built.
const pmHit = 1<<24 - 1

// asciiLower maps 'A'-'Z' to 'a'-'z', and leaves every other byte.
func asciiLower(c byte) byte {
	if c-'A' < 26 {
		c += 'a' - 'A'
	}
	return c
}

// trie is the pattern trie newPMSet and NewUnion build their automata
// from: its nodes in the order they were added, the root first.
type trie struct {
	nodes []tnode
}

type tnode struct {
	kid     int32 // the first child, -1 for none
	sibling int32 // the next child of the same parent, -1 for none
	last    int32 // the last child added, -1 for none
	label   byte  // the byte into the node (lower-cased)
	end     bool  // a pattern ends at the node
}

// newTrie returns a trie with its root, with room for size nodes.
func newTrie(size int) trie {
	t := trie{nodes: make([]tnode, 0, size)}
	t.add(0)
	return t
}

func (t *trie) add(label byte) int32 {
	t.nodes = append(t.nodes, tnode{kid: -1, sibling: -1, last: -1, label: label})
	return int32(len(t.nodes) - 1)
}

// addChild adds a node on byte c as n's last child and returns it.
func (t *trie) addChild(n int32, c byte) int32 {
	k := t.add(c)
	if l := t.nodes[n].last; l >= 0 {
		t.nodes[l].sibling = k
	} else {
		t.nodes[n].kid = k
	}
	t.nodes[n].last = k
	return k
}

// child is the child of n on byte c, -1 when there is none.
func (t *trie) child(n int32, c byte) int32 {
	for k := t.nodes[n].kid; k >= 0; k = t.nodes[k].sibling {
		if t.nodes[k].label == c {
			return k
		}
	}
	return -1
}

// breadthFirst walks the trie breadth first from the root and computes
// the Aho-Corasick failure link of every node it reaches: the node of the
// longest proper suffix of its path that is a path of the trie. For each
// child k, once fail[k] is known, queue(k, fail) says whether to walk on
// from k. It returns the links, the nodes reached in order (the root
// first), and the root's child on each byte (-1 for none).
func (t *trie) breadthFirst(queue func(k int32, fail []int32) bool) (fail, order []int32, rootKid [256]int32) {
	fail = make([]int32, len(t.nodes))
	for c := range rootKid {
		rootKid[c] = -1
	}
	for k := t.nodes[0].kid; k >= 0; k = t.nodes[k].sibling {
		rootKid[t.nodes[k].label] = k
	}
	// goTo is the node after byte c from node m on the failure path.
	goTo := func(m int32, c byte) int32 {
		for m != 0 {
			if k := t.child(m, c); k >= 0 {
				return k
			}
			m = fail[m]
		}
		if k := rootKid[c]; k >= 0 {
			return k
		}
		return 0
	}
	order = make([]int32, 1, len(t.nodes))
	for qi := 0; qi < len(order); qi++ {
		m := order[qi]
		for k := t.nodes[m].kid; k >= 0; k = t.nodes[k].sibling {
			if m != 0 {
				fail[k] = goTo(fail[m], t.nodes[k].label)
			}
			if queue(k, fail) {
				order = append(order, k)
			}
		}
	}
	return fail, order, rootKid
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// newPMSet builds the decision of the library's automaton for patterns,
// which ac builds (only called when a pattern is empty). It returns nil
// when the patterns are too long for its state numbers (16 MiB in all),
// which leaves the decision to the library.
func newPMSet(patterns []string, ac func() ahocorasick.AhoCorasick) *pmSet {
	size := 0
	for _, p := range patterns {
		size += len(p)
	}
	if size >= pmHit {
		return nil
	}
	s := &pmSet{}
	// The lower-cased patterns, in one buffer.
	buf := make([]byte, 0, size)
	lowered := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if p == "" {
			s.empty = true
			continue
		}
		start := len(buf)
		for i := 0; i < len(p); i++ {
			buf = append(buf, asciiLower(p[i]))
		}
		lowered = append(lowered, unsafe.String(&buf[start], len(p)))
	}
	if s.empty {
		var one [1]byte
		for c := range 256 {
			one[0] = byte(c)
			s.anyOf[c] = ac().IterByte(one[:]).Next() != nil
		}
		return s
	}
	// Sorted, a node's children are added in byte order, and a pattern
	// shares with the ones before it at most the path of the one just
	// before it: the child to follow is always the last one added.
	slices.Sort(lowered)
	lowered = slices.Compact(lowered)
	// Each pattern adds at most the nodes past what it shares with the
	// one before it.
	nodes := 1
	for i, p := range lowered {
		nodes += len(p)
		if i > 0 {
			nodes -= commonPrefix(lowered[i-1], p)
		}
	}
	t := newTrie(nodes)
	for _, p := range lowered {
		n := int32(0)
		for i := 0; i < len(p) && !t.nodes[n].end; i++ {
			if k := t.nodes[n].last; k >= 0 && t.nodes[k].label == p[i] {
				n = k
				continue
			}
			n = t.addChild(n, p[i])
		}
		// A pattern with another as a prefix adds nothing: the search
		// stops at the shorter one.
		t.nodes[n].end = true
	}

	// Breadth first: the failure link of each node and whether the node
	// ends a pattern, itself or through its failure links (hit). Only the
	// nodes that do not are states; the children of a hit are never
	// reached.
	hit := make([]bool, len(t.nodes))
	fail, queue, rootKid := t.breadthFirst(func(k int32, fail []int32) bool {
		hit[k] = t.nodes[k].end || hit[fail[k]]
		return !hit[k]
	})
	id := make([]uint32, len(t.nodes))
	edges := 0
	for qi, m := range queue {
		id[m] = uint32(qi)
		for k := t.nodes[m].kid; k >= 0 && m != 0; k = t.nodes[k].sibling {
			edges++
		}
	}
	target := func(k int32) uint32 {
		if hit[k] {
			return pmHit
		}
		return id[k]
	}
	s.first = make([]uint32, len(queue)+1)
	s.fail = make([]uint32, len(queue))
	s.edges = make([]uint32, 0, edges)
	for qi, m := range queue {
		s.first[qi] = uint32(len(s.edges))
		s.fail[qi] = id[fail[m]]
		if m == 0 {
			continue
		}
		for k := t.nodes[m].kid; k >= 0; k = t.nodes[k].sibling {
			s.edges = append(s.edges, target(k)<<8|uint32(t.nodes[k].label))
		}
	}
	s.first[len(queue)] = uint32(len(s.edges))
	for c := range 256 {
		if k := rootKid[asciiLower(byte(c))]; k >= 0 {
			s.root[c] = target(k)
		}
	}
	s.densify()
	return s
}

// match reports whether the library's automaton finds a match in value.
func (s *pmSet) match(value string) bool {
	if s.empty {
		return value == "" || s.anyOf.in(value)
	}
	st := uint32(0)
	for i := 0; i < len(value); i++ {
		c := value[i]
		if st == 0 {
			st = s.root[c]
		} else {
			st = s.next(st, c)
		}
		if st == pmHit {
			return true
		}
	}
	return false
}

// acTable is an Aho-Corasick automaton over ASCII-lower-cased bytes, its
// states numbered breadth first from 0, the start.
type acTable struct {
	// root is the state after reading each byte in the start state.
	root [256]uint32
	// The transitions of state s are edges[first[s]:first[s+1]], each the
	// target state<<8 | the lower-cased byte; state 0 has none (root
	// holds its transitions).
	first []uint32
	edges []uint32
	// fail is, for each state, the state of its longest proper suffix that
	// is a state (the failure link).
	fail []uint32
	// States 1 to dense, the shallowest (densify), also have a row of
	// what next returns for each class of bytes: rows[(s-1)*classes +
	// class[c]].
	dense   uint32
	classes uint32
	class   [256]uint8
	rows    []uint32
}

// maxDenseRows is the most states of one automaton that get a row. Those
// that do are the states one and two bytes deep, where a scan of text
// spends most of its steps (each byte of a word starts or continues a
// literal's prefix, then falls back). The CRS's largest union has 67
// states one byte deep and 375 two bytes deep.
const maxDenseRows = 512

// densify gives the states one and two bytes deep (a prefix of the
// breadth-first order, at most maxDenseRows) their rows. Bytes that
// lower-case to the same byte, and those no transition reads, fall in one
// class each.
func (a *acTable) densify() {
	var read [256]bool // by lower-cased byte
	for _, e := range a.edges {
		read[byte(e)] = true
	}
	for c := range 256 {
		if a.root[c] != 0 {
			read[asciiLower(byte(c))] = true
		}
	}
	// rep holds a byte of each class; class 0 is the bytes nothing reads.
	var rep []byte
	for c := range 256 {
		if !read[asciiLower(byte(c))] {
			rep = append(rep, byte(c))
			break
		}
	}
	if len(rep) == 0 || len(a.fail) < 2 {
		return
	}
	for c := range 256 {
		if read[c] {
			a.class[c] = uint8(len(rep))
			rep = append(rep, byte(c))
		}
	}
	for c := range 256 {
		a.class[c] = a.class[asciiLower(byte(c))]
	}
	// The states one and two bytes deep: breadth first, a prefix.
	depth := make([]uint8, len(a.fail))
	n := uint32(0)
	for st := 1; st < len(a.fail); st++ {
		if depth[st] == 0 {
			depth[st] = 1
		}
		if depth[st] > 2 || st > maxDenseRows {
			break
		}
		n = uint32(st)
		for _, e := range a.edges[a.first[st]:a.first[st+1]] {
			if t := e >> 8; int(t) < len(depth) {
				depth[t] = depth[st] + 1
			}
		}
	}
	// A state's row is its failure link's (the root's transitions for a
	// link to the root), with its own transitions over it: next's answer,
	// since a link is shallower, so earlier in the order, and has its row
	// already.
	k := uint32(len(rep))
	rows := make([]uint32, int(n*k))
	for s := uint32(1); s <= n; s++ {
		row := rows[(s-1)*k : s*k]
		if f := a.fail[s]; f == 0 {
			for cl, b := range rep {
				row[cl] = a.root[b]
			}
		} else {
			copy(row, rows[(f-1)*k:f*k])
		}
		for _, e := range a.edges[a.first[s]:a.first[s+1]] {
			row[a.class[byte(e)]] = e >> 8
		}
	}
	a.rows, a.classes, a.dense = rows, k, n
}

// next is the state after byte c in state st (not 0).
func (a *acTable) next(st uint32, c byte) uint32 {
	lc := uint32(asciiLower(c))
	for st != 0 {
		if st <= a.dense {
			return a.rows[(st-1)*a.classes+uint32(a.class[c])]
		}
		for _, e := range a.edges[a.first[st]:a.first[st+1]] {
			if e&0xff == lc {
				return e >> 8
			}
		}
		st = a.fail[st]
	}
	return a.root[c]
}
