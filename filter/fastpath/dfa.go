package fastpath

import (
	"regexp/syntax"
	"slices"
	"sync"
	"unicode/utf8"
)

// dfa answers "does the regexp match anywhere in s" with a deterministic
// automaton built lazily from the compiled program (regexp/syntax.Prog),
// one state at a time as input needs it. Go's regexp runs large patterns
// (the CRS's command and keyword lists) on its NFA simulation, which
// touches every live thread for every byte; once the states a kind of
// input visits exist, the automaton costs two array loads per ASCII byte.
//
// Semantics are those of regexp.MatchString on the same program:
//
//   - input is read as runes the way regexp reads it (UTF-8, an invalid
//     byte is utf8.RuneError of width 1);
//   - a state is the set of instructions still alive after the previous
//     rune (its kernel) plus the kind of that rune (start of text, newline,
//     word character, other): that kind and the next rune decide which
//     empty-width assertions (^ $ \A \z \b \B) hold between them
//     (syntax.EmptyOpContext), so the kernel's closure is taken only when
//     the next rune is known;
//   - the search is unanchored: the program's start is in every kernel.
//
// ASCII runes go through a per-pattern byte class table (bytes no
// instruction tells apart share a transition); other runes are stepped
// without a cached transition. The cache is bounded: past dfaMaxStates
// states, or when all automata together hold more than dfaBudget bytes,
// the automaton is emptied and the call falls back to the regexp.
//
// A dfa is safe for concurrent use (a mutex; uncontended on a proxy-wasm
// VM, which runs one stream callback at a time).
type dfa struct {
	mu     sync.Mutex
	expr   string
	broken bool // expr does not compile
	prog   *syntax.Prog
	class  [utf8.RuneSelf]uint8 // ASCII byte -> class
	rep    []rune               // class -> one byte of it, as a rune
	states map[string]*dfaState
	start  *dfaState
	bytes  int // held by states, counted in dfaHeld too
	// scratch, reused between transitions
	seen  sparseSet
	stack []uint32
	runes []uint32
	next  []uint32
	key   []byte
}

type dfaState struct {
	kernel []uint32
	ctx    uint8       // kind of the previous rune: ctxStart...
	next   []*dfaState // per byte class; nil: not built yet
	end    int8        // match at end of text: 0 unknown, 1 yes, -1 no
}

// Kinds of the previous rune, with a representative for EmptyOpContext.
const (
	ctxStart uint8 = iota
	ctxNewline
	ctxWord
	ctxOther
)

var ctxRune = [...]rune{ctxStart: -1, ctxNewline: '\n', ctxWord: 'a', ctxOther: ' '}

func runeCtx(r rune) uint8 {
	switch {
	case r == '\n':
		return ctxNewline
	case syntax.IsWordChar(r):
		return ctxWord
	}
	return ctxOther
}

// matched is the transition target meaning "a match ends here".
var matched = &dfaState{}

const (
	// dfaMaxStates bounds one automaton; a pattern that needs more for an
	// input is matched by the regexp instead, after its cache is emptied.
	dfaMaxStates = 4096
	// dfaBudget bounds the states of all automata of a VM together.
	dfaBudget = 24 << 20
)

// dfaHeld is what all automata hold, guarded by dfaHeldMu.
var (
	dfaHeldMu sync.Mutex
	dfaHeld   int
)

// newLazyDFA prepares the automaton for expr. Nothing is compiled or built
// until the first match: most patterns of a rule set never see a value that
// passes their literal filter, and VM start is on the critical path of a
// configuration reload.
func newLazyDFA(expr string) *dfa {
	d := &dfa{expr: expr}
	d.reset()
	return d
}

// prepare compiles the program and makes the tables on first use; false
// if the pattern does not compile (the regexp then answers).
func (d *dfa) prepare() bool {
	if d.rep != nil {
		return true
	}
	if d.broken {
		return false
	}
	prog, err := compileProg(d.expr)
	if err != nil {
		d.broken = true
		return false
	}
	d.prog = prog
	d.seen = newSparseSet(len(d.prog.Inst))
	d.classify()
	return true
}

// classify splits the ASCII bytes into classes that every rune instruction
// and every empty-width context treat alike.
func (d *dfa) classify() {
	// masks: for each distinct rune instruction, the ASCII bytes it takes.
	seenMask := map[[2]uint64]bool{}
	var masks [][2]uint64
	for i := range d.prog.Inst {
		in := &d.prog.Inst[i]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		default:
			continue
		}
		var m [2]uint64
		for b := rune(0); b < utf8.RuneSelf; b++ {
			if instMatches(in, b) {
				m[b>>6] |= 1 << (b & 63)
			}
		}
		if !seenMask[m] {
			seenMask[m] = true
			masks = append(masks, m)
		}
	}
	ids := map[string]uint8{}
	sigb := make([]byte, 1+(len(masks)+7)/8)
	for b := rune(0); b < utf8.RuneSelf; b++ {
		clear(sigb)
		sigb[0] = runeCtx(b)
		for j, m := range masks {
			if m[b>>6]&(1<<(b&63)) != 0 {
				sigb[1+j/8] |= 1 << (j % 8)
			}
		}
		id, ok := ids[string(sigb)]
		if !ok {
			id = uint8(len(d.rep))
			ids[string(sigb)] = id
			d.rep = append(d.rep, b)
		}
		d.class[b] = id
	}
}

// instMatches is regexp's test for whether a rune instruction takes r.
func instMatches(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRune:
		return in.MatchRune(r)
	case syntax.InstRune1:
		return r == in.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return false
}

// reset drops every state and gives their memory back to the budget.
func (d *dfa) reset() {
	dfaHeldMu.Lock()
	dfaHeld -= d.bytes
	dfaHeldMu.Unlock()
	d.bytes = 0
	d.states = map[string]*dfaState{}
	d.start = nil
}

