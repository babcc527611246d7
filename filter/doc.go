// Package filter runs one Coraza transaction per HTTP stream inside a
// proxy-wasm plugin. The WAFs are compiled once per VM, when the plugin starts
// (NewPlugin), from the SecLang rule sets of its keys of the plugin
// configuration (Config, decoded by package pluginconfig); every stream then
// only creates a transaction.
//
// See docs/configuration.md for the configuration keys, the embedded rule
// files, the metrics and the blocking behaviour in each phase.
//
// # Notes
//
// Every proxy-wasm VM runs on one Envoy worker thread and never runs two
// callbacks at once, so the package-level WAF cache and the per-plugin metric
// caches need no locks.
package filter
