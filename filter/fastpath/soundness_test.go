package fastpath

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/libinjection-go"
	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
	"rsc.io/binaryregexp"
)

// Soundness: this package's filters may let through values the operator
// does not match (a regexp runs after them), but they must never reject a
// value Coraza's own operator matches: the rule preselection
// (filter/preselect) removes a rule whose filter rejects every value it
// sees, so such a rejection is a WAF bypass. The tests here take Coraza
// v3.8.1's operators as the truth, built the way Coraza builds them
// (refRx, refPM; libinjection itself for @detectSQLi and @detectXSS), and
// check, for every value one of them matches:
//
//  1. the literal filter of an @rx (literalFilter.mayMatch) lets it
//     through, and so do the first bytes of a byte pattern (firstBytes);
//  2. the union of all the CRS's filtered operators (Union, as the
//     preselection builds it) reports the operator's slot, and its
//     contract holds: for an @rx its answer is mayMatch's, it reads values
//     ASCII-lower-cased (the same hits for any ASCII case of the value),
//     and a prefix or suffix of a value hits no slot the value does not
//     (the preselection reuses a value's scan for those);
//  3. the operator itself (Judge, Evaluate without capture) matches; on
//     a value Coraza's does not match, it must not either.
//
// The values are large and adversarial: a match drawn from the pattern's
// own syntax tree (sample), or one of a list's patterns, set in up to
// 256 KB of runs of one byte, repeats of a seed, near misses of the
// literals (a byte changed, cut short by one, split by a separator or a
// UTF-8 fragment, a look-alike rune that does not fold), with its case
// changed, its k and s turned into U+212A and U+017F (which Go's (?i)
// folds to them), invalid UTF-8 and NUL bytes around it. Each value is
// also checked with every occurrence of the literals broken
// (breakLiterals): the nearest miss, which a sound filter rejects and
// which Coraza's operator must then not match.
//
// TestSoundness_CRS runs a fixed set of such values; FuzzSoundnessRx,
// FuzzSoundnessPM and FuzzSoundnessInject build them from a fuzzed seed
// and shape. TestSoundness_referencesAreCoraza checks the references
// against Coraza's built-in operators in a WAF.

// soundMaxValue is the largest value the tests build.
const soundMaxValue = 256 << 10

// rxNeedsBytes reports whether Coraza v3.8.1's @rx compiles expr with
// rsc.io/binaryregexp instead of regexp: when expr, its \xHH and
// \x{HH} escapes read as the bytes they name, is not valid UTF-8.
// TestSoundness_referencesAreCoraza checks the verdicts it leads to
// against Coraza's own operator.
func rxNeedsBytes(expr string) bool {
	b := make([]byte, 0, len(expr))
	for i := 0; i < len(expr); i++ {
		if expr[i] == '\\' && i+3 < len(expr) && expr[i+1] == 'x' {
			hex, skip := expr[i+2:i+4], 3
			if expr[i+2] == '{' {
				if end := strings.IndexByte(expr[i:], '}'); end > 3 {
					hex, skip = expr[i+3:i+end], end
				}
			}
			if v, err := strconv.ParseUint(hex, 16, 8); err == nil {
				b = append(b, byte(v))
				i += skip
				continue
			}
		}
		b = append(b, expr[i])
	}
	return !utf8.Valid(b)
}

// refRx is Coraza v3.8.1's @rx verdict for arg, without its optional
// prefilter (SecRxPreFilter): the regexp of "(?sm)"+arg, or the byte
// regexp of arg alone when the escapes name bytes that are not UTF-8.
func refRx(arg string) (func(string) bool, error) {
	data := "(?sm)" + arg
	if rxNeedsBytes(data) {
		re, err := binaryregexp.Compile(arg)
		if err != nil {
			return nil, err
		}
		return re.MatchString, nil
	}
	re, err := regexp.Compile(data)
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

// refPM is Coraza v3.8.1's @pm (dfa) or @pmFromFile verdict for patterns,
// lower-cased as Coraza hands them to the library: the same library,
// options and shortest-pattern cut.
func refPM(patterns []string, dfa bool) func(string) bool {
	builder := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{
		AsciiCaseInsensitive: true,
		MatchOnlyWholeWords:  false,
		MatchKind:            ahocorasick.LeftMostLongestMatch,
		DFA:                  dfa,
	})
	ac := builder.Build(patterns)
	minLen := 0
	for _, p := range patterns {
		if p == "" {
			minLen = 0
			break
		}
		if minLen == 0 || len(p) < minLen {
			minLen = len(p)
		}
	}
	return func(v string) bool {
		return len(v) >= minLen && ac.Iter(v).Next() != nil
	}
}

// corazaPMFromFileLines is how Coraza v3.8.1 reads a @pmFromFile list.
func corazaPMFromFileLines(data []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		// bufio.Scanner drops a trailing \r; TrimSpace would anyway.
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		lines = append(lines, strings.ToLower(l))
	}
	return lines
}

const (
	kindRx = iota
	kindByteRx
	kindPM
	kindSQLi
	kindXSS
)

