//go:build !linux

package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// newLinearMemory returns a growing slice (wazero's own behaviour) where no
// reservation is implemented.
func newLinearMemory(capacity, max uint64) experimental.LinearMemory {
	return &sliceMemory{b: make([]byte, 0, capacity)}
}
