package preselect

import (
	"fmt"
	"strings"
	"testing"
)

// TestMemo_bytes: a generation of the memo of one phase holds at most
// memoMaxBytes bytes of values; past them it becomes the old generation
// and a new one fills.
func TestMemo_bytes(t *testing.T) {
	var m memo
	long := strings.Repeat("a", memoMaxValue)
	n := memoMaxBytes / memoMaxValue
	value := func(i int) string {
		return long[:len(long)-4] + string(rune('A'+i/676)) + string(rune('A'+i/26%26)) + string(rune('A'+i%26)) + "x"
	}
	for i := 0; i < n; i++ {
		m.put(0, 0, value(i), nil, false)
	}
	if y := m.entries.young; y.entries != n || y.bytes != n*memoMaxValue || m.entries.old.entries != 0 {
		t.Fatalf("after %d values of %d bytes: %d entries, %d bytes, %d old", n, memoMaxValue, y.entries, y.bytes, m.entries.old.entries)
	}
	m.put(0, 0, "one more", []int32{3}, false)
	if y, o := m.entries.young, m.entries.old; y.entries != 1 || y.bytes != len("one more") || o.entries != n || o.bytes != n*memoMaxValue || m.entries.len() != n+1 {
		t.Errorf("past %d bytes: young %+v, old %+v, %d in all; want the full generation old, then the new value", memoMaxBytes, y, o, m.entries.len())
	}
	if got, ok := m.get(0, 0, "one more", false); !ok || len(got) != 1 || got[0] != 3 {
		t.Errorf("the value put after the turn: %v %v", got, ok)
	}
	// A third generation drops the first: the memo never holds more than
	// two generations' bytes.
	for i := 0; i < n; i++ {
		m.put(0, 0, value(i)+"z", nil, false)
	}
	if got := m.entries.young.bytes + m.entries.old.bytes; got > 2*memoMaxBytes {
		t.Errorf("%d bytes in both generations, want at most %d", got, 2*memoMaxBytes)
	}
	bytes := 0
	for k := range m.entries.entries {
		bytes += len(k.value)
	}
	if got := m.entries.young.bytes + m.entries.old.bytes; bytes != got {
		t.Errorf("the entries hold %d bytes, the generations count %d", bytes, got)
	}
	if _, ok := m.get(0, 0, value(0), false); ok {
		t.Error("a value of the first generation, never read, is still there after two turns")
	}
	if m.body.len() != 0 {
		t.Errorf("the body memo holds %d entries: want none", m.body.len())
	}
}

// TestMemo_generations: values read again in every generation stay in
// the memo however many fresh values pass (a request ID per request);
// a value seen once is gone after two generations.
func TestMemo_generations(t *testing.T) {
	var m memo
	hot := []string{"Mozilla/5.0 (X11; Linux x86_64)", "text/html", "en-US,en;q=0.9"}
	for i, v := range hot {
		m.put(0, 1, v, []int32{int32(i)}, false)
	}
	m.put(0, 1, "once", nil, false)
	for i := 0; i < 10*memoMaxEntries; i++ {
		m.put(0, 1, fmt.Sprintf("%08x-5b1e-4c3a-9f2d-%012x", i, i*7), nil, false)
		if i%500 == 0 {
			// Each hot value is read well within a generation.
			for j, v := range hot {
				if got, ok := m.get(0, 1, v, false); !ok || len(got) != 1 || got[0] != int32(j) {
					t.Fatalf("after %d fresh values: %q gives %v %v", i, v, got, ok)
				}
			}
		}
		if n := m.entries.len(); n > 2*memoMaxEntries {
			t.Fatalf("after %d fresh values: %d entries, want at most %d", i, n, 2*memoMaxEntries)
		}
	}
	if _, ok := m.get(0, 1, "once", false); ok {
		t.Error("a value seen once is still remembered after ten generations")
	}
	// A value read from the old generation is the young one's again, once.
	var g memo
	g.put(0, 1, "moves", []int32{7}, false)
	for i := 0; i < memoMaxEntries; i++ {
		g.put(0, 1, fmt.Sprint(i), nil, false)
	}
	key := memoKey{0, 1, "moves"}
	if e, ok := g.entries.entries[key]; !ok || e.gen != g.entries.gen-1 {
		t.Fatalf("after a full generation the value is not in the old one: %+v %v", e, ok)
	}
	old, young := g.entries.old, g.entries.young
	if got, ok := g.get(0, 1, "moves", false); !ok || len(got) != 1 || got[0] != 7 {
		t.Fatalf("read from the old generation: %v %v", got, ok)
	}
	if e := g.entries.entries[key]; e.gen != g.entries.gen {
		t.Errorf("after the read the value is of generation %d, want the young %d", e.gen, g.entries.gen)
	}
	if g.entries.old.entries != old.entries-1 || g.entries.young.entries != young.entries+1 {
		t.Errorf("counts old %+v -> %+v, young %+v -> %+v: want one entry moved", old, g.entries.old, young, g.entries.young)
	}
	// Read again, it stays where it is.
	g.get(0, 1, "moves", false)
	if g.entries.young.entries != young.entries+1 {
		t.Errorf("a second read counted the value again: young %+v", g.entries.young)
	}
}