// soundCase is one operator: Coraza's verdict (ref, built on first use:
// a @pmFromFile list's automaton takes a while), this package's operator
// and what the values are made from.
type soundCase struct {
	name string
	kind int
	// opCase is the operator's name in Coraza and its argument.
	opCase
	op plugintypes.Operator
	// judge is what a screen asks (Judge).
	judge   func(string) bool
	refOnce sync.Once
	mkRef   func() func(string) bool
	ref     func(string) bool
	// filter is the @rx's literal filter (nil: none); first the byte
	// pattern's first bytes (nil: none).
	filter *literalFilter
	first  *byteSet
	// tree samples matches of a pattern (nil: none); asBytes writes its
	// runes below 256 as single bytes (a byte pattern).
	tree    *syntax.Regexp
	asBytes bool
	// pats are the patterns of a list, or attack strings for libinjection.
	pats []string
	// lits are what near misses are made of: the filter's literals, the
	// union's for a list.
	lits []string
	slot int // in the union, -1 for none
}

func (c *soundCase) reference(v string) bool {
	c.refOnce.Do(func() { c.ref = c.mkRef() })
	return c.ref(v)
}

// soundSet is the CRS's @rx, @pm and @pmFromFile operators, hand-written
// patterns aimed at case folding, libinjection, and the union of all the
// filtered ones with the CRS's @validateByteRange, as a screen builds it.
type soundSet struct {
	rx, pm, inject []*soundCase
	all            []*soundCase
	union          *Union
	unionOps       []plugintypes.Operator
	unionRx        []*rx // the union's @rx operators, by slot; nil for others
	words          int
}

// handRx are patterns aimed at the folding runes, assertions and gaps.
var handRx = []string{
	`(?i)kelvin`, `(?i)union\s+select`, `(?i)\bask\b`, `(?i)[k-s]{2}x`, `(?i)(?:s|k)+y`, `x(?i:sk)y`,
	`(?i)b["'\\]*u["'\\]*s["'\\]*y`, `(?i)[Ss][Kk]`, `(?i)^ss$`, `(?i)(?:^|[^a-z])kiss(?:$|[^a-z])`,
	`(?i)(?:\.\./|\.\.\\)+etc`, `(?i)on(?:load|error|mouseover)\s*=`, `[\x{212a}a]b`, `(?i)[\x{212a}]b`,
	`(?i)java\x00script`, `(?i)sel(?:ect)?\s+\*`, `(?i)a{2,4}k`, `(?i)\x{17f}elect|union`, `(?i)x[^a-z]{1,3}s`,
	`(?i)<script[^>]*>`, `(?i)(?:k|\x{212a})ey`, `\bkey\b`, `(?i)\Bss\B`, `(?i)ṡ|s\.`,
}

var (
	soundOnce sync.Once
	soundAll  *soundSet
	soundErr  error
)

// theSoundSet builds the set once per process.
func theSoundSet(t testing.TB) *soundSet {
	t.Helper()
	soundOnce.Do(func() { soundAll, soundErr = buildSoundSet(t) })
	if soundErr != nil {
		t.Fatal(soundErr)
	}
	if soundAll == nil {
		t.Fatal("the operators of the soundness tests failed to build in an earlier test")
	}
	return soundAll
}

