package fastpath

import (
	"regexp"
	"regexp/syntax"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"rsc.io/binaryregexp"
	bsyntax "rsc.io/binaryregexp/syntax"
)

// rx is the @rx operator: RE2 syntax with (?sm) prepended, the flags
// Coraza's own @rx uses by default, and up to 9 capture fields (the whole
// match and 8 groups) when the rule captures. It differs from the built-in
// operator only in how it finds out that a value does not match:
//
//   - a literal filter (see literalFilter) rejects, in one pass without
//     allocating, values that lack every literal a match must contain;
//   - the match itself is a yes/no question answered by a lazily built
//     DFA (see dfa) in one pass, instead of the regexp's NFA simulation;
//   - when the rule captures, the submatch positions are only computed,
//     by the regexp, for values that match;
//   - outcomes for values of memoizable length are remembered per VM (see
//     memo), so a value seen before is not matched again.
type rx struct {
	*compiledRx
}

// compiledRx is what the memoizer shares between rules with the same
// pattern. The regexp itself is compiled on first use (captures, or a
// value past what the automaton holds), which most patterns never see:
// the pattern was parsed when the rule was built, which is where a bad
// pattern is refused (regexp.Compile fails only where syntax.Parse does).
type compiledRx struct {
	expr     string
	once     sync.Once
	compiled *regexp.Regexp
	filter   *literalFilter // nil: no usable literal
	dfa      *dfa
}

// re returns the compiled regexp.
func (c *compiledRx) re() *regexp.Regexp {
	c.once.Do(func() { c.compiled = regexp.MustCompile(c.expr) })
	return c.compiled
}

