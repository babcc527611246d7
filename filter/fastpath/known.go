package fastpath

import (
	"regexp/syntax"
	"sort"
)

// The @rx patterns of the rule sets the plugin embeds (Coraza's
// recommended settings and the CRS) are known when the plugin is built,
// and so are their literal filters. Working a filter out takes a parse of
// the pattern (syntax.Parse), about a fifth of a VM's start with the CRS,
// while the regexp and the automaton are built from the pattern text only
// on first use. knownRxs holds, for each of those patterns, the literals
// of its filter, so that a VM that compiles them parses none at its
// start; any other pattern is parsed as before.
//
// known_rx.go is generated from the rule sets themselves, the union over
// the CRS releases carried (run it with each release's build tag):
//
//	WAFGUARD_UPDATE_KNOWN_RX=1 go test -tags crs<release> ./filter -run TestKnownRx
//
// TestKnownRx (package filter) fails when a pattern of the embedded rule
// sets is missing from the table, and TestKnownRxs (here) checks every
// entry against the filter a parse of its pattern gives, with the Go
// toolchain the plugin is built with: the table only saves the parse, it
// never changes a filter. A pattern parsed at its first use still fails
// there if it is invalid; a pattern in the table parsed without error when
// the table was made.

// knownRx is one pattern of the table: expr is the pattern as the
// operator compiles it ((?sm) prepended) and lits the literals of its
// filter, distinct and sorted (nil: the pattern has no usable literal).
type knownRx struct {
	expr string
	lits []string
}

// knownLiterals returns the literals of expr's filter when expr is in
// the table.
func knownLiterals(expr string) ([]string, bool) {
	i := sort.Search(len(knownRxs), func(i int) bool { return knownRxs[i].expr >= expr })
	if i < len(knownRxs) && knownRxs[i].expr == expr {
		return knownRxs[i].lits, true
	}
	return nil, false
}

// rxObserver, when set, is told the argument of every @rx operator built.
var rxObserver func(args string)

// ObserveRx calls f with the argument of every @rx operator built from now
// on, until the function it returns is called. It is for the test that
// keeps the table of known patterns current (TestKnownRx): no operator is
// built concurrently with it.
func ObserveRx(f func(args string)) (stop func()) {
	rxObserver = f
	return func() { rxObserver = nil }
}

// RxLiterals returns the pattern the @rx operator compiles for the
// argument args and the literals of its filter, worked out now with a
// parse (nil: no usable literal); ok is false when the pattern needs the
// byte engine or does not parse: such a pattern is never looked up. It is
// what TestKnownRx writes into known_rx.go.
func RxLiterals(args string) (expr string, lits []string, ok bool) {
	expr = "(?sm)" + args
	if needsByteRegexp(expr) {
		return "", nil, false
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", nil, false
	}
	return expr, filterLiterals(re), true
}