func buildSoundSet(t testing.TB) (*soundSet, error) {
	crs := crsArgs(t)
	root := testRoot(t)
	s := &soundSet{}
	for _, arg := range append(slices.Clone(crs["rx"]), handRx...) {
		ref, err := refRx(arg)
		op, err2 := newRx(plugintypes.OperatorOptions{Arguments: arg})
		if (err == nil) != (err2 == nil) {
			return nil, fmt.Errorf("@rx %q: Coraza compiles with %v, this package with %v", arg, err, err2)
		}
		if err != nil {
			continue
		}
		if rxNeedsBytes("(?sm)"+arg) != needsByteRegexp("(?sm)"+arg) {
			return nil, fmt.Errorf("@rx %q: the reference (rxNeedsBytes) and needsByteRegexp pick different engines", arg)
		}
		judge, _ := Judge(op)
		c := &soundCase{name: "@rx " + arg, opCase: opCase{"rx", arg}, op: op, judge: judge, mkRef: func() func(string) bool { return ref }, slot: -1}
		switch o := op.(type) {
		case *rx:
			c.kind = kindRx
			c.filter = o.filter
			if o.filter != nil {
				c.lits = o.filter.lits
			}
			c.tree, _ = syntax.Parse("(?sm)"+arg, syntax.Perl)
		case *byteRx:
			c.kind = kindByteRx
			c.first = o.first
			c.asBytes = true
			c.tree, _ = syntax.Parse(arg, syntax.Perl)
			if o.first != nil {
				for b, in := range o.first {
					if in {
						c.lits = append(c.lits, string([]byte{byte(b)}))
					}
				}
			}
		default:
			return nil, fmt.Errorf("@rx %q: operator %T", arg, op)
		}
		s.rx = append(s.rx, c)
	}
	if len(s.rx) < 250 {
		return nil, fmt.Errorf("%d @rx patterns, want the CRS's", len(s.rx))
	}
	addPM := func(oc opCase, op plugintypes.Operator, mk func() func(string) bool) {
		o := op.(*pm)
		c := &soundCase{name: oc.String(), opCase: oc, kind: kindPM, op: op, judge: o.judge, mkRef: mk, pats: o.patterns, slot: -1}
		if lits, ok := unionLiterals(op); ok {
			c.lits = lits
		} else {
			c.lits = o.patterns
		}
		s.pm = append(s.pm, c)
	}
	for _, arg := range append(slices.Clone(crs["pm"]), "FOO Bar", "a ab abc", "select union insert", "é Ä ſ \u212a", "İ K", "foo  bar") {
		op, err := newPM(plugintypes.OperatorOptions{Arguments: arg})
		if err != nil {
			return nil, err
		}
		pats := strings.Split(strings.ToLower(arg), " ")
		addPM(opCase{"pm", arg}, op, func() func(string) bool { return refPM(pats, true) })
	}
	for _, arg := range append(slices.Clone(crs["pmFromFile"]), crs["pmf"]...) {
		op, err := newPMFromFile(plugintypes.OperatorOptions{Arguments: arg, Path: []string{""}, Root: root})
		if err != nil {
			return nil, fmt.Errorf("@pmFromFile %s: %v", arg, err)
		}
		lines := corazaPMFromFileLines(root[arg].Data)
		if !slices.Equal(lines, op.(*pm).patterns) {
			return nil, fmt.Errorf("@pmFromFile %s: %d patterns, Coraza reads %d", arg, len(op.(*pm).patterns), len(lines))
		}
		addPM(opCase{"pmFromFile", arg}, op, func() func(string) bool { return refPM(lines, false) })
	}
	if len(s.pm) < 20 {
		return nil, fmt.Errorf("%d @pm lists, want the CRS's", len(s.pm))
	}
	var attacks []string
	for _, v := range corpus(t) {
		if len(v) < 400 && strings.ContainsAny(v, "<='\"") {
			attacks = append(attacks, v)
		}
	}
	s.inject = []*soundCase{
		{name: "@detectSQLi", opCase: opCase{"detectSQLi", ""}, kind: kindSQLi, op: detectSQLi{}, judge: detectSQLi{}.matches, pats: attacks, slot: -1,
			mkRef: func() func(string) bool { return func(v string) bool { m, _ := libinjection.IsSQLi(v); return m } }},
		{name: "@detectXSS", opCase: opCase{"detectXSS", ""}, kind: kindXSS, op: detectXSS{}, judge: detectXSS{}.matches, pats: attacks, slot: -1,
			mkRef: func() func(string) bool { return libinjection.IsXSS }},
	}
	s.all = slices.Concat(s.rx, s.pm, s.inject)

	// The union: every filtered operator, and the CRS's byte ranges.
	for _, c := range s.all {
		if Filtered(c.op) {
			c.slot = len(s.unionOps)
			s.unionOps = append(s.unionOps, c.op)
		}
	}
	for _, arg := range crs["validateByteRange"] {
		if op, err := newByteRange(plugintypes.OperatorOptions{Arguments: arg}); err == nil && Filtered(op) {
			s.unionOps = append(s.unionOps, op)
		}
	}
	s.union = NewUnion(s.unionOps)
	s.words = (len(s.unionOps) + 63) / 64
	s.unionRx = make([]*rx, len(s.unionOps))
	for i, op := range s.unionOps {
		if o, ok := op.(*rx); ok {
			s.unionRx[i] = o
		}
	}
	return s, nil
}

