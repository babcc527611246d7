// Package fastpath holds faster drop-in implementations of Coraza
// operators, registered through Coraza's public plugin API
// (experimental/plugins) so that every rule set the filter compiles uses
// them. They give the same verdicts and captures as the built-in ones; see
// docs/performance.md for what each one saves.
//
// Register must run before the first WAF is compiled. It only fills
// Coraza's registries, no host call, so it may run from an init function.
package fastpath
