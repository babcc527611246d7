package fastpath

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// pm is the @pm operator, and @pmFromFile (alias @pmf) with the patterns
// read from a data file. As the built-in operators do, it lower-cases the
// patterns (strings.ToLower), finds them with the same Aho-Corasick
// library and options (ASCII case-insensitive, leftmost-longest; a DFA
// for @pm, the NFA for @pmFromFile), and when the rule captures sets TX.0
// to TX.9 to the first ten matches the library's iterator yields. It
// differs from them only in handing the value to the library without
// copying it. Judge hands out judge, which reaches the same verdict with
// an automaton of its own (pmSet) that allocates nothing.
type pm struct {
	*compiledPM
	// patterns are what ac is built from; with a memoizer they may come
	// from an earlier build under the same key, as with the built-in.
	patterns []string
	// minLen is the byte length of the shortest pattern this operator was
	// given (0 when one is empty or there are none): a shorter value
	// cannot match.
	minLen int
	dfa    bool
}

// compiledPM is what the memoizer shares between rules. The library's
// automaton (ac) is built on first use: only a rule that captures needs
// its matches, and the patterns of a data file make it large (the CRS's
// @pmFromFile lists take tens of MB to build). set decides without it,
// unless it is nil (patterns too long for it), or the patterns hold an
// empty one (whose verdict newPMSet learns from the library): ac is then
// built at once.
type compiledPM struct {
	patterns []string
	dfa      bool
	once     sync.Once
	lib      ahocorasick.AhoCorasick
	set      *pmSet
	// unionLits are the literals a Union takes for the list
	// (unionLiterals), worked out on first use.
	unionOnce sync.Once
	unionLits []string
}

// ac returns the library's automaton.
func (c *compiledPM) ac() ahocorasick.AhoCorasick {
	c.once.Do(func() {
		b := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{
			AsciiCaseInsensitive: true,
			MatchOnlyWholeWords:  false,
			MatchKind:            ahocorasick.LeftMostLongestMatch,
			DFA:                  c.dfa,
		})
		c.lib = b.Build(c.patterns)
	})
	return c.lib
}

func newPM(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	lower := strings.ToLower(opts.Arguments)
	// One pattern per space: two spaces in a row give an empty pattern,
	// which matches where the library's prefilter lets it (see pmSet), as
	// with the built-in.
	patterns := strings.Split(lower, " ")
	return buildPM(opts.Memoizer, "wafguard:pm:"+lower, patterns, true)
}

// newPMFromFile reads the patterns, one a line, from the data file named by
// the whole argument: the built-in takes it as one name even when it holds
// spaces. Lines are trimmed; blank lines and lines that start with '#' are
// skipped. Like the built-in, it scans with bufio.Scanner, so a line longer
// than its buffer ends the list without an error, and it memoizes the
// automaton under the search path and the name only, not the root or the
// file's contents.
func newPMFromFile(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	name := opts.Arguments
	data, err := readDataFile(name, opts.Path, opts.Root)
	if err != nil {
		return nil, err
	}
	var patterns []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		patterns = append(patterns, strings.ToLower(line))
	}
	return buildPM(opts.Memoizer, "wafguard:pmf:"+strings.Join(opts.Path, ",")+name, patterns, false)
}

func buildPM(m plugintypes.Memoizer, key string, patterns []string, dfa bool) (plugintypes.Operator, error) {
	v, err := memoize(m, key, func() (any, error) {
		c := &compiledPM{patterns: patterns, dfa: dfa}
		c.set = newPMSet(patterns, c.ac)
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	c := v.(*compiledPM)
	return &pm{compiledPM: c, patterns: c.patterns, minLen: shortest(patterns), dfa: dfa}, nil
}

// shortest is the byte length of the shortest pattern, 0 when one is empty
// or there are none.
func shortest(patterns []string) int {
	n := 0
	for i, p := range patterns {
		if p == "" {
			return 0
		}
		if i == 0 || len(p) < n {
			n = len(p)
		}
	}
	return n
}

func (o *pm) Evaluate(tx plugintypes.TransactionState, value string) bool {
	if len(value) < o.minLen {
		return false
	}
	if !tx.Capturing() {
		return o.judge(value)
	}
	it := o.ac().IterByte(stringBytes(value))
	n := 0
	for ; n < 10; n++ {
		m := it.Next()
		if m == nil {
			break
		}
		tx.CaptureField(n, value[m.Start():m.End()])
	}
	return n > 0
}

// matches is the verdict without captures, from the library.
func (o *pm) matches(value string) bool {
	return len(value) >= o.minLen && o.ac().IterByte(stringBytes(value)).Next() != nil
}

// judge is the verdict of matches without allocating: what Judge hands
// out.
func (o *pm) judge(value string) bool {
	if o.set == nil {
		return o.matches(value)
	}
	return len(value) >= o.minLen && o.set.match(value)
}

// sameAs reports whether other, built for the same name and argument,
// judges every value as o does: a data file's contents may differ between
// two compiles.
func (o *pm) sameAs(other plugintypes.Operator) bool {
	p, ok := other.(*pm)
	return ok && p.dfa == o.dfa && p.minLen == o.minLen && slices.Equal(p.patterns, o.patterns)
}

// stringBytes views s as bytes without copying; the automaton only reads
// its haystack.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

var errNoDataDirs = errors.New("no directory to look for the data file in")

// readDataFile reads name from root: as is when it is absolute, else from
// the first of dirs that holds it. As with the built-in, an error other
// than "does not exist" (os.IsNotExist) stops the search, and when no
// directory holds the file the last directory's error is returned.
func readDataFile(name string, dirs []string, root fs.FS) ([]byte, error) {
	if path.IsAbs(name) {
		return fs.ReadFile(root, name)
	}
	if len(dirs) == 0 {
		return nil, errNoDataDirs
	}
	var err error
	for _, dir := range dirs {
		var b []byte
		if b, err = fs.ReadFile(root, path.Join(dir, name)); err == nil {
			return b, nil
		}
		if !os.IsNotExist(err) {
			return nil, err
		}
	}
	return nil, err
}