// show abbreviates a value for a message.
func show(v string) string {
	if len(v) <= 160 {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%q...(%d bytes)...%q", v[:80], len(v)-160, v[len(v)-80:])
}

// check judges v with c in every layer and reports each unsound or
// differing answer; it returns whether Coraza's operator matches v, and
// whether a filter (mayMatch, the first bytes, the union) rejects it. hits
// has room for the union's slots.
func (s *soundSet) check(t testing.TB, c *soundCase, v string, hits []uint64, how string) (matched, rejected bool) {
	t.Helper()
	if w := stripXSS.Replace(v); c.kind == kindXSS && w != v {
		// The prefilter's claim, on the value without '<' and '='.
		s.check(t, c, w, hits, how+", without '<' and '='")
	}
	ref := c.reference(v)
	fail := func(layer, format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s: %s on %s [%s]", layer, c.name, fmt.Sprintf(format, args...), show(v), how)
	}
	lit := c.filter == nil || c.filter.mayMatch(v)
	first := c.first == nil || c.first.in(v)
	hit := true
	if c.slot >= 0 {
		clear(hits)
		s.union.Scan(v, hits)
		hit = hits[c.slot>>6]&(1<<(c.slot&63)) != 0
		if c.kind == kindRx && hit != lit {
			fail("union contract", "the union says %v, the literal filter %v", hit, lit)
		}
	}
	judged := c.judge(v)
	evaluated := c.op.Evaluate(&captureTx{}, v)
	if ref {
		if !lit {
			fail("SOUNDNESS literal filter", "Coraza's operator matches, mayMatch rejects (literals %q)", c.lits)
		}
		if !first {
			fail("SOUNDNESS first bytes", "Coraza's operator matches, the first bytes reject")
		}
		if !hit {
			fail("SOUNDNESS union", "Coraza's operator matches, the union misses slot %d", c.slot)
		}
	}
	if judged != ref {
		fail("operator", "Judge says %v, Coraza's operator %v", judged, ref)
	}
	if evaluated != ref {
		fail("operator", "Evaluate says %v, Coraza's operator %v", evaluated, ref)
	}
	return ref, !lit || !first || !hit
}

// stripXSS takes '<' and '=' out of a value, or turns them into bytes
// that drive libinjection's HTML tokenizer.
var stripXSS = strings.NewReplacer("<", "", "=", "\t", "&lt;", "\x00")

// checkUnion checks the union's contract on v for every slot: the @rx
// ones answer mayMatch (all of them, or limit of them at random), the
// hits are the same for the ASCII upper- and lower-case forms of v, and a
// prefix or suffix of v hits no slot v does not.
func (s *soundSet) checkUnion(t testing.TB, v string, r *rand.Rand, limit int, how string) {
	t.Helper()
	hits := make([]uint64, s.words)
	got := s.union.Scan(v, hits)
	if any := slices.ContainsFunc(hits, func(w uint64) bool { return w != 0 }); got != any {
		t.Errorf("union contract: Scan returns %v, hits set %v, on %s [%s]", got, any, show(v), how)
	}
	slots := make([]int, 0, len(s.unionOps))
	for i, o := range s.unionRx {
		if o != nil {
			slots = append(slots, i)
		}
	}
	if limit > 0 && limit < len(slots) {
		r.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
		slots = slots[:limit]
	}
	for _, i := range slots {
		o := s.unionRx[i]
		if hit, want := hits[i>>6]&(1<<(i&63)) != 0, o.filter.mayMatch(v); hit != want {
			t.Errorf("union contract: @rx %s: the union says %v, mayMatch %v, on %s [%s]", o.expr, hit, want, show(v), how)
		}
	}
	other := make([]uint64, s.words)
	for _, w := range []string{upperASCII(v), lowerASCII(v)} {
		clear(other)
		s.union.Scan(w, other)
		if !slices.Equal(hits, other) {
			t.Errorf("union contract: the ASCII case of the value changes the hits, on %s [%s]", show(v), how)
		}
	}
	if len(v) > 1 {
		k := 1 + r.IntN(len(v)-1)
		for _, w := range []string{v[:k], v[k:]} {
			clear(other)
			s.union.Scan(w, other)
			for j := range other {
				if other[j]&^hits[j] != 0 {
					t.Errorf("union contract: a part of the value (%d of %d bytes) hits slots the value does not, on %s [%s]", len(w), len(v), show(v), how)
					break
				}
			}
		}
	}
}

// upperASCII maps the ASCII lower-case letters of s to upper case.
func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Generation.

// gen draws values for one case.
type gen struct {
	r *rand.Rand
	// fold: 0 ASCII cases only, 1 any rune a literal folds to, the
	// non-ASCII ones (U+212A, U+017F) preferred.
	fold int
}

// budget caps the size of one sample.
const sampleMax = 4096

// sample writes a string of re's language, mostly: the assertions are
// not enforced (^ and $ write a newline half of the time, which makes
// them hold under (?m)); Coraza's operator decides.
func (g *gen) sample(b *strings.Builder, re *syntax.Regexp, asBytes bool) {
	over := b.Len() > sampleMax
	count := func(min, max int) int {
		if over {
			return min
		}
		if max < 0 || max > min+3 {
			max = min + 3
		}
		if g.r.IntN(16) == 0 && max > min+3 {
			return max
		}
		return min + g.r.IntN(max-min+1)
	}
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				r = g.foldOf(r)
			}
			g.put(b, r, asBytes)
		}
	case syntax.OpCharClass:
		g.put(b, g.classRune(re.Rune), asBytes)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		switch n := g.r.IntN(16); {
		case n == 0 && re.Op == syntax.OpAnyChar:
			b.WriteByte('\n')
		case n == 1:
			b.WriteString("\u00e9")
		case n == 2:
			b.WriteByte(0xff)
		default:
			b.WriteByte(byte(' ' + g.r.IntN(95)))
		}
	case syntax.OpBeginLine, syntax.OpEndLine:
		if g.r.IntN(2) == 0 {
			b.WriteByte('\n')
		}
	case syntax.OpCapture:
		g.sample(b, re.Sub[0], asBytes)
	case syntax.OpStar:
		for n := count(0, -1); n > 0; n-- {
			g.sample(b, re.Sub[0], asBytes)
		}
	case syntax.OpPlus:
		for n := count(1, -1); n > 0; n-- {
			g.sample(b, re.Sub[0], asBytes)
		}
	case syntax.OpQuest:
		for n := count(0, 1); n > 0; n-- {
			g.sample(b, re.Sub[0], asBytes)
		}
	case syntax.OpRepeat:
		for n := count(re.Min, re.Max); n > 0; n-- {
			g.sample(b, re.Sub[0], asBytes)
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			g.sample(b, sub, asBytes)
		}
	case syntax.OpAlternate:
		g.sample(b, re.Sub[g.r.IntN(len(re.Sub))], asBytes)
	}
	// OpEmptyMatch, OpNoMatch, \A, \z, \b, \B: nothing.
}

// put writes r, as one byte for a byte pattern.
func (g *gen) put(b *strings.Builder, r rune, asBytes bool) {
	if asBytes && r < 0x100 {
		b.WriteByte(byte(r))
		return
	}
	b.WriteRune(r)
}

