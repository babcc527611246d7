// Package perf measures the plugin compiled to wasm on the wasmhost runtime
// (wazero), the way Envoy runs it, next to native Coraza with its stock
// operators on the same requests. It has no non-test code; see
// docs/performance.md for the numbers and how to reproduce them.
// perf/cmd/footprint prints what the module and a VM's start are made of.
//
//	go run mage.go build
//	go test ./perf/ -run '^$' -bench 'Wasm_pool|Coraza_pool' -benchtime 200x
//	WAFGUARD_WASM=/tmp/perf/main.wasm go test ./perf/ -run '^$' -bench Wasm_request -benchmem
package perf
