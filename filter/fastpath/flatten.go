package fastpath

import (
	"regexp/syntax"

	bsyntax "rsc.io/binaryregexp/syntax"
)

// Counted repeats and the wasm stack.
//
// regexp/syntax simplifies x{n,m} into x{n} followed by m-n nested
// optional copies, (x(x(x)?)?)?, and compiles that tree recursively: the
// CRS's [a-z][-.0-9A-Z_a-z]{1,255} (rule 934110) alone takes 514 nested
// wasm calls to compile, more than some wasm runtimes allow a plugin
// (WAMR in proxy-wasm-cpp-host gives it 32 KiB of stack). For a yes/no
// answer the nesting is not needed: x{0,k} matches exactly the strings
// (x?){k} matches, k optional copies one after the other, which compile
// flat. So the automaton (dfa.go) and the match-only byte regexps compile
// the flattened tree; captures, whose positions could differ, use the
// pattern as written, compiled only when a rule captures.

// flattenMin is the smallest number of optional copies flattened; below
// it the nesting is shallow anyway.
const flattenMin = 4

// flattenRepeats rewrites, in place, every x{n,m} with m-n of flattenMin
// or more into x{n} followed by m-n copies of x? (lazy ones for a lazy
// repeat): the same strings match.
func flattenRepeats(re *syntax.Regexp) *syntax.Regexp {
	for i, sub := range re.Sub {
		re.Sub[i] = flattenRepeats(sub)
	}
	if re.Op != syntax.OpRepeat || re.Max < 0 || re.Max-re.Min < flattenMin {
		return re
	}
	x := re.Sub[0]
	cat := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags}
	if re.Min > 0 {
		cat.Sub = append(cat.Sub, &syntax.Regexp{Op: syntax.OpRepeat, Flags: re.Flags, Min: re.Min, Max: re.Min, Sub: []*syntax.Regexp{x}})
	}
	for range re.Max - re.Min {
		cat.Sub = append(cat.Sub, &syntax.Regexp{Op: syntax.OpQuest, Flags: re.Flags, Sub: []*syntax.Regexp{x}})
	}
	return cat
}

// flattenByteRepeats is flattenRepeats for the byte regexps
// (rsc.io/binaryregexp), whose syntax package mirrors regexp/syntax.
func flattenByteRepeats(re *bsyntax.Regexp) *bsyntax.Regexp {
	for i, sub := range re.Sub {
		re.Sub[i] = flattenByteRepeats(sub)
	}
	if re.Op != bsyntax.OpRepeat || re.Max < 0 || re.Max-re.Min < flattenMin {
		return re
	}
	x := re.Sub[0]
	cat := &bsyntax.Regexp{Op: bsyntax.OpConcat, Flags: re.Flags}
	if re.Min > 0 {
		cat.Sub = append(cat.Sub, &bsyntax.Regexp{Op: bsyntax.OpRepeat, Flags: re.Flags, Min: re.Min, Max: re.Min, Sub: []*bsyntax.Regexp{x}})
	}
	for range re.Max - re.Min {
		cat.Sub = append(cat.Sub, &bsyntax.Regexp{Op: bsyntax.OpQuest, Flags: re.Flags, Sub: []*bsyntax.Regexp{x}})
	}
	return cat
}
