package fastpath

import (
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// literalFilter is a necessary condition for a regular expression to match:
// every match contains at least one of its literals, compared ASCII
// case-insensitively. It only judges ASCII values; a value with any byte
// of 0x80 or more may match through Unicode case folding (K, the Kelvin
// sign, matches (?i)k) and is always handed to the regexp.
type literalFilter struct {
	// lits are the literals, lower-cased, sorted; first[c]..first[c+1]
	// index the ones that start with the lower-case byte c.
	lits  []string
	first [257]uint16
}

// Limits that keep the filter cheap: with more alternatives, or with only
// one-byte literals, the regexp alone is about as fast.
const (
	maxLiterals = 512
)

// newLiteralFilter returns the filter of re, or nil when no literal is
// required (e.g. the pattern can match the empty string).
func newLiteralFilter(re *syntax.Regexp) *literalFilter {
	return literalFilterOf(filterLiterals(re))
}

// filterLiterals returns the literals of re's filter, distinct and sorted,
// or nil when re has no usable literal.
func filterLiterals(re *syntax.Regexp) []string {
	set, ok := required(re)
	if !ok || len(set) == 0 || len(set) > maxLiterals {
		return nil
	}
	lits := make([]string, 0, len(set))
	seen := map[string]bool{}
	for _, s := range set {
		if s == "" {
			return nil
		}
		if !seen[s] {
			seen[s] = true
			lits = append(lits, s)
		}
	}
	sort.Strings(lits)
	return lits
}

// literalFilterOf returns the filter of lits (distinct and sorted, which
// it keeps and never changes), or nil when there are none.
func literalFilterOf(lits []string) *literalFilter {
	if len(lits) == 0 {
		return nil
	}
	f := &literalFilter{lits: lits}
	i := 0
	for c := 0; c < 256; c++ {
		f.first[c] = uint16(i)
		for i < len(lits) && int(lits[i][0]) == c {
			i++
		}
	}
	f.first[256] = uint16(i)
	return f
}

// mayMatch reports whether value contains one of the literals, or one of
// the two non-ASCII runes that fold to ASCII letters.
//
// The literals are ASCII, and a match of a literal in the pattern is a run
// of runes that each equal, or case-fold to, the literal's bytes. Under
// Unicode simple folding only U+212A (Kelvin sign, folds to k) and U+017F
// (long s, folds to s) stand for ASCII letters, so a value without them
// matches a literal only where its bytes do, ignoring ASCII case. Other
// non-ASCII bytes (UTF-8 or not: the regexp reads invalid bytes as U+FFFD)
// never belong to such a run and are skipped.
func (f *literalFilter) mayMatch(value string) bool {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c >= 0x80 {
			if foldsToASCII(value[i:]) {
				return true
			}
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lo, hi := f.first[c], f.first[int(c)+1]
		for j := lo; j < hi; j++ {
			if hasLowerPrefix(value[i:], f.lits[j]) {
				return true
			}
		}
	}
	return false
}

// foldsToASCII reports whether s starts with the UTF-8 encoding of U+212A
// (E2 84 AA) or U+017F (C5 BF).
func foldsToASCII(s string) bool {
	switch {
	case len(s) >= 3 && s[0] == 0xE2 && s[1] == 0x84 && s[2] == 0xAA:
		return true
	case len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF:
		return true
	}
	return false
}

// hasLowerPrefix reports whether s starts with lit, ASCII letters of s
// compared in lower case. lit is lower-case ASCII.
func hasLowerPrefix(s, lit string) bool {
	if len(s) < len(lit) {
		return false
	}
	for k := 1; k < len(lit); k++ {
		c := s[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[k] {
			return false
		}
	}
	return true
}

// required returns literals (lower-case ASCII) of which every match of re
// contains at least one, or ok=false when it finds none. It may return
// fewer or shorter literals than possible, never a wrong one.
//
// It prefers the literals a value is least likely to hold (rarer), looking
// at runs of pieces as well as at each piece (concatRuns). Where that
// makes an alternation hold more than maxLiterals, the alternation is
// worked out again with each literal costing more (level 1), then the lean
// way (level 2): each piece alone, the longest shortest literal first
// (leaner).
func required(re *syntax.Regexp) (set []string, ok bool) {
	budget := maxSpread
	return requiredIn(re, 0, &budget)
}

func requiredIn(re *syntax.Regexp, level int, budget *int) (set []string, ok bool) {
	lean := level == 2
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= 0x80 {
				// Non-ASCII runes never occur in the values this filter
				// judges; folded ones may stand for ASCII letters.
				return nil, false
			}
		}
		return []string{strings.ToLower(string(re.Rune))}, true
	case syntax.OpCharClass:
		return classLiterals(re)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredIn(re.Sub[0], level, budget)
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredIn(re.Sub[0], level, budget)
		}
		return nil, false
	case syntax.OpConcat:
		prefer := leaner
		if !lean {
			cost := litCost
			if level == 1 {
				cost *= 16
			}
			prefer = func(a, b []string) bool { return rarer(a, b, cost) }
		}
		var best []string
		found := false
		for _, sub := range re.Sub {
			s, ok := requiredIn(sub, level, budget)
			if ok && (!found || prefer(s, best)) {
				best, found = s, true
			}
		}
		if lean {
			return best, found
		}
		if s, ok := concatRuns(re.Sub, prefer); ok && (!found || prefer(s, best)) {
			best, found = s, true
		}
		if s, ok := spread(re, budget); ok && (!found || prefer(s, best)) {
			best, found = s, true
		}
		return best, found
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			s, ok := requiredIn(sub, level, budget)
			if !ok {
				return nil, false
			}
			all = minimal(append(all, s...))
			if len(all) > maxLiterals {
				if lean {
					return nil, false
				}
				return requiredIn(re, level+1, budget)
			}
		}
		return all, len(all) > 0
	}
	// Star, Quest, repeats that may be absent, any-char, empty-width
	// assertions and empty matches require nothing.
	return nil, false
}

