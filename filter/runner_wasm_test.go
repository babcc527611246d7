package filter

import "errors"

// getWasmRunner returns the runner that drives build/main.wasm through the
// wasmhost package. (Placeholder until the host package exists.)
func getWasmRunner() (runner, error) {
	return nil, errors.New("wasm runner not implemented yet")
}
