// Package hosttest runs the admission guard inside the built plugin
// (build/main.wasm) on the wasmhost package, with several VMs sharing one
// process's shared data, as Envoy workers do. It holds tests only; the
// admission package itself never imports the host.
package hosttest