// spread is required for a concatenation with an alternation among its
// pieces, x(?:a|b)y, taken as the alternation of the concatenations of
// each branch, xay|xby: the same matches. Patterns that list words
// factor their first letters out (a(?:dduser|lias)|b(?:ash|zip)); spread
// then finds the words whole. It spreads the first alternation of at
// most maxBranches, and every concatenation it makes spreads its own;
// budget caps the concatenations made in all, past which spread finds
// nothing.
func spread(re *syntax.Regexp, budget *int) ([]string, bool) {
	for k, sub := range re.Sub {
		for sub.Op == syntax.OpCapture {
			sub = sub.Sub[0]
		}
		if sub.Op != syntax.OpAlternate {
			continue
		}
		if len(sub.Sub) > maxBranches || *budget < len(sub.Sub) {
			return nil, false
		}
		*budget -= len(sub.Sub)
		var all []string
		for _, b := range sub.Sub {
			subs := slices.Clone(re.Sub[:k])
			if b.Op == syntax.OpConcat {
				subs = append(subs, b.Sub...)
			} else {
				subs = append(subs, b)
			}
			subs = append(subs, re.Sub[k+1:]...)
			s, ok := requiredIn(&syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: subs}, 0, budget)
			if !ok {
				return nil, false
			}
			if all = minimal(append(all, s...)); len(all) > maxLiterals {
				return nil, false
			}
		}
		return all, true
	}
	return nil, false
}

// maxBranches is the most branches of an alternation spread takes apart;
// maxSpread the most concatenations it makes for one pattern.
const (
	maxBranches = 64
	maxSpread   = 4096
)

// Runs of pieces with a finite set of matches. The pieces of a
// concatenation each required() looks at alone give short literals where
// the pattern spells a word one piece at a time: (?:^|[/;\\])\.{2,3}[/;\\]
// requires "." alone, but any match holds one of "../", "..;", "..\\".
// concatRuns finds those: the product of the match sets of a run of
// adjacent pieces (exact) is a set of literals one of which every match
// holds.
//
// A piece that may match the empty string, and whose non-empty matches
// all start with one of a few bytes, may be taken as empty (a gap): the
// literals of the run then hold only for values without those bytes, so
// the bytes join the literals. The CRS's command patterns put such a gap,
// ["')\[\\]*(?:(?:\|\||&&)\s*)?\$[...]*)?\\?, between every two letters
// of a command name; with the gaps taken as empty, "busybox" is a literal
// of 932230, which otherwise requires one letter.
const (
	// maxExact is the most strings a piece's match set, or a run's
	// product, may have.
	maxExact = 64
	// maxExactClass is the most bytes of a character class taken as
	// one-byte strings in a run.
	maxExactClass = 16
	// maxRun is the most pieces a run spans.
	maxRun = 24
)

// matchSet is the match set of a piece: every match is one of strs
// (lower-cased), unless the value holds one of the bytes of gaps.
type matchSet struct {
	strs []string
	gaps byteSet
}

// concatRuns returns the preferred literals of the runs of subs, the
// pieces of a concatenation.
func concatRuns(subs []*syntax.Regexp, prefer func(a, b []string) bool) ([]string, bool) {
	sets := make([]*matchSet, len(subs))
	for i, sub := range subs {
		if m, ok := exact(sub); ok {
			sets[i] = &m
		}
	}
	var best []string
	found := false
	for j := range subs {
		prod := []string{""}
		var gaps byteSet
		for i := j; i < len(subs) && i < j+maxRun && sets[i] != nil; i++ {
			if prod = product(prod, sets[i].strs); prod == nil {
				break
			}
			gaps.add(&sets[i].gaps)
			if lits, ok := runLiterals(prod, &gaps); ok && (!found || prefer(lits, best)) {
				best, found = lits, true
			}
		}
	}
	return best, found
}

