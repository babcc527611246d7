package preselect

import (
	"slices"
	"strings"

	"github.com/corazawaf/coraza/v3/types/variables"
)

// The memo remembers, per phase and across transactions, which of the
// trie's rules a value matches: the request line, the headers, the
// cookies and the query string of most requests repeat values seen before
// (a browser sends the same Accept and User-Agent on every request), and
// a value found in the memo costs one map lookup instead of a walk down
// the trie. The answer for a value is a pure function of the rule set: the
// rules' own operators and transformation functions, nothing of the
// transaction. It depends on which rules the screen judges, so an entry is
// kept per batch of stretches (the stretches one screen passes, which are
// the same on most transactions: the same paranoia-level gates jump the
// same way), and lists every rule of the batch that matches, whether
// decided before or not.
//
// Values of the body are mostly free text that seldom repeats across
// requests: REQUEST_BODY, XML, files and the response body are not
// remembered, nor are values longer than memoMaxValue bytes. The short
// values of ARGS_POST (up to memoMaxBodyValue bytes: the numbers, flags,
// enumerations and identifiers of a JSON or form body) do repeat, and are
// remembered apart (body), so that a stream of fresh ones never empties
// the memo of the headers.
type memo struct {
	batches [][]int // the batches seen, by ID
	entries memoGens
	body    memoGens
}

// memoGens is one map of the memo, in two generations, so that a stream
// of values that never come back does not cost the memo the values that
// do. Envoy adds a fresh x-request-id to every request, and a fresh
// value fills the memo as fast as a repeated one; emptying a full memo
// then drops every header value of every client, all walked down the
// trie again. Instead, each entry holds the generation that last used
// it: when the young generation is full, a new one starts and the
// entries of the one before the old are dropped. A value found in the
// old generation moves to the young: a value seen at least once per
// generation stays, one seen once is gone after two. One map, so that a
// lookup hashes the value once.
type memoGens struct {
	entries map[memoKey]memoEntry
	gen     uint32
	// What the young and the old generation hold.
	young, old memoCount
}

// memoEntry is what a value matches and the generation that last used it.
type memoEntry struct {
	rules []int32
	gen   uint32
}

// memoCount is the entries of one generation and the bytes of their values.
type memoCount struct {
	entries, bytes int
}

// memoRule is how the values of one collection are remembered: up to max
// bytes (0: not at all), in the body memo or the other.
type memoRule struct {
	max  int
	body bool
}

type memoKey struct {
	batch uint16
	vi    uint8 // the collection, as an index of phasePlan.vars
	value string
}

// Bounds of one generation of the memo of one phase plan. Past
// memoMaxEntries values, or memoMaxBytes bytes of them, the young
// generation becomes the old one and a new one fills, so a VM never
// holds more than about 2 × (memoMaxBytes + memoMaxEntries × 100 bytes),
// 1.3 MiB, in it per phase (the same for the body memo). A JSON POST of
// the bench's pool brings some 100 short values, most of them new: with
// 2,048 entries a generation, the body memo turned every 20 POSTs and
// lost values that come back, 950 allocations more per POST than with
// 4,096. Both generations together hold at most the 512 KiB of values
// one memo held before, in twice the entries. memoMaxValue lets in a
// browser's User-Agent, Accept and Referer, which are often longer than
// 128 bytes and the same on every request of a client.
const (
	memoMaxEntries   = 4096
	memoMaxBytes     = 256 << 10
	memoMaxValue     = 512
	memoMaxBodyValue = 32
	memoMaxBatches   = 64
)

// memoized says how the values of collection v are remembered.
func memoized(v variables.RuleVariable) memoRule {
	switch v {
	case variables.ArgsPost:
		return memoRule{max: memoMaxBodyValue, body: true}
	case variables.RequestBody, variables.XML, variables.Files,
		variables.MultipartName, variables.MultipartFilename, variables.MultipartPartHeaders,
		variables.ResponseBody:
		return memoRule{}
	}
	return memoRule{max: memoMaxValue}
}

// batchID returns the ID of a batch of stretches, adding it; -1 when the
// memo knows too many batches already.
func (m *memo) batchID(batch []int) int {
	for i, b := range m.batches {
		if slices.Equal(b, batch) {
			return i
		}
	}
	if len(m.batches) == memoMaxBatches {
		return -1
	}
	m.batches = append(m.batches, slices.Clone(batch))
	return len(m.batches) - 1
}

// get returns the rules value matches in collection vi for a batch. A
// value of the old generation moves to the young one.
func (m *memo) get(batch, vi int, value string, body bool) ([]int32, bool) {
	g := &m.entries
	if body {
		g = &m.body
	}
	k := memoKey{uint16(batch), uint8(vi), value}
	e, ok := g.entries[k]
	if ok && e.gen != g.gen {
		g.old.entries--
		g.old.bytes -= len(value)
		g.admit(len(value))
		e.gen = g.gen
		// A copy, as put makes: a map keeps the key of the last
		// assignment, and admit may have dropped the entry.
		k.value = strings.Clone(value)
		g.entries[k] = e
	}
	return e.rules, ok
}

// put remembers what value matches.
func (m *memo) put(batch, vi int, value string, matched []int32, body bool) {
	g := &m.entries
	if body {
		g = &m.body
	}
	var keep []int32
	if len(matched) != 0 {
		keep = slices.Clone(matched)
	}
	g.admit(len(value))
	// The value is copied: the memo outlives the transaction whose
	// memory holds it.
	g.entries[memoKey{uint16(batch), uint8(vi), strings.Clone(value)}] = memoEntry{keep, g.gen}
}

// admit makes room in the young generation for a value of n bytes, and
// counts it there. A full young generation becomes the old one, and the
// entries of the old one before it are dropped.
func (g *memoGens) admit(n int) {
	if g.entries == nil {
		g.entries = make(map[memoKey]memoEntry, 256)
	}
	if g.young.entries >= memoMaxEntries || g.young.bytes+n > memoMaxBytes {
		old := g.gen
		g.gen++
		for k, e := range g.entries {
			if e.gen != old {
				delete(g.entries, k)
			}
		}
		g.young, g.old = memoCount{}, g.young
	}
	g.young.entries++
	g.young.bytes += n
}

// len returns the entries of both generations.
func (g *memoGens) len() int { return len(g.entries) }
