package scratch

import (
	"testing"
	"unsafe"
)

// TestTruncate: the kept part is unchanged; the part given up is poisoned
// exactly when the build says so, and a string lent from it sees it.
func TestTruncate(t *testing.T) {
	b := []byte("keep-drop")
	lent := unsafe.String(&b[5], 4)
	b = Truncate(b, 5)
	if string(b) != "keep-" {
		t.Fatalf("kept %q, want %q", b, "keep-")
	}
	want := "drop"
	if Poisoned {
		want = string([]byte{Poison, Poison, Poison, Poison})
	}
	if lent != want {
		t.Fatalf("a string lent from the region given up reads %q, want %q (Poisoned=%v)", lent, want, Poisoned)
	}
	if got := Truncate(b, 5); len(got) != 5 {
		t.Fatalf("Truncate to the same length: %d bytes, want 5", len(got))
	}
}

// TestRelease: the whole buffer up to its capacity is poisoned when the
// build says so, and left alone otherwise.
func TestRelease(t *testing.T) {
	b := make([]byte, 3, 8)
	copy(b[:8], "abcdefgh")
	Release(b)
	full := b[:8]
	for i, c := range full {
		want := "abcdefgh"[i]
		if Poisoned {
			want = Poison
		}
		if c != want {
			t.Fatalf("byte %d after Release is %#x, want %#x (Poisoned=%v)", i, c, want, Poisoned)
		}
	}
}
