// Package preselect removes from each transaction, before a phase's rules
// run, the rules that cannot match it, so that Coraza evaluates only the
// rules that can. Coraza itself then evaluates what is left exactly as
// before: every effect (captures, setvar, anomaly scores, logs, disruptive
// actions) still comes from Coraza.
//
// At WAF compile time a Builder sees every rule through Coraza's rule
// observer and indexes the ones a screen may remove: a SecRule with an ID,
// an operator of this project's (filter/fastpath) without negation or
// macro, targets that are stable during the phase, and transformations of
// this project's (filter/transform). The phases are cut into stretches at
// the places a skipAfter jumps from and to. Per transaction, the first rule
// of a stretch that reaches one of this project's operators runs the
// stretch's screen first: each indexed rule's own operator, after the
// rule's own transformation functions, over every value of the collections
// the rule reads (a superset: keys and exclusions are ignored). A rule that
// matches no value is removed with the transaction's RemoveRuleByID. How
// and why, and the rules it must always keep, are in docs/preselection.md.
package preselect
