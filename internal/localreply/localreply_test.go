package localreply

import (
	"bytes"
	"testing"
)

// TestPairs: the header pairs as proxy-wasm hosts read them (proxy-wasm
// ABI: a count, the lengths, then each key and value with a NUL after it).
func TestPairs(t *testing.T) {
	got := pairs([][2]string{{"retry-after", "2"}, {"x", ""}})
	want := []byte{
		2, 0, 0, 0,
		11, 0, 0, 0, 1, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0,
	}
	want = append(want, "retry-after\x002\x00x\x00\x00"...)
	if !bytes.Equal(got, want) {
		t.Errorf("pairs: %q\nwant   %q", got, want)
	}
	if got := pairs(nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Errorf("no pairs: %q", got)
	}
}