// runLiterals turns a run's product and gaps into literals: the gap bytes
// and the strings (minimal). A product that holds "" requires nothing.
func runLiterals(prod []string, gaps *byteSet) ([]string, bool) {
	if slices.Contains(prod, "") {
		return nil, false
	}
	lits := slices.Clone(prod)
	for c, in := range gaps {
		if in {
			lits = append(lits, string(rune(c)))
		}
	}
	lits = minimal(lits)
	return lits, len(lits) <= maxLiterals
}

// minimal returns the distinct literals of lits that hold no other one (a
// value that holds such a literal holds the shorter one too), sorted.
func minimal(lits []string) []string {
	slices.SortFunc(lits, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	lits = slices.Compact(lits)
	out := lits[:0]
	for _, s := range lits {
		if !slices.ContainsFunc(out, func(l string) bool { return strings.Contains(s, l) }) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// product is every string of a followed by one of b, nil when that makes
// more than maxExact.
func product(a, b []string) []string {
	if len(a)*len(b) > maxExact {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if s := x + y; !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// exact returns the match set of re, lower-cased ASCII, or ok=false when
// it is not small and finite.
func exact(re *syntax.Regexp) (matchSet, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		// The assertions are left out: a weaker condition, still
		// necessary.
		return matchSet{strs: []string{""}}, true
	case syntax.OpLiteral:
		lits, ok := required(re)
		return matchSet{strs: lits}, ok
	case syntax.OpCharClass:
		bytes, ok := classBytes(re, maxExactClass)
		if !ok {
			return matchSet{}, false
		}
		var m matchSet
		for _, c := range bytes {
			m.strs = append(m.strs, string(rune(c)))
		}
		return m, true
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpConcat:
		m := matchSet{strs: []string{""}}
		for _, sub := range re.Sub {
			s, ok := exact(sub)
			if !ok {
				return matchSet{}, false
			}
			if m.strs = product(m.strs, s.strs); m.strs == nil {
				return matchSet{}, false
			}
			m.gaps.add(&s.gaps)
		}
		return m, true
	case syntax.OpAlternate:
		var m matchSet
		for _, sub := range re.Sub {
			s, ok := exact(sub)
			if !ok {
				return matchSet{}, false
			}
			for _, x := range s.strs {
				if !slices.Contains(m.strs, x) {
					m.strs = append(m.strs, x)
				}
			}
			if len(m.strs) > maxExact {
				return matchSet{}, false
			}
			m.gaps.add(&s.gaps)
		}
		return m, true
	case syntax.OpStar, syntax.OpQuest, syntax.OpRepeat:
		if re.Op == syntax.OpRepeat && re.Min > 0 {
			return repeatSet(re)
		}
		// Empty, or a gap, or (a quest) empty or once.
		if first, ok := firstASCII(re.Sub[0]); ok {
			return matchSet{strs: []string{""}, gaps: first}, true
		}
		if re.Op == syntax.OpQuest {
			if s, ok := exact(re.Sub[0]); ok && !slices.Contains(s.strs, "") {
				s.strs = append(s.strs, "")
				return s, true
			}
		}
	}
	return matchSet{}, false
}

// repeatSet is exact for x{n,m}, 1 ≤ n ≤ m ≤ 4.
func repeatSet(re *syntax.Regexp) (matchSet, bool) {
	if re.Max < re.Min || re.Max > 4 {
		return matchSet{}, false
	}
	s, ok := exact(re.Sub[0])
	if !ok {
		return matchSet{}, false
	}
	var m matchSet
	m.gaps = s.gaps
	pow := []string{""}
	for k := 1; k <= re.Max; k++ {
		if pow = product(pow, s.strs); pow == nil {
			return matchSet{}, false
		}
		if k >= re.Min {
			for _, x := range pow {
				if !slices.Contains(m.strs, x) {
					m.strs = append(m.strs, x)
				}
			}
		}
	}
	return m, len(m.strs) <= maxExact
}

// add adds the bytes of t to s.
func (s *byteSet) add(t *byteSet) {
	for c, in := range t {
		s[c] = s[c] || in
	}
}

// firstASCII returns the bytes every non-empty match of re starts with,
// when they are all ASCII and none is a letter or a digit (a gap's bytes
// must be rare in text for the literals to be worth it), and re does not
// start with a rune that folds to one.
func firstASCII(re *syntax.Regexp) (byteSet, bool) {
	var s byteSet
	if _, ok := addFirstRunes(re, &s); !ok {
		return s, false
	}
	for c, in := range s {
		if in && (c >= 0x80 || 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9') {
			return s, false
		}
	}
	return s, true
}

// addFirstRunes adds to s the bytes a non-empty match of re can start
// with, and reports whether re matches the empty string; ok is false for
// a node it does not read, or a first rune that is not ASCII.
func addFirstRunes(re *syntax.Regexp, s *byteSet) (nullable, ok bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true, true
	case syntax.OpLiteral:
		if len(re.Rune) == 0 {
			return true, true
		}
		r := re.Rune[0]
		if r >= 0x80 || re.Flags&syntax.FoldCase != 0 && unicode.SimpleFold(r) != r {
			// A letter that folds: its cases may start a match; the
			// caller refuses letters anyway.
			return false, false
		}
		s[r] = true
		return false, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i+1] >= 0x80 {
				return false, false
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				s[r] = true
			}
		}
		return false, true
	case syntax.OpCapture, syntax.OpPlus:
		return addFirstRunes(re.Sub[0], s)
	case syntax.OpStar, syntax.OpQuest:
		_, ok := addFirstRunes(re.Sub[0], s)
		return true, ok
	case syntax.OpRepeat:
		n, ok := addFirstRunes(re.Sub[0], s)
		return n || re.Min == 0, ok
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			n, ok := addFirstRunes(sub, s)
			if !ok {
				return false, false
			}
			if !n {
				return false, true
			}
		}
		return true, true
	case syntax.OpAlternate:
		nullable := false
		for _, sub := range re.Sub {
			n, ok := addFirstRunes(sub, s)
			if !ok {
				return false, false
			}
			nullable = nullable || n
		}
		return nullable, true
	}
	return false, false
}

