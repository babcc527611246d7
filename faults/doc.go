// Package faults drives the built plugin (build/main.wasm) through the
// wasmhost package under faults, hostile load and long runs, and checks that
// nothing is let through and nothing leaks: every stream ends as a pass, a
// block, a 429 or a clean error reply, and the open-transaction gauge
// (waf_filter.tx.active) and the admission in-flight gauge
// (wafguard_admission_inflight) return to 0.
//
// The tests (faults_test.go, soak_test.go) are short enough for CI. Soak is
// also the long form, for a mage target or a manual run:
//
//	r, err := faults.Soak(ctx, faults.SoakConfig{Wasm: wasm, Duration: 10 * time.Minute, Rate: 20})
//	fmt.Print(r)
//
// # Notes
//
// The tests read the plugin from $WAFGUARD_WASM, else ../build/main.wasm;
// they skip when it is missing unless WASM_REQUIRED is set. Everything
// listens on loopback only, and every loop is bounded in count and time.
package faults
