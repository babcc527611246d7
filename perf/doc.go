// Package perf measures the plugin compiled to wasm on the wasmhost runtime
// (wazero), the way Envoy runs it, and profiles the guest code with wzprof.
// It has no non-test code; see docs/performance.md for the numbers and
// how to reproduce them.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -tags no_fs_access,memoize_builders -o /tmp/perf/main.wasm .
//	WAFGUARD_WASM=/tmp/perf/main.wasm go test ./perf/ -run '^$' -bench . -benchmem -count 3
//	WAFGUARD_WASM=/tmp/perf/main.wasm PERF_PROFILE=/tmp/perf/json go test ./perf/ -run TestProfile -v
package perf
