package preselect

import (
	"strings"

	"testing"
	"unsafe"

	"github.com/wafguard/wafguard/filter/fastpath"
)

// madeTrie is root → urldecodeuni → removewhitespace, and root →
// removewhitespace: on a value without '%' both leaves hold the same
// string.
func madeTrie(t *testing.T) (pp *phasePlan, url, viaURL, direct *node) {
	t.Helper()
	pp = &phasePlan{root: &node{}}
	pp.nodes = []*node{pp.root}
	url = pp.root.child("urldecodeuni", nil, pp)
	viaURL = url.child("removewhitespace", nil, pp)
	direct = pp.root.child("removewhitespace", nil, pp)
	if url.trig == 0 || viaURL.into == nil {
		t.Fatal("urldecodeuni has no trigger bytes, or removewhitespace no Into")
	}
	return pp, url, viaURL, direct
}

// TestStep_made: a step whose made chain and transformation were done on
// another path of the same value's walk takes that path's string and
// union scan instead of transforming and scanning again; the string stays
// in the buffer when the path that made it is done.
func TestStep_made(t *testing.T) {
	pp, url, viaURL, direct := madeTrie(t)
	var st txState
	value := "a b c d"
	base := st.startValue()
	sig := uint64(sigUnknown)
	root := st.newScan(pp)

	mark := len(st.tbuf)
	out1, changed1, k1, _, c1 := st.step(pp, direct, value, root, &sig, 0)
	if out1 != "abcd" || !changed1 || k1 == root || c1 <= 0 {
		t.Fatalf("root → removewhitespace: %q changed %v scan %d chain %d", out1, changed1, k1, c1)
	}
	st.truncate(mark)
	if len(st.tbuf) != 4 {
		t.Fatalf("after the path: %d bytes in the buffer, want the 4 of the string kept", len(st.tbuf))
	}

	out, _, k, _, cu := st.step(pp, url, value, root, &sig, 0)
	if out != value || k != root || cu != 0 {
		t.Fatalf("urldecodeuni of a value without %%: %q scan %d chain %d, want the value, scan %d, chain 0", out, k, cu, root)
	}
	scans := len(st.scans)
	out2, changed2, k2, _, c2 := st.step(pp, viaURL, out, k, &sig, cu)
	if unsafe.StringData(out2) != unsafe.StringData(out1) || changed2 != changed1 || k2 != k1 || c2 != c1 {
		t.Errorf("root → urldecodeuni → removewhitespace: %q changed %v scan %d chain %d; want the string of the other path, changed %v, scan %d, chain %d",
			out2, changed2, k2, c2, changed1, k1, c1)
	}
	if len(st.scans) != scans || len(st.tbuf) != 4 {
		t.Errorf("taking what was made added %d scans and %d bytes", len(st.scans)-scans, len(st.tbuf)-4)
	}

	// The next value's walk starts with nothing made.
	st.endValue(base)
	st.startValue()
	sig = sigUnknown
	out3, _, _, _, _ := st.step(pp, viaURL, "x y", st.newScan(pp), &sig, 0)
	if out3 != "xy" {
		t.Errorf("next value: %q, want \"xy\"", out3)
	}
}

// TestStep_madeLimit: a string made into the buffer is kept while the
// buffer holds at most maxMadeBytes; past them it is made again on the
// other path, and the buffer is truncated after each path.
func TestStep_madeLimit(t *testing.T) {
	for _, c := range []struct {
		out  int // the length of the string removewhitespace makes
		kept bool
	}{{maxMadeBytes, true}, {maxMadeBytes + 1, false}} {
		pp, _, viaURL, direct := madeTrie(t)
		var st txState
		value := strings.Repeat("a", c.out) + " "
		base := st.startValue()
		sig := uint64(sigUnknown)
		root := st.newScan(pp)
		out1, _, _, _, _ := st.step(pp, direct, value, root, &sig, 0)
		st.truncate(0)
		if kept := len(st.tbuf) == c.out; kept != c.kept {
			t.Errorf("%d bytes made: %d in the buffer after the path, kept %v, want %v", c.out, len(st.tbuf), kept, c.kept)
		}
		before := len(st.tbuf)
		out2, _, _, _, _ := st.step(pp, viaURL, value, root, &sig, 0)
		if again := len(st.tbuf) > before; again == c.kept {
			t.Errorf("%d bytes made: the other path made the string again %v, want %v", c.out, again, !c.kept)
		}
		if c.kept && unsafe.StringData(out2) != unsafe.StringData(out1) {
			t.Errorf("%d bytes made: the other path did not take the first string", c.out)
		}
		if out2 != value[:c.out] {
			t.Errorf("%d bytes made: the other path's string is not the value without its space", c.out)
		}
		st.endValue(base)
		if len(st.tbuf) != 0 || st.tfloor != 0 {
			t.Errorf("after the value: %d bytes in the buffer, floor %d", len(st.tbuf), st.tfloor)
		}
	}
}

