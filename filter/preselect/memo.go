package preselect

import (
	"slices"

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
	entries map[memoKey][]int32
	body    map[memoKey][]int32
	// The bytes of the values each map holds.
	bytes, bodyBytes int
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

// Bounds of the memo of one phase plan. Past memoMaxEntries values, or
// memoMaxBytes bytes of them, the memo is emptied and fills again, so a VM
// never holds more than about memoMaxBytes + memoMaxEntries × 100 bytes in
// it per phase (the same for the body memo). memoMaxValue lets in a
// browser's User-Agent, Accept and Referer, which are often longer than
// 128 bytes and the same on every request of a client.
const (
	memoMaxEntries   = 4096
	memoMaxBytes     = 512 << 10
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

// get returns the rules value matches in collection vi for a batch.
func (m *memo) get(batch, vi int, value string, body bool) ([]int32, bool) {
	entries := m.entries
	if body {
		entries = m.body
	}
	r, ok := entries[memoKey{uint16(batch), uint8(vi), value}]
	return r, ok
}

// put remembers what value matches. The value is copied: the memo
// outlives the transaction whose memory holds it.
func (m *memo) put(batch, vi int, value string, matched []int32, body bool) {
	entries, size := &m.entries, &m.bytes
	if body {
		entries, size = &m.body, &m.bodyBytes
	}
	if *entries == nil || len(*entries) >= memoMaxEntries || *size+len(value) > memoMaxBytes {
		*entries = make(map[memoKey][]int32, 256)
		*size = 0
	}
	*size += len(value)
	var keep []int32
	if len(matched) != 0 {
		keep = slices.Clone(matched)
	}
	(*entries)[memoKey{uint16(batch), uint8(vi), string([]byte(value))}] = keep
}
