package transform

import (
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// owned maps a lower-case transformation name to this package's function.
var owned = map[string]plugintypes.Transformation{}

// An Into is a transformation that writes its result after the bytes of
// dst instead of into memory of its own: out is dst with the result
// appended, unless unchanged, when the result is input itself (out is
// dst); changed is the flag the transformation reports. The rule
// preselection walks a value through chains of transformations and
// drops each result once the rules below it are judged: with an Into it
// writes them all into one reused buffer, where the function allocates a
// string for each.
type Into func(dst []byte, input string) (out []byte, unchanged, changed bool)

// intos maps a lower-case transformation name to its Into, for those that
// have one.
var intos = map[string]Into{}

// addInto records a transformation that has an Into: the function is the
// Into with the result in memory of its own.
func addInto(name string, fn Into) {
	add(name, func(input string) (string, bool, error) {
		out, unchanged, changed := fn(nil, input)
		if unchanged {
			return input, changed, nil
		}
		return builtString(out), changed, nil
	})
	intos[strings.ToLower(name)] = fn
}

// LookupInto returns the Into of the named transformation (any case), or
// false when it has none.
func LookupInto(name string) (Into, bool) {
	fn, ok := intos[strings.ToLower(name)]
	return fn, ok
}

// add records one implementation; the files of this package call it from
// init.
func add(name string, fn plugintypes.Transformation) {
	owned[strings.ToLower(name)] = fn
}

// Register replaces Coraza's built-in transformations with this package's
// for every WAF compiled afterwards. It only fills Coraza's registry (no
// host call), so it may run from an init function.
func Register() {
	for name, fn := range owned {
		plugins.RegisterTransformation(name, fn)
	}
}

// Lookup returns this package's implementation of the named transformation
// (any case), or false when the name is left to Coraza.
func Lookup(name string) (plugintypes.Transformation, bool) {
	fn, ok := owned[strings.ToLower(name)]
	return fn, ok
}

// Names returns the lower-case names this package implements.
func Names() []string {
	names := make([]string, 0, len(owned))
	for n := range owned {
		names = append(names, n)
	}
	return names
}