// TestChainOf_limit: the plan numbers up to maxChains made chains; past
// them a step's chain is -1, and what it makes is not kept.
func TestChainOf_limit(t *testing.T) {
	pp, _, _, direct := madeTrie(t)
	for len(pp.chainNext) < maxChains {
		before := len(pp.chainNext)
		if c := pp.chainOf(int32(max(before-1, 0)), direct.tid); c < 0 {
			t.Fatalf("chain -1 with %d numbered", before)
		}
	}
	last := int32(len(pp.chainNext) - 1)
	if c := pp.chainOf(last, direct.tid); c != -1 {
		t.Fatalf("past %d chains: chain %d, want -1", maxChains, c)
	}
	if c := pp.chainOf(last-1, direct.tid); c != last {
		t.Errorf("a chain numbered before the limit: %d, want %d", c, last)
	}
	var st txState
	st.startValue()
	sig := uint64(sigUnknown)
	root := st.newScan(pp)
	out, _, _, _, c := st.step(pp, direct, "a b", root, &sig, last)
	if out != "ab" || c != -1 {
		t.Errorf("a step past the limit: %q chain %d, want \"ab\" and -1", out, c)
	}
	if len(st.madeSteps) > int(last)+1 {
		t.Errorf("a step past the limit was kept")
	}
}

// TestStep_within: a result that is the start or the end of the value
// shares the value's union scan once that scan is done, and only then (a
// scan is made on the first value that asks for it: the shorter one would
// miss the literals of the part cut off); any other result has a scan of
// its own.
func TestStep_within(t *testing.T) {
	pp := &phasePlan{root: &node{}, hitWords: 1, union: fastpath.NewUnion(nil)}
	pp.nodes = []*node{pp.root}
	win := pp.root.child("normalizepathwin", nil, pp)
	win.fn = func(s string) (string, bool, error) { // the CRS's, for these values
		switch s {
		case "a b.":
			return "a b", true, nil
		case "a/./b":
			return "a/b", true, nil
		}
		return s, false, nil
	}
	for _, c := range []struct {
		value   string
		scanned bool
		shared  bool
	}{
		{"a b.", true, true},
		{"a b.", false, false},
		{"a/./b", true, false},
	} {
		var st txState
		st.startValue()
		sig := uint64(sigUnknown)
		root := st.newScan(pp)
		if c.scanned {
			st.hitsOf(pp, root, c.value)
		}
		_, _, k, _, _ := st.step(pp, win, c.value, root, &sig, 0)
		if shared := k == root; shared != c.shared {
			t.Errorf("%q (value scanned %v): shares the value's scan %v, want %v", c.value, c.scanned, shared, c.shared)
		}
	}
}

// TestWithin: the start or the end of a value, shorter than it.
func TestWithin(t *testing.T) {
	for _, c := range []struct {
		out, value string
		want       bool
	}{
		{"abc", "abc.", true},
		{"bc.", "abc.", true},
		{"", "abc", true},
		{"abc", "abc", false}, // not shorter: the same value, the same scan anyway
		{"b", "abc", false},   // inside, neither start nor end
		{"abcd", "abc", false},
		{"ab c", "abc", false},
	} {
		if got := within(c.out, c.value); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.out, c.value, got, c.want)
		}
	}
}

// TestKeepMade: a string outside the walk's buffer, or below its kept
// part, is kept as it is; one that reaches above the kept part (a
// parent's result passed on, a t:trim slice of it) is kept by raising the
// kept part to the buffer's end while the buffer is at most maxMadeBytes
// long, and not kept one byte past it, the kept part left where it was.
func TestKeepMade(t *testing.T) {
	for _, c := range []struct {
		buffer int // bytes in the buffer when the slice is kept
		kept   bool
	}{{maxMadeBytes, true}, {maxMadeBytes + 1, false}} {
		var st txState
		st.tbuf = append(st.tbuf, strings.Repeat("x", c.buffer)...)
		st.tfloor = 10
		outside := strings.Repeat("y", 100)
		if !st.keepMade(outside) || st.tfloor != 10 {
			t.Fatalf("%d bytes: a string outside the buffer not kept as it is (floor %d)", c.buffer, st.tfloor)
		}
		below := unsafe.String(&st.tbuf[2], 8)
		if !st.keepMade(below) || st.tfloor != 10 {
			t.Fatalf("%d bytes: a string below the kept part not kept as it is (floor %d)", c.buffer, st.tfloor)
		}
		// A slice of a result above the kept part, as t:trim returns.
		above := unsafe.String(&st.tbuf[11], c.buffer-12)
		if kept := st.keepMade(above); kept != c.kept {
			t.Fatalf("%d bytes: a slice above the kept part kept %v, want %v", c.buffer, kept, c.kept)
		}
		if want := map[bool]int{true: c.buffer, false: 10}[c.kept]; st.tfloor != want {
			t.Errorf("%d bytes: kept part ends at %d, want %d", c.buffer, st.tfloor, want)
		}
		st.truncate(0)
		if c.kept && above != strings.Repeat("x", c.buffer-12) {
			t.Errorf("%d bytes: the kept slice changed after the path's truncation", c.buffer)
		}
	}
}
