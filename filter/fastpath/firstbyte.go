package fastpath

import (
	"unicode"

	bsyntax "rsc.io/binaryregexp/syntax"
)

// byteSet is a set of bytes.
type byteSet [256]bool

// in reports whether value holds one of the bytes.
func (s *byteSet) in(value string) bool {
	for i := 0; i < len(value); i++ {
		if s[value[i]] {
			return true
		}
	}
	return false
}

// firstBytes returns the bytes a match of the byte pattern re can start
// with: every match that is not empty starts with one of them, so a value
// that holds none of them does not match. It returns nil when a match may
// be empty (every value may then match) or re has something it does not
// read. In the CRS it filters the byte patterns that have no automaton:
// 933180 starts with \$, 941310 with \xbc or <.
func firstBytes(re *bsyntax.Regexp) *byteSet {
	var s byteSet
	nullable, ok := addFirst(re, &s)
	if nullable || !ok {
		return nil
	}
	return &s
}

// addFirst adds to s the bytes a match of re can start with and reports
// whether re matches the empty string (assertions such as ^ and \b match
// it); ok is false for a node it does not read.
func addFirst(re *bsyntax.Regexp, s *byteSet) (nullable, ok bool) {
	switch re.Op {
	case bsyntax.OpNoMatch:
		return false, true
	case bsyntax.OpEmptyMatch, bsyntax.OpBeginLine, bsyntax.OpEndLine, bsyntax.OpBeginText,
		bsyntax.OpEndText, bsyntax.OpWordBoundary, bsyntax.OpNoWordBoundary:
		return true, true
	case bsyntax.OpLiteral:
		if len(re.Rune) == 0 {
			return true, true
		}
		r := re.Rune[0]
		if r > 0xff {
			return false, false
		}
		s[r] = true
		if re.Flags&bsyntax.FoldCase != 0 {
			// Every case of the byte, a superset of what the
			// matcher folds.
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				if f <= 0xff {
					s[f] = true
				}
			}
		}
		return false, true
	case bsyntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for c := re.Rune[i]; c <= min(re.Rune[i+1], 0xff); c++ {
				s[c] = true
			}
		}
		return false, true
	case bsyntax.OpAnyCharNotNL, bsyntax.OpAnyChar:
		for c := range s {
			if re.Op == bsyntax.OpAnyChar || c != '\n' {
				s[c] = true
			}
		}
		return false, true
	case bsyntax.OpCapture, bsyntax.OpPlus:
		return addFirst(re.Sub[0], s)
	case bsyntax.OpStar, bsyntax.OpQuest:
		_, ok := addFirst(re.Sub[0], s)
		return true, ok
	case bsyntax.OpRepeat:
		n, ok := addFirst(re.Sub[0], s)
		return n || re.Min == 0, ok
	case bsyntax.OpConcat:
		for _, sub := range re.Sub {
			n, ok := addFirst(sub, s)
			if !ok || !n {
				return false, ok
			}
		}
		return true, true
	case bsyntax.OpAlternate:
		for _, sub := range re.Sub {
			n, ok := addFirst(sub, s)
			if !ok {
				return false, false
			}
			nullable = nullable || n
		}
		return nullable, true
	}
	return false, false
}
