package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// sliceMemory is a linear memory on a Go slice, grown by copying: wazero's
// own behaviour, kept as the fallback where no reservation can be made.
type sliceMemory struct{ b []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size <= uint64(cap(m.b)) {
		m.b = m.b[:size]
		return m.b
	}
	nb := make([]byte, size, size+size/2)
	copy(nb, m.b)
	m.b = nb
	return m.b
}

func (m *sliceMemory) Free() { m.b = nil }

var _ experimental.LinearMemory = (*sliceMemory)(nil)