// classLiterals turns a character class of at most a few ASCII characters
// (counted after lower-casing, so [Ss] is one) into one-byte literals.
func classLiterals(re *syntax.Regexp) ([]string, bool) {
	bytes, ok := classBytes(re, 4)
	if !ok {
		return nil, false
	}
	set := make([]string, len(bytes))
	for i, c := range bytes {
		set[i] = string(rune(c))
	}
	return set, true
}

// classBytes returns the lower-cased bytes of a character class of at most
// max of them, all ASCII but the two runes that fold to ASCII letters
// (U+017F, U+212A: a value that holds one passes every filter).
func classBytes(re *syntax.Regexp, max int) ([]byte, bool) {
	var set []byte
	seen := [128]bool{}
	for i := 0; i+1 < len(re.Rune); i += 2 {
		lo, hi := re.Rune[i], re.Rune[i+1]
		if lo == hi && (lo == 0x17F || lo == 0x212A) {
			continue
		}
		if hi >= 0x80 || int(hi-lo) >= max {
			return nil, false
		}
		for r := lo; r <= hi; r++ {
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if !seen[c] {
				seen[c] = true
				set = append(set, c)
			}
		}
		if len(set) > max {
			return nil, false
		}
	}
	return set, len(set) > 0
}

// rarer prefers the literal set a value is less likely to hold: the
// smaller sum of each literal's odds (litOdds) and cost, then the smaller
// set.
func rarer(a, b []string, cost float64) bool {
	oa, ob := setOdds(a, cost), setOdds(b, cost)
	if oa != ob {
		return oa < ob
	}
	return len(a) < len(b)
}

// leaner prefers literal sets whose shortest literal is longer, then sets
// with fewer literals.
func leaner(a, b []string) bool {
	ma, mb := minLen(a), minLen(b)
	if ma != mb {
		return ma > mb
	}
	return len(a) < len(b)
}

func minLen(set []string) int {
	m := -1
	for _, s := range set {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

// setOdds is the sum of the odds of the literals of set, plus cost for
// each: a set that spells out every case of a rare one (a command name
// followed by each of a dozen separators) is not worth its size when the
// name alone is rare enough, and it may not fit in an alternation's
// maxLiterals.
func setOdds(set []string, cost float64) float64 {
	sum := 0.0
	for _, s := range set {
		sum += litOdds(s) + cost
	}
	return sum
}

// litCost is what a literal costs at level 0: the odds of three letters
// over eight.
const litCost = 1.0 / (8 * 16 * 16 * 16)

// litOdds is a rough chance that a given place of a value starts lit: the
// product of its bytes' chances, with letters, digits and white space
// common, the punctuation of text and URLs less so, and the other bytes
// rare.
func litOdds(lit string) float64 {
	p := 1.0
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			p /= 16
		case c == ' ':
			p /= 6
		case strings.IndexByte(".,-_/:@", c) >= 0:
			p /= 40
		case strings.IndexByte("\t\n\r=&?%+#;!*()'\"", c) >= 0:
			p /= 200
		case c < 0x20 || c >= 0x7f:
			p /= 5000
		default:
			p /= 1000
		}
	}
	return p
}