func newRx(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	expr := "(?sm)" + opts.Arguments
	if needsByteRegexp(expr) {
		return newByteRx(opts)
	}
	if rxObserver != nil {
		rxObserver(opts.Arguments)
	}
	v, err := memoize(opts.Memoizer, "wafguard:rx:"+expr, func() (any, error) {
		lits, known := knownLiterals(expr)
		if !known {
			parsed, err := syntax.Parse(expr, syntax.Perl)
			if err != nil {
				// The error regexp.Compile gives, which starts the same.
				return nil, err
			}
			lits = filterLiterals(parsed)
		}
		return &compiledRx{expr: expr, filter: literalFilterOf(lits), dfa: newLazyDFA(expr)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &rx{v.(*compiledRx)}, nil
}

func (o *rx) Evaluate(tx plugintypes.TransactionState, value string) bool {
	if o.filter != nil && !o.filter.mayMatch(value) {
		return false
	}
	capturing := tx.Capturing()
	if !memoizable(value) {
		return o.match(tx, capturing, value)
	}
	r, ok := rxMemo.get(o.compiledRx, value)
	if !ok || (r.matched && capturing && r.pos == nil) {
		r = memoResult{matched: o.matches(value)}
		if r.matched && capturing {
			r.pos = o.re().FindStringSubmatchIndex(value)
		}
		rxMemo.put(o.compiledRx, value, r)
	}
	if r.matched && capturing {
		capture(tx, len(r.pos)/2, func(i int) (int, int) { return r.pos[2*i], r.pos[2*i+1] }, value)
	}
	return r.matched
}

// match runs the regexp, without submatches unless the rule captures and
// the value matches.
func (o *rx) match(tx plugintypes.TransactionState, capturing bool, value string) bool {
	if !o.matches(value) {
		return false
	}
	if !capturing {
		return true
	}
	m := o.re().FindStringSubmatchIndex(value)
	capture(tx, len(m)/2, func(i int) (int, int) { return m[2*i], m[2*i+1] }, value)
	return true
}

// matches reports whether the regexp matches value: the automaton's
// answer, or the regexp's when the automaton's cache ran out.
func (o *rx) matches(value string) bool {
	if m, ok := o.dfa.match(value); ok {
		return m
	}
	return o.re().MatchString(value)
}

// capture sets capture fields 0..min(n,9)-1 (TX.0, the whole match, to
// TX.8), as the built-in operator does, from the submatch positions: the
// text of each group, or "" for a group that took no part in the match.
func capture(tx plugintypes.TransactionState, n int, pos func(int) (int, int), value string) {
	if n > 9 {
		n = 9
	}
	for i := 0; i < n; i++ {
		start, end := pos(i)
		if start < 0 {
			tx.CaptureField(i, "")
			continue
		}
		tx.CaptureField(i, value[start:end])
	}
}

// byteRx matches patterns that name bytes which are not valid UTF-8 (such
// as \xff) byte by byte, as the built-in operator does. The pattern is
// parsed when the rule is built (where a bad one is refused); it is
// compiled on first use: flattened (see flattenByteRepeats) for the yes/no
// answer, as written for captures.
type byteRx struct {
	*compiledByteRx
}

type compiledByteRx struct {
	expr string
	flat string // expr with its counted repeats flattened
	// first are the bytes a match starts with (firstBytes; nil: any
	// value may match): the matcher runs only on a value with one.
	first              *byteSet
	matchOnce, capOnce sync.Once
	match, capture     *binaryregexp.Regexp
}

// matches reports whether the pattern matches value.
func (c *compiledByteRx) matches(value string) bool {
	if c.first != nil && !c.first.in(value) {
		return false
	}
	return c.matcher().MatchString(value)
}

func (c *compiledByteRx) matcher() *binaryregexp.Regexp {
	c.matchOnce.Do(func() { c.match = binaryregexp.MustCompile(c.flat) })
	return c.match
}

func (c *compiledByteRx) capturer() *binaryregexp.Regexp {
	c.capOnce.Do(func() { c.capture = binaryregexp.MustCompile(c.expr) })
	return c.capture
}

func newByteRx(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	expr := opts.Arguments
	v, err := memoize(opts.Memoizer, "wafguard:rxbytes:"+expr, func() (any, error) {
		re, err := bsyntax.Parse(expr, bsyntax.Perl)
		if err != nil {
			// The error binaryregexp.Compile gives.
			return nil, err
		}
		return &compiledByteRx{expr: expr, flat: flattenByteRepeats(re).String(), first: firstBytes(re)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &byteRx{v.(*compiledByteRx)}, nil
}

func (o *byteRx) Evaluate(tx plugintypes.TransactionState, value string) bool {
	if !tx.Capturing() {
		return o.matches(value)
	}
	if !o.matches(value) {
		return false
	}
	m := o.capturer().FindStringSubmatchIndex(value)
	if m == nil {
		return false
	}
	capture(tx, len(m)/2, func(i int) (int, int) { return m[2*i], m[2*i+1] }, value)
	return true
}

// needsByteRegexp reports whether the \xHH and \x{HH} escapes of expr,
// read as bytes together with the rest of the pattern, make it invalid
// UTF-8: such a pattern means raw bytes, which regexp cannot match. It
// picks the byte engine for the same patterns as the built-in operator.
func needsByteRegexp(expr string) bool {
	out := make([]byte, 0, len(expr))
	for i := 0; i < len(expr); i++ {
		if expr[i] != '\\' || i+1 >= len(expr) {
			out = append(out, expr[i])
			continue
		}
		if expr[i+1] != 'x' {
			// Like the built-in operator, look at every "\\x" even when
			// its backslash is itself escaped.
			out = append(out, expr[i])
			continue
		}
		hex, next := "", i+2
		if next < len(expr) && expr[next] == '{' {
			end := next + 1
			for end < len(expr) && expr[end] != '}' {
				end++
			}
			if end < len(expr) {
				hex, next = expr[next+1:end], end+1
			}
		} else if next+2 <= len(expr) {
			hex, next = expr[next:next+2], next+2
		}
		b, err := strconv.ParseUint(hex, 16, 8)
		if hex == "" || err != nil {
			out = append(out, expr[i])
			continue
		}
		out = append(out, byte(b))
		i = next - 1
	}
	return !utf8.Valid(out)
}

func memoize(m plugintypes.Memoizer, key string, fn func() (any, error)) (any, error) {
	if m == nil {
		return fn()
	}
	return m.Do(key, fn)
}