// foldOf returns a rune r folds to (r itself included).
func (g *gen) foldOf(r rune) rune {
	orbit := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		orbit = append(orbit, f)
	}
	if g.fold == 1 {
		for _, f := range orbit {
			if f >= 0x80 && g.r.IntN(2) == 0 {
				return f
			}
		}
		return orbit[g.r.IntN(len(orbit))]
	}
	var ascii []rune
	for _, f := range orbit {
		if f < 0x80 {
			ascii = append(ascii, f)
		}
	}
	if len(ascii) == 0 {
		return orbit[g.r.IntN(len(orbit))]
	}
	return ascii[g.r.IntN(len(ascii))]
}

// classRune returns a rune of the class (pairs of bounds), ASCII most of
// the time when the class has some, a folding rune often when it has one.
func (g *gen) classRune(ranges []rune) rune {
	if len(ranges) == 0 {
		return 'x'
	}
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	if g.fold == 1 && g.r.IntN(3) == 0 {
		for _, f := range []rune{0x212a, 0x17f} {
			if in(f) {
				return f
			}
		}
	}
	if g.r.IntN(8) != 0 {
		var ascii []int
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] < 0x80 {
				ascii = append(ascii, i)
			}
		}
		if len(ascii) > 0 {
			i := ascii[g.r.IntN(len(ascii))]
			lo, hi := ranges[i], min(ranges[i+1], 0x7f)
			return lo + rune(g.r.IntN(int(hi-lo)+1))
		}
	}
	i := 2 * g.r.IntN(len(ranges)/2)
	lo, hi := ranges[i], ranges[i+1]
	if hi-lo > 0x800 {
		hi = lo + 0x800
	}
	r := lo + rune(g.r.IntN(int(hi-lo)+1))
	if 0xd800 <= r && r <= 0xdfff {
		r = lo
	}
	return r
}

// lookalikes are runes that look like, but do not fold to, an ASCII
// letter under Go's simple folding (a near miss), and the two that do.
var lookalikes = map[byte][]string{
	'i': {"\u0131", "\u0130", "\uff49"}, 'k': {"\u0138", "\u03ba", "\uff4b", "\u212a"}, 's': {"\u00df", "\u0282", "\uff53", "\u017f"},
	'a': {"\u0430"}, 'e': {"\u0435"}, 'o': {"\u043e"}, 'c': {"\u0441"}, 'p': {"\u0440"}, 'x': {"\u0445"}, 'y': {"\u0443"},
}

// separators split a literal: a near miss.
var separators = []string{"\x00", "\xff", "\n", " ", "\u00e9", "\xe2\x84", "\xc5", "\xe2", "\u0131", "\r\n", "\t"}

// nearMiss returns lit changed so that it (most likely) no longer holds
// it, or a variant that does: the filter must tell them apart.
func (g *gen) nearMiss(lit string) string {
	if lit == "" {
		return "x"
	}
	b := []byte(lit)
	i := g.r.IntN(len(b))
	switch g.r.IntN(8) {
	case 0: // one byte changed
		c := b[i]
		if 'a' <= c|0x20 && c|0x20 <= 'z' {
			c = 'a' + (c|0x20-'a'+1+byte(g.r.IntN(25)))%26
		} else {
			c ^= 1 << g.r.IntN(8)
		}
		b[i] = c
		return string(b)
	case 1: // cut short by one byte, at either end
		if g.r.IntN(2) == 0 {
			return lit[:len(lit)-1]
		}
		return lit[1:]
	case 2: // split
		return lit[:i] + separators[g.r.IntN(len(separators))] + lit[i:]
	case 3: // a look-alike rune for a letter (two of them fold)
		for j := range b {
			if l, ok := lookalikes[b[(i+j)%len(b)]]; ok {
				k := (i + j) % len(b)
				return lit[:k] + l[g.r.IntN(len(l))] + lit[k+1:]
			}
		}
		return lit[:i] + "\uff41" + lit[i:]
	case 4: // ASCII case mixed: still holds it
		for j, c := range b {
			if 'a' <= c && c <= 'z' && g.r.IntN(2) == 0 {
				b[j] = c - 'a' + 'A'
			}
		}
		return string(b)
	case 5: // its prefix repeated, then the literal: failure links
		return strings.Repeat(lit[:i], 1+g.r.IntN(3)) + lit
	case 6: // the literal without a middle byte
		return lit[:i] + lit[i+1:]
	default: // two literals' halves overlapping
		return lit[:i] + lit[:len(lit)-i]
	}
}