// match reports whether the program matches somewhere in s; ok is false
// when the cache ran out, and the caller must ask the regexp.
func (d *dfa) match(s string) (m, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepare() {
		return false, false
	}
	if d.start == nil {
		d.next = append(d.next[:0], uint32(d.prog.Start))
		if d.start = d.intern(d.next, ctxStart); d.start == nil {
			return false, false
		}
	}
	st := d.start
	for i := 0; i < len(s); {
		var nx *dfaState
		if c := s[i]; c < utf8.RuneSelf {
			cl := d.class[c]
			nx = st.next[cl]
			if nx == nil {
				nx = d.step(st, d.rep[cl])
				if nx == nil {
					return false, false
				}
				st.next[cl] = nx
			}
			i++
		} else {
			r, w := utf8.DecodeRuneInString(s[i:])
			nx = d.step(st, r)
			if nx == nil {
				return false, false
			}
			i += w
		}
		if nx == matched {
			return true, true
		}
		st = nx
	}
	if st.end == 0 {
		st.end = -1
		if d.closure(st, syntax.EmptyOpContext(ctxRune[st.ctx], -1)) {
			st.end = 1
		}
	}
	return st.end > 0, true
}

// closure follows st's kernel through the instructions that consume no
// input, given the empty-width conditions that hold, into d.runes (the
// rune instructions reached). It reports whether a match is reached.
func (d *dfa) closure(st *dfaState, flags syntax.EmptyOp) bool {
	d.seen.clear()
	d.runes = d.runes[:0]
	d.stack = append(d.stack[:0], st.kernel...)
	for len(d.stack) > 0 {
		pc := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if !d.seen.add(pc) {
			continue
		}
		in := &d.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			d.stack = append(d.stack, in.Arg, in.Out)
		case syntax.InstCapture, syntax.InstNop:
			d.stack = append(d.stack, in.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^flags == 0 {
				d.stack = append(d.stack, in.Out)
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			d.runes = append(d.runes, pc)
		}
	}
	return false
}

// step is the transition of st on r: matched, the next state, or nil when
// the cache is full (it has then been emptied).
func (d *dfa) step(st *dfaState, r rune) *dfaState {
	if d.closure(st, syntax.EmptyOpContext(ctxRune[st.ctx], r)) {
		return matched
	}
	d.seen.clear()
	d.next = d.next[:0]
	for _, pc := range d.runes {
		in := &d.prog.Inst[pc]
		if instMatches(in, r) && d.seen.add(in.Out) {
			d.next = append(d.next, in.Out)
		}
	}
	if d.seen.add(uint32(d.prog.Start)) {
		d.next = append(d.next, uint32(d.prog.Start))
	}
	slices.Sort(d.next)
	return d.intern(d.next, runeCtx(r))
}

// intern returns the state for (kernel, ctx), making it if new; nil when
// the cache is full.
func (d *dfa) intern(kernel []uint32, ctx uint8) *dfaState {
	d.key = append(d.key[:0], ctx)
	for _, pc := range kernel {
		d.key = append(d.key, byte(pc), byte(pc>>8), byte(pc>>16), byte(pc>>24))
	}
	if st, ok := d.states[string(d.key)]; ok {
		return st
	}
	size := 2*len(d.key) + 8*len(d.rep) + 4*len(kernel) + 128
	dfaHeldMu.Lock()
	full := len(d.states) >= dfaMaxStates || dfaHeld+size > dfaBudget
	if !full {
		dfaHeld += size
	}
	dfaHeldMu.Unlock()
	if full {
		d.reset()
		return nil
	}
	d.bytes += size
	st := &dfaState{kernel: slices.Clone(kernel), ctx: ctx, next: make([]*dfaState, len(d.rep))}
	d.states[string(d.key)] = st
	return st
}

// sparseSet is a set of instruction indexes with O(1) clear.
type sparseSet struct {
	sparse []uint32
	dense  []uint32
}

func newSparseSet(n int) sparseSet {
	return sparseSet{sparse: make([]uint32, n), dense: make([]uint32, 0, n)}
}

func (s *sparseSet) clear() { s.dense = s.dense[:0] }

// add inserts x and reports whether it was absent.
func (s *sparseSet) add(x uint32) bool {
	i := s.sparse[x]
	if int(i) < len(s.dense) && s.dense[i] == x {
		return false
	}
	s.sparse[x] = uint32(len(s.dense))
	s.dense = append(s.dense, x)
	return true
}

// compileProg compiles expr as regexp.Compile does (Perl syntax,
// simplified), for the automaton, with its counted repeats flattened
// (flattenRepeats): the same strings match, and the compiler does not
// recurse once per optional copy.
func compileProg(expr string) (*syntax.Prog, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(flattenRepeats(re).Simplify())
	if err != nil {
		return nil, err
	}
	ownRunes(prog)
	return prog, nil
}

// ownRunes moves the runes of prog's instructions into one array of its
// own. syntax.Compile shares them with the parsed pattern, and a literal's
// rune lives inside its syntax node, so a prog kept for the VM's life kept
// every node of its pattern's tree too (0.7 MiB for the CRS patterns a
// pool pass compiles).
func ownRunes(prog *syntax.Prog) {
	n := 0
	for i := range prog.Inst {
		n += len(prog.Inst[i].Rune)
	}
	runes := make([]rune, 0, n)
	for i := range prog.Inst {
		in := &prog.Inst[i]
		if len(in.Rune) == 0 {
			continue
		}
		start := len(runes)
		runes = append(runes, in.Rune...)
		in.Rune = runes[start:len(runes):len(runes)]
	}
}
