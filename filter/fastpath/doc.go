// Package fastpath holds this project's own implementations of Coraza
// operators (@rx, @pm, @pmFromFile and its alias @pmf, @contains,
// @beginsWith, @endsWith, @streq, @within, @detectSQLi, @detectXSS,
// @validateByteRange, @eq, @ge, @gt, @le, @lt), registered through
// Coraza's public plugin API (experimental/plugins) so that every rule set
// the filter compiles uses them. They give the same verdicts and captures
// as Coraza v3.8.1's built-in ones; see docs/performance.md for what the
// faster ones save. Register must run before the first WAF is compiled; it
// only fills Coraza's registries, no host call, so it may run from init.
//
// The same code judges values outside Coraza: Instance hands the operators
// built for a WAF to a rule screen (filter/preselect); Judge gives each
// operator's decision as a function of the value alone (no capture, no
// memo, no transaction), JudgeIn also for an argument with a macro
// ("%{...}"), expanded once from a transaction; Union tells in one pass
// which of many operators may match a value.
//
// Files, by role:
//   - register.go: the operator table; Register, Owns, Instance,
//     Factories, Judge, JudgeIn.
//   - rx.go: @rx: literal filter, then automaton, then memo; the regexp
//     only for captures. byteRx for patterns that name non-UTF-8 bytes.
//   - literal.go: which literals every match of a pattern holds
//     (literalFilter: which values skip the regexp).
//   - known.go, known_rx.go (generated): those literals for the patterns
//     of the embedded rule sets, so a VM parses none of them at start.
//   - dfa.go: the lazy DFA that answers "does it match" in one pass.
//   - flatten.go: x{n,m} flattened so compiling stays within wasm stacks.
//   - firstbyte.go: the bytes a byte pattern's match starts with.
//   - memo.go: the per-VM memo of @rx outcomes per value.
//   - pm.go: @pm, @pmFromFile (data file search, captures); pmset.go: the
//     Aho-Corasick library's verdict without allocating.
//   - union.go: Union, Filtered, Confirm: the screen's one-pass test.
//   - strmatch.go, numeric.go, inject.go, byterange.go: the string
//     comparisons, @eq to @lt, libinjection's tests, @validateByteRange.
//
// Tests:
//   - ops_test.go, ops_fuzz_test.go: every operator equals the built-in
//     (verdict and TX.0 to TX.9) in a WAF and evaluated directly.
//   - soundness_test.go: no filter (literal filter, first bytes, Union)
//     rejects a value Coraza's operator matches.
//   - rx_test.go, dfa_test.go, flatten_test.go, firstbyte_test.go,
//     known_test.go: the stages of @rx never disagree with the regexp
//     (the known table with a fresh parse).
//   - pmset_test.go, union_test.go, inject_test.go: pmSet against the
//     library, Union against each filter, isXSS against libinjection.
//   - registertest: Register, Instance, Owns and Judge, in a test binary
//     of their own (Register replaces the built-ins the tests here use).
package fastpath