// fill returns about n bytes of filler of a kind drawn at random.
func (g *gen) fill(n int, seed string, lits []string) string {
	if n <= 0 {
		return ""
	}
	lit := "x"
	if len(lits) > 0 && lits[0] != "" {
		lit = lits[g.r.IntN(len(lits))]
	}
	if lit == "" {
		lit = "x"
	}
	var unit string
	switch g.r.IntN(12) {
	case 0:
		unit = "a"
	case 1:
		unit = "\x00"
	case 2:
		unit = "\xff"
	case 3:
		unit = " "
	case 4:
		unit = "\n"
	case 5:
		unit = lit[:1] // the first byte of a literal
	case 6:
		unit = lit[:max(1, len(lit)-1)] // a literal cut short
	case 7:
		unit = "\xe2\x84" // a Kelvin sign cut short
	case 8:
		unit = "K\u0131S\xc5x"
	case 9:
		if seed != "" {
			unit = seed
		} else {
			unit = "seed"
		}
	case 10:
		var b strings.Builder
		for b.Len() < 64 {
			b.WriteString(g.nearMiss(lit))
		}
		unit = b.String()
	default:
		b := make([]byte, 97)
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		unit = string(b)
	}
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// breakLiterals returns v with every occurrence of the literals (ASCII
// case aside) and every rune that folds to an ASCII letter broken: one of
// its bytes turned into a byte no literal holds. A sound filter rejects
// the result, and Coraza's operator must not match it: made from a
// match, it is the nearest miss. The scan is the test's own, not
// mayMatch's.
func breakLiterals(v string, lits []string) string {
	if len(lits) == 0 || slices.Contains(lits, "") {
		return v
	}
	var in [256]bool
	var byFirst [256][]string
	for _, l := range lits {
		for i := 0; i < len(l); i++ {
			in[l[i]] = true
		}
		byFirst[asciiLower(l[0])] = append(byFirst[asciiLower(l[0])], l)
	}
	breaker := byte(0)
	for _, c := range []byte{0xfe, 0xff, 0xc0, 0xf8, 0x01, 0x7f} {
		if !in[c] {
			breaker = c
			break
		}
	}
	if in[breaker] {
		return v
	}
	b := []byte(v)
	for i := 0; i < len(b); i++ {
		if foldsToASCIIAt(b[i:]) {
			b[i] = breaker
			continue
		}
	lits:
		for _, l := range byFirst[asciiLower(b[i])] {
			if len(b)-i < len(l) {
				continue
			}
			for k := 0; k < len(l); k++ {
				if asciiLower(b[i+k]) != asciiLower(l[k]) {
					continue lits
				}
			}
			// Its last byte; the other literals are still looked for
			// here, as the bytes are now.
			b[i+len(l)-1] = breaker
		}
	}
	return string(b)
}

// foldsToASCIIAt reports whether b starts with U+212A or U+017F.
func foldsToASCIIAt(b []byte) bool {
	r, _ := utf8.DecodeRune(b)
	return r == 0x212a || r == 0x17f
}

// sizes are the sizes of the four size classes.
var sizes = [4]int{200, 4 << 10, 64 << 10, soundMaxValue}

// value builds one value from a match m (may be empty), the case's
// literals and a seed, as shape says: bits 0-2 the layout, 3-4 the size
// class, 5-7 what is done to the match.
func (g *gen) value(m, seed string, lits []string, shape byte) string {
	size := sizes[shape>>3&3]
	switch shape >> 5 {
	case 1:
		m = upperASCII(m)
	case 2:
		b := []byte(m)
		for i, c := range b {
			if 'a' <= c|0x20 && c|0x20 <= 'z' && g.r.IntN(2) == 0 {
				b[i] ^= 0x20
			}
		}
		m = string(b)
	case 3:
		m = strings.NewReplacer("k", "\u212a", "K", "\u212a", "s", "\u017f", "S", "\u017f").Replace(m)
	case 4:
		m = "\xff\x00" + m + "\x00\xc3"
	case 5:
		if len(m) > 1 {
			k := 1 + g.r.IntN(len(m)-1)
			m = m[:k] + separators[g.r.IntN(len(separators))] + m[k:]
		}
	case 6:
		m = lowerASCII(m)
	case 7: // a literal the match holds made a near miss
		low := lowerASCII(m)
		for _, k := range g.r.Perm(len(lits)) {
			if i := strings.Index(low, lits[k]); i >= 0 && lits[k] != "" {
				m = m[:i] + g.nearMiss(lits[k]) + m[i+len(lits[k]):]
				break
			}
		}
	}
	if len(m) > soundMaxValue {
		m = m[:soundMaxValue]
	}
	rest := max(0, size-len(m))
	var v string
	switch shape & 7 {
	case 0:
		v = m
	case 1:
		v = g.fill(rest, seed, lits) + m
	case 2:
		v = m + g.fill(rest, seed, lits)
	case 3:
		v = g.fill(rest/2, seed, lits) + m + g.fill(rest-rest/2, seed, lits)
	case 4: // the seed repeated, the match inside at random
		s := seed
		if s == "" {
			s = "\x00"
		}
		f := strings.Repeat(s, rest/len(s)+1)[:rest]
		k := g.r.IntN(rest + 1)
		v = f[:k] + m + f[k:]
	case 5: // near misses, the match among them half of the time
		var b strings.Builder
		at := -1
		if g.r.IntN(2) == 0 {
			at = g.r.IntN(rest + 1)
		}
		for b.Len() < rest {
			if at >= 0 && b.Len() >= at {
				b.WriteString(m)
				at = -1
			}
			if len(lits) > 0 {
				b.WriteString(g.nearMiss(lits[g.r.IntN(len(lits))]))
			}
			b.WriteString(separators[g.r.IntN(len(separators))])
		}
		if at >= 0 {
			b.WriteString(m)
		}
		v = b.String()
	case 6: // the match repeated
		if m == "" {
			m = "\u212a"
		}
		v = strings.Repeat(m, max(1, size/len(m)))
	default: // near misses and the seed, no match
		var b strings.Builder
		for b.Len() < size {
			if len(lits) > 0 {
				b.WriteString(g.nearMiss(lits[g.r.IntN(len(lits))]))
			}
			b.WriteString(seed)
			b.WriteString(separators[g.r.IntN(len(separators))])
		}
		v = b.String()
	}
	if len(v) > soundMaxValue {
		v = v[len(v)-soundMaxValue:]
	}
	return v
}

// match returns a string c likely matches: a sample of its pattern, one
// of its list's patterns, an attack string.
func (g *gen) match(c *soundCase) string {
	switch {
	case c.tree != nil:
		var b strings.Builder
		g.sample(&b, c.tree, c.asBytes)
		return b.String()
	case len(c.pats) > 0:
		p := c.pats[g.r.IntN(len(c.pats))]
		if c.kind == kindPM && g.r.IntN(4) == 0 {
			p = upperASCII(p)
		}
		return p
	}
	return ""
}

// newGen returns a generator seeded by the input.
func newGen(seed string, shape byte, pick uint16) *gen {
	h := fnv.New64a()
	h.Write([]byte(seed))
	g := &gen{r: rand.New(rand.NewPCG(h.Sum64(), uint64(shape)<<16|uint64(pick)))}
	g.fold = int(shape>>5) & 1
	return g
}

// TestSoundness_foldingRunes checks the premise of mayMatch and of the
// union: under Go's simple case folding, which (?i) uses, the only
// non-ASCII runes that fold to an ASCII letter are U+212A and U+017F,
// and the regexp does fold them.
func TestSoundness_foldingRunes(t *testing.T) {
	var found []rune
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < 0x80 {
				found = append(found, r)
				break
			}
		}
	}
	if !slices.Equal(found, []rune{0x17f, 0x212a}) {
		t.Fatalf("non-ASCII runes that fold to ASCII: %U, mayMatch knows U+017F and U+212A", found)
	}
	for v, want := range map[string]bool{"\u212a": true, "\u017f": false, "\u0131": false, "\u0130": false} {
		if got := regexp.MustCompile(`(?i)k`).MatchString(v); got != want {
			t.Errorf("(?i)k on %q: %v", v, got)
		}
	}
	if !regexp.MustCompile(`(?i)s`).MatchString("\u017f") || !foldsToASCII("\u017f") || !foldsToASCII("\u212a") {
		t.Error("(?i)s does not match U+017F, or foldsToASCII misses a rune")
	}
}

