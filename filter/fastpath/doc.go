// Package fastpath holds this project's own implementations of Coraza
// operators (@rx, @pm, @pmFromFile and its alias @pmf, @contains,
// @beginsWith, @endsWith, @streq, @within, @detectSQLi, @detectXSS,
// @validateByteRange),
// registered through Coraza's public plugin API (experimental/plugins) so
// that every rule set the filter compiles uses them. They give the same
// verdicts and captures as Coraza v3.8.1's built-in ones; see
// docs/performance.md for what the faster ones save.
//
// Because the same code judges values inside Coraza and outside it,
// Instance hands the operators built for a WAF to code that screens rules
// on its own (filter/preselect), and Judge gives such a screen each
// operator's decision as a function of the value alone: no capture, no
// memo, no transaction. An operator whose argument has a macro ("%{...}")
// needs the transaction and has no such decision.
//
// Register must run before the first WAF is compiled. It only fills
// Coraza's registries, no host call, so it may run from an init function.
package fastpath
