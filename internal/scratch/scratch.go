// Package scratch gives up the parts of reused byte buffers that strings
// are lent from.
//
// The plugin writes transformed values, log lines and joined directive
// lines into buffers it reuses, and lends their bytes as strings without
// a copy (unsafe.String). Such a string is valid only until the region
// it points into is written again. Every place that shortens or drops
// such a buffer does it through Truncate or Release, so that a build with
// the tag wafguard_poison can overwrite the region given up with Poison
// at once: a string still pointing there then reads bytes no request
// holds, and the tests that compare verdicts (the differential tests, the
// fuzzers, the CRS suite's native run) see the difference on the first
// use, not only when a later write happens to land on it.
//
// Without the tag, Truncate is b[:n] and Release does nothing.
package scratch

// Poison is the byte a poisoned region is filled with: not ASCII, not
// valid UTF-8 on its own, and in no rule's literal.
const Poison = 0xA5

// Truncate returns b[:n], giving up b[n:len(b)] (poisoned when Poisoned).
func Truncate(b []byte, n int) []byte {
	if Poisoned && n < len(b) {
		fill(b[n:])
	}
	return b[:n]
}

// Release gives up the whole of b, up to its capacity (poisoned when
// Poisoned), before the buffer is dropped or reused from its start.
func Release(b []byte) {
	if Poisoned {
		fill(b[:cap(b)])
	}
}

func fill(b []byte) {
	for i := range b {
		b[i] = Poison
	}
}
