package admission

import "testing"

// TestFakeStore_envoySemantics pins the semantics the guard relies on, as
// proxy-wasm-cpp-host implements them (src/shared_data.cc).
func TestFakeStore_envoySemantics(t *testing.T) {
	p := newFakeProcess()
	a, b := p.store("vm"), p.store("other")

	if _, _, err := a.Get("k"); err != ErrNotFound {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	// A non-zero cas on a missing key succeeds.
	if err := a.Set("k", []byte("1"), 42); err != nil {
		t.Fatalf("set missing with cas 42: %v", err)
	}
	_, cas1, _ := a.Get("k")
	if cas1 != 1 {
		t.Errorf("first cas = %d, want 1 (one counter starting at 1)", cas1)
	}
	if err := a.Set("k", []byte("2"), cas1+5); err != ErrCASMismatch {
		t.Errorf("set with stale cas: %v, want ErrCASMismatch", err)
	}
	if err := a.Set("k", []byte("2"), cas1); err != nil {
		t.Errorf("set with current cas: %v", err)
	}
	// cas 0 writes unconditionally.
	if err := a.Set("k", []byte("3"), 0); err != nil {
		t.Errorf("set with cas 0: %v", err)
	}
	// The counter is process-wide: another key, another namespace.
	if err := b.Set("k", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	v, cas, _ := a.Get("k")
	_, casB, _ := b.Get("k")
	if string(v) != "3" || cas != 3 || casB != 4 {
		t.Errorf("got %q cas %d, other namespace cas %d; want \"3\" cas 3, 4", v, cas, casB)
	}
}