// soundShapes is the deterministic test's shapes for value j of case i:
// every layout and change of the match in turn, small and 4 KB values
// mostly, and two of 64 KB or 256 KB.
func soundShapes(i, n int) []byte {
	shapes := make([]byte, n)
	for j := range shapes {
		size := byte(j & 1) // 200 B or 4 KB
		switch j {
		case n - 1:
			size = 2 + byte(i&1) // 64 KB or 256 KB
		case n - 2:
			size = 2
		}
		shapes[j] = byte((i+j)&7) | size<<3 | byte((i*3+j/2)&7)<<5
	}
	return shapes
}

// TestSoundness_CRS runs every CRS @rx, @pm and @pmFromFile operator, the
// hand-written patterns and libinjection over values generated for each
// (soundShapes): large, adversarial, most holding a match of the
// operator. No layer may reject a value Coraza's operator matches, and
// enough values must match for the test to mean something.
func TestSoundness_CRS(t *testing.T) {
	s := theSoundSet(t)
	const perCase = 20
	var pairs, matched, large, rejected atomic.Int64
	matchedCases := make([]bool, len(s.all))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hits := make([]uint64, s.words)
			for i := range work {
				c := s.all[i]
				n := perCase
				if c.kind == kindSQLi || c.kind == kindXSS {
					n = 8 * perCase
				}
				g := newGen(c.name, byte(i), uint16(i))
				for j, shape := range soundShapes(i, n) {
					g.fold = int(shape>>5) & 1
					v := g.value(g.match(c), "", c.lits, shape)
					how := fmt.Sprintf("case %d value %d shape %#x", i, j, shape)
					// The nearest miss (the largest values aside: a miss
					// costs the regexp a scan of the whole value).
					if w := breakLiterals(v, c.lits); w != v && len(w) < soundMaxValue {
						if _, rej := s.check(t, c, w, hits, how+", its literals broken"); rej {
							rejected.Add(1)
						}
						pairs.Add(1)
					}
					m, rej := s.check(t, c, v, hits, how)
					if rej {
						rejected.Add(1)
					}
					if m {
						matched.Add(1)
						matchedCases[i] = true
						if len(v) >= 64<<10 {
							large.Add(1)
						}
					}
					pairs.Add(1)
					if j%7 == 0 {
						s.checkUnion(t, v, g.r, 0, how)
					}
				}
			}
		}()
	}
	for i := range s.all {
		work <- i
	}
	close(work)
	wg.Wait()
	var none []string
	n := 0
	for i, ok := range matchedCases {
		if ok {
			n++
		} else if testing.Verbose() {
			none = append(none, s.all[i].name[:min(70, len(s.all[i].name))])
		}
	}
	t.Logf("%d operators (%d @rx, %d lists, libinjection), %d (operator, value) pairs, %d where Coraza's operator matches (%d of 64 KB or more), %d that a filter rejects (the union, mayMatch, the first bytes); %d operators matched at least once",
		len(s.all), len(s.rx), len(s.pm), pairs.Load(), matched.Load(), large.Load(), rejected.Load(), n)
	for _, name := range none {
		t.Logf("never matched: %s", name)
	}
	if matched.Load() < 3000 || large.Load() < 100 || n < len(s.all)*8/10 || rejected.Load() < 1000 {
		t.Errorf("too few values checked: %d matches, %d of 64 KB or more, %d of %d operators matched, %d rejections; the test shows little",
			matched.Load(), large.Load(), n, len(s.all), rejected.Load())
	}
}

