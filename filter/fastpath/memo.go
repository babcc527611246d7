package fastpath

import (
	"sync"
)

// memo remembers, per regexp, the outcome for values it has judged
// before: requests repeat header values, cookies and parts of bodies, and
// the CRS evaluates many regexps over each of them. It holds at most
// memoMaxBytes of values; when full it is emptied and refills with what
// follows. On a proxy-wasm VM there is one memo per VM (Go globals); the
// lock only matters for native use, where WAFs may run concurrently.
type memo struct {
	mu    sync.Mutex
	m     map[memoKey]memoResult
	bytes int
}

type memoKey struct {
	re    *compiledRx
	value string
}

// memoResult is the outcome: nil when the regexp does not match, else the
// submatch positions (FindStringSubmatchIndex), or empty positions when
// they were not computed.
type memoResult struct {
	matched bool
	pos     []int
}

const (
	// memoMaxBytes bounds the values (and positions) held.
	memoMaxBytes = 2 << 20
	// Shorter values are matched about as fast as they are looked up;
	// longer ones are unlikely to come back.
	memoMinValue = 16
	memoMaxValue = 16 << 10
)

var rxMemo = memo{m: map[memoKey]memoResult{}}

func memoizable(value string) bool {
	return len(value) >= memoMinValue && len(value) <= memoMaxValue
}

func (c *memo) get(re *compiledRx, value string) (memoResult, bool) {
	c.mu.Lock()
	r, ok := c.m[memoKey{re, value}]
	c.mu.Unlock()
	return r, ok
}

// put stores a copy of value: the strings Coraza hands to operators may
// share memory with buffers that are reused after the transaction.
func (c *memo) put(re *compiledRx, value string, r memoResult) {
	size := len(value) + 8*len(r.pos) + 64
	c.mu.Lock()
	if c.bytes+size > memoMaxBytes {
		clear(c.m)
		c.bytes = 0
	}
	c.m[memoKey{re, string([]byte(value))}] = r
	c.bytes += size
	c.mu.Unlock()
}
