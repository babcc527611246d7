package preselect

import (
	"strings"
	"testing"
)

// TestMemo_bytes: the memo of one phase holds at most memoMaxBytes bytes
// of values; past them it is emptied and fills again.
func TestMemo_bytes(t *testing.T) {
	var m memo
	long := strings.Repeat("a", memoMaxValue)
	n := memoMaxBytes / memoMaxValue
	for i := 0; i < n; i++ {
		m.put(0, 0, long[:len(long)-4]+string(rune('A'+i/676))+string(rune('A'+i/26%26))+string(rune('A'+i%26))+"x", nil, false)
	}
	if len(m.entries) != n || m.bytes != n*memoMaxValue {
		t.Fatalf("after %d values of %d bytes: %d entries, %d bytes", n, memoMaxValue, len(m.entries), m.bytes)
	}
	m.put(0, 0, "one more", []int32{3}, false)
	if len(m.entries) != 1 || m.bytes != len("one more") {
		t.Errorf("past %d bytes: %d entries, %d bytes; want the memo emptied, then the new value", memoMaxBytes, len(m.entries), m.bytes)
	}
	if got, ok := m.get(0, 0, "one more", false); !ok || len(got) != 1 || got[0] != 3 {
		t.Errorf("the value put after emptying: %v %v", got, ok)
	}
	if m.bodyBytes != 0 || len(m.body) != 0 {
		t.Errorf("the body memo holds %d entries, %d bytes: want none", len(m.body), m.bodyBytes)
	}
}