// TestSoundness_referencesAreCoraza checks that the soundness tests' truth
// (refRx, refPM, libinjection) is Coraza's: on small values generated for
// a third of the cases, the verdict of each reference is that of Coraza's
// built-in operator, compiled into a WAF with the same argument.
func TestSoundness_referencesAreCoraza(t *testing.T) {
	notRegistered(t)
	s := theSoundSet(t)
	cases := make([]opCase, len(s.all))
	for i, c := range s.all {
		cases[i] = c.opCase
	}
	p := compilePair(t, testRoot(t), cases)
	defer p.close()
	values := slices.Clone(fuzzSeeds)
	for i := 0; i < len(s.all); i += 3 {
		c := s.all[i]
		g := newGen(c.name, 0, uint16(i))
		values = append(values, g.value(g.match(c), "", c.lits, byte(i&7)|byte(i&0xe0)))
	}
	matched := 0
	for _, v := range values {
		got := p.outcomes(t, v)
		for i, c := range s.all {
			builtin := got[ruleID(i, false)].matched
			if ref := c.reference(v); ref != builtin {
				t.Errorf("%s on %s: the reference says %v, Coraza's built-in %v", c.name, show(v), ref, builtin)
			}
			if builtin {
				matched++
			}
		}
	}
	t.Logf("%d operators, %d values, %d matches", len(s.all), len(values), matched)
	if matched < len(values)/2 {
		t.Errorf("%d matches: the comparison shows little", matched)
	}
}

// fuzzSeeds are the seeds every target starts from.
var fuzzSeeds = []string{
	"", "select", "SELECT * FROM users", "<script>alert(1)</script>", "\u212a\u017f", "\xff\x00\xfe", "cat /etc/passwd",
	"..\\..\\win.ini", "sleep(5)", "kelvin", "\xe2\x84\xe2\x84\xaa", "on\u0131oad=", "' or 1=1--",
}

// fuzzOne builds a value for c from the fuzzed seed and shape, and checks
// it and the seed itself, each also with its literals broken, and the
// union's contract on it.
func fuzzOne(t *testing.T, s *soundSet, c *soundCase, seed string, shape byte, pick uint16) {
	if len(seed) > soundMaxValue {
		t.Skip()
	}
	g := newGen(seed, shape, pick)
	hits := make([]uint64, s.words)
	how := fmt.Sprintf("seed %q shape %#x pick %d", seed[:min(len(seed), 40)], shape, pick)
	v := g.value(g.match(c), seed, c.lits, shape)
	for _, x := range []struct{ v, how string }{{seed, " (the seed)"}, {v, ""}} {
		s.check(t, c, x.v, hits, how+x.how)
		if w := breakLiterals(x.v, c.lits); w != x.v {
			s.check(t, c, w, hits, how+x.how+", its literals broken")
		}
	}
	limit := 0
	if len(v) > 16<<10 {
		limit = 8
	}
	s.checkUnion(t, v, g.r, limit, how)
}

// FuzzSoundnessRx: a CRS or hand-written @rx pattern (pick), a value built
// from a sample of it and the seed (shape): every layer lets through what
// Coraza's @rx matches, and the operator agrees with it.
func FuzzSoundnessRx(f *testing.F) {
	fuzzPicked(f, 37, func(s *soundSet) []*soundCase { return s.rx })
}

// FuzzSoundnessPM is FuzzSoundnessRx for the CRS's @pm and @pmFromFile
// lists and hand-written ones.
func FuzzSoundnessPM(f *testing.F) {
	fuzzPicked(f, 7, func(s *soundSet) []*soundCase { return s.pm })
}

// seedShapes are the shapes the fuzz targets' seeds are built in.
var seedShapes = []byte{0x00, 0x09, 0x12, 0x1b, 0x24, 0x35, 0x66, 0x7f, 0x83, 0xa9, 0xc4, 0xe2}

// fuzzPicked fuzzes the cases of the sound set that cases picks: pick
// chooses one, seed and shape build its value. stride spreads the seeds'
// picks over the cases.
func fuzzPicked(f *testing.F, stride int, cases func(*soundSet) []*soundCase) {
	for i, seed := range fuzzSeeds {
		for _, shape := range seedShapes {
			f.Add(uint16(i*stride+int(shape)), seed, shape)
		}
	}
	s := theSoundSet(f)
	cs := cases(s)
	f.Fuzz(func(t *testing.T, pick uint16, seed string, shape byte) {
		fuzzOne(t, s, cs[int(pick)%len(cs)], seed, shape, pick)
	})
}

// FuzzSoundnessInject: @detectXSS (whose prefilter skips values without
// '<' and '=') and @detectSQLi on large values built from the seed and
// attack strings of the CRS's tests: each says what libinjection says.
func FuzzSoundnessInject(f *testing.F) {
	for _, seed := range fuzzSeeds {
		for _, shape := range seedShapes {
			f.Add(seed, shape)
		}
	}
	s := theSoundSet(f)
	f.Fuzz(func(t *testing.T, seed string, shape byte) {
		for i, c := range s.inject {
			fuzzOne(t, s, c, seed, shape, uint16(i))
		}
	})
}
