package admission

import (
	"errors"
	"time"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// ErrCASMismatch is returned by Store.Set when the key changed since the Get
// that produced the CAS value.
var ErrCASMismatch = errors.New("shared data: cas mismatch")

// ErrNotFound is returned by Store.Get when the key does not exist.
var ErrNotFound = errors.New("shared data: not found")

// Store is the process-wide key-value store shared by every VM with the same
// vm_id (Envoy's shared data).
//
// # Notes
//
// Implementations must follow Envoy's semantics (proxy-wasm-cpp-host
// src/shared_data.cc): every successful Set gives the entry a new CAS value
// from one process-wide counter that skips 0; Set with cas 0 writes
// unconditionally; Set with a non-zero cas fails with ErrCASMismatch when the
// key exists with another cas, and succeeds when the key is missing. The
// slice returned by Get must not be modified by the caller, and is only
// valid until the next call on the store.
type Store interface {
	// Get returns the value and its CAS, or ErrNotFound.
	Get(key string) (value []byte, cas uint32, err error)
	// Set writes the value if the key still has that cas (see the type's
	// notes), or returns ErrCASMismatch.
	Set(key string, value []byte, cas uint32) error
}

// HostStore is the Store backed by the proxy-wasm host's shared data. It may
// only be used from proxy-wasm callbacks (never from init()).
type HostStore struct{}

// Get implements Store.
func (HostStore) Get(key string) ([]byte, uint32, error) {
	v, cas, err := proxywasm.GetSharedData(key)
	switch {
	case err == nil:
		return v, cas, nil
	case errors.Is(err, types.ErrorStatusNotFound):
		return nil, 0, ErrNotFound
	}
	return nil, 0, err
}

// Set implements Store.
func (HostStore) Set(key string, value []byte, cas uint32) error {
	err := proxywasm.SetSharedData(key, value, cas)
	if errors.Is(err, types.ErrorStatusCasMismatch) {
		return ErrCASMismatch
	}
	return err
}

// Clock gives the wall-clock time used for heartbeats.
//
// # Notes
//
// Heartbeats from different VMs of one process are compared, so the clock
// must be the process wall clock, not a per-VM monotonic one: in wasm the Go
// runtime's monotonic reading is relative to each VM's own start. In a guest,
// time.Now maps to WASI clock_time_get(realtime), which Envoy answers with
// its wall clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock that reads time.Now.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

var (
	_ Store = HostStore{}
	_ Clock = SystemClock{}
)
