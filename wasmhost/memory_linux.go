//go:build linux

package wasmhost

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// reservedMemory backs a VM's linear memory with one anonymous mapping of
// the memory's maximum size (16384 pages, 1 GiB, for a Go module), reserved
// without being committed: the kernel supplies each page when the guest
// first touches it, so the host's RSS follows the guest's real use. A
// memory.grow then only lengthens the slice. Without it wazero grows the
// memory with append, which copies the whole linear memory, 100+ MiB once
// the CRS is loaded, at every grow: under load, with many transactions in
// flight, the Go runtime in the guest grows its heap in many small steps and
// the copies cost more than the requests. (V8 in Envoy reserves the same way.)
type reservedMemory struct{ b []byte }

// newLinearMemory reserves max bytes, or falls back to a growing slice when
// the mapping fails (for example under a tight RLIMIT_AS).
func newLinearMemory(capacity, max uint64) experimental.LinearMemory {
	if max >= 1<<16 && max <= 1<<32 {
		b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err == nil {
			return &reservedMemory{b: b[:0]}
		}
	}
	return &sliceMemory{b: make([]byte, 0, capacity)}
}

func (m *reservedMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.b)) {
		return nil // past the reservation: the grow fails, as in V8
	}
	m.b = m.b[:size]
	return m.b
}

// Free unmaps the memory. wazero calls it when the instance is closed; the
// host keeps no reference to a closed instance's memory.
func (m *reservedMemory) Free() {
	if m.b != nil {
		_ = syscall.Munmap(m.b[:cap(m.b)])
		m.b = nil
	}
}
