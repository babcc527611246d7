package fastpath

import (
	"regexp/syntax"
	"sort"
	"strings"
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
func required(re *syntax.Regexp) (set []string, ok bool) {
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
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
		return nil, false
	case syntax.OpConcat:
		var best []string
		found := false
		for _, sub := range re.Sub {
			s, ok := required(sub)
			if ok && (!found || better(s, best)) {
				best, found = s, true
			}
		}
		return best, found
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			s, ok := required(sub)
			if !ok {
				return nil, false
			}
			all = append(all, s...)
			if len(all) > maxLiterals {
				return nil, false
			}
		}
		return all, len(all) > 0
	}
	// Star, Quest, repeats that may be absent, any-char, empty-width
	// assertions and empty matches require nothing.
	return nil, false
}

// classLiterals turns a character class of at most a few ASCII characters
// (counted after lower-casing, so [Ss] is one) into one-byte literals.
func classLiterals(re *syntax.Regexp) ([]string, bool) {
	var set []string
	seen := [128]bool{}
	for i := 0; i+1 < len(re.Rune); i += 2 {
		lo, hi := re.Rune[i], re.Rune[i+1]
		if hi >= 0x80 || hi-lo > 8 {
			return nil, false
		}
		for r := lo; r <= hi; r++ {
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if !seen[c] {
				seen[c] = true
				set = append(set, string(rune(c)))
			}
		}
		if len(set) > 4 {
			return nil, false
		}
	}
	return set, len(set) > 0
}

// better prefers literal sets whose shortest literal is longer, then sets
// with fewer literals.
func better(a, b []string) bool {
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
