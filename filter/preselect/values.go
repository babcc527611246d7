package preselect

import (
	"strings"
	"unicode/utf8"

	"github.com/corazawaf/coraza/v3/collection"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// valuesOf returns the values of the stable collection v (bit i of the
// plan), read once per phase.
func (st *txState) valuesOf(i int, v varSlot, tx plugintypes.TransactionState) []string {
	if !st.have[i] {
		st.have[i] = true
		st.values[i] = st.read(tx, v.v, v.key)
	}
	return st.values[i]
}

// read returns the values of collection v in tx, kept in st.strs: those
// of key when key is not "" (as Coraza looks a key up, FindString; a
// collection without keys has none), else all of them, a Single's without
// the match data FindAll would allocate.
func (st *txState) read(tx plugintypes.TransactionState, v variables.RuleVariable, key string) []string {
	if key == "" {
		if k := namedParent(v); k >= 0 {
			return st.namedRead(tx, k).values
		}
		switch v {
		case variables.Args, variables.ArgsNames:
			// The parts' values or keys, one after the other.
			var parts [3]*namedRead
			for i, k := range [...]int{argsGet, argsPost, argsPath} {
				parts[i] = st.namedRead(tx, k)
			}
			start := len(st.strs)
			for _, n := range parts {
				if v == variables.Args {
					st.strs = append(st.strs, n.values...)
				} else {
					st.strs = append(st.strs, n.keys...)
				}
			}
			return st.strs[start:len(st.strs):len(st.strs)]
		case variables.ArgsGetNames:
			return st.namedRead(tx, argsGet).keys
		case variables.ArgsPostNames:
			return st.namedRead(tx, argsPost).keys
		case variables.RequestHeadersNames:
			return st.namedRead(tx, requestHeaders).keys
		case variables.RequestCookiesNames:
			return st.namedRead(tx, requestCookies).keys
		case variables.ResponseHeadersNames:
			return st.namedRead(tx, responseHeaders).keys
		}
	}
	switch v {
	case variables.RequestHeaders, variables.RequestCookies, variables.ResponseHeaders:
		if key == "" {
			break
		}
		// Coraza's maps for these fold keys to lower case, key among
		// them (lookupKey): its values are those of the collection,
		// read once this phase, whose key folds to it. FindString
		// would make two slices for each read.
		n := st.namedRead(tx, namedParent(v))
		start := len(st.strs)
		for i, k := range n.keys {
			if lowerIs(k, key) {
				st.strs = append(st.strs, n.values[i])
			}
		}
		return st.strs[start:len(st.strs):len(st.strs)]
	}
	switch col := tx.Collection(v); c := col.(type) {
	case nil:
		return nil
	case collection.Keyed:
		if key != "" {
			return st.keep(c.FindString(key))
		}
		return st.keep(c.FindAll())
	case collection.Single:
		if key != "" {
			return nil
		}
		start := len(st.strs)
		st.strs = append(st.strs, c.Get())
		return st.strs[start:len(st.strs):len(st.strs)]
	default:
		if key != "" {
			return nil
		}
		return st.keep(col.FindAll())
	}
}

// lowerIs reports whether strings.ToLower(s) is lower, without making
// the lower-case string for an ASCII s.
func lowerIs(s, lower string) bool {
	if len(s) != len(lower) {
		// ToLower keeps the length of an ASCII string.
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return strings.ToLower(s) == lower
			}
		}
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return strings.ToLower(s) == lower
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// The collections whose keys make another collection of Coraza's: the
// *_NAMES collections list, for each value of their parent, its key
// (collections.NamedCollectionNames), and ARGS_NAMES is those of ARGS_GET,
// ARGS_POST and ARGS_PATH. A screen that reads both a collection and its
// names (the CRS's phase 2 reads ARGS_POST and ARGS_NAMES), or ARGS and
// its parts, then reads the collection once: FindAll makes a match data for every value, some 60 KB
// for the 500 values of a JSON POST of the bench's pool.
const (
	argsGet = iota
	argsPost
	argsPath
	requestHeaders
	requestCookies
	responseHeaders
)

var namedParents = [...]variables.RuleVariable{
	argsGet:         variables.ArgsGet,
	argsPost:        variables.ArgsPost,
	argsPath:        variables.ArgsPath,
	requestHeaders:  variables.RequestHeaders,
	requestCookies:  variables.RequestCookies,
	responseHeaders: variables.ResponseHeaders,
}

// namedParent returns v's index in namedParents, -1 when it is not one.
func namedParent(v variables.RuleVariable) int {
	for k, p := range namedParents {
		if p == v {
			return k
		}
	}
	return -1
}

// namedRead is one collection of namedParents as read this phase: its
// values and, in the same order, their keys (kept in strs).
type namedRead struct {
	gen          uint32
	values, keys []string
}

// namedRead returns collection namedParents[k], read once this phase.
func (st *txState) namedRead(tx plugintypes.TransactionState, k int) *namedRead {
	n := &st.named[k]
	if n.gen == st.namedGen && n.gen != 0 {
		return n
	}
	n.gen = st.namedGen
	n.values, n.keys = nil, nil
	col := tx.Collection(namedParents[k])
	if col == nil {
		return n
	}
	mds := col.FindAll()
	start := len(st.strs)
	for _, md := range mds {
		st.strs = append(st.strs, md.Value())
	}
	mid := len(st.strs)
	for _, md := range mds {
		st.strs = append(st.strs, md.Key())
	}
	n.values = st.strs[start:mid:mid]
	n.keys = st.strs[mid:len(st.strs):len(st.strs)]
	return n
}

// keep returns the values of mds, kept in st.strs.
func (st *txState) keep(mds []types.MatchData) []string {
	start := len(st.strs)
	for _, md := range mds {
		st.strs = append(st.strs, md.Value())
	}
	return st.strs[start:len(st.strs):len(st.strs)]
}

// txValuesOf returns the values of TX:key now, read once per screen.
func (st *txState) txValuesOf(key string, tx plugintypes.TransactionState) []string {
	if vals, ok := st.constTX[key]; ok {
		return vals
	}
	for _, e := range st.tx {
		if e.key == key {
			return e.values
		}
	}
	// Get, not FindString: the values alone, in one allocation (TX is
	// a collections.Map, whose Get and FindString read the same key).
	vals := tx.Variables().TX().Get(key)
	st.tx = append(st.tx, txValues{key: key, values: vals})
	return vals
}
