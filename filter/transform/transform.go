// Package transform holds this project's implementations of the Coraza
// transformations the OWASP CRS uses. Register installs them under
// Coraza's names, replacing the built-in ones, so that the rules and the
// rule preselection (filter/preselect) transform values with the same code:
// what the preselection computes for a value is by construction what the
// rule's operator will see. Each one is tested equal to Coraza v3.8.1's
// built-in (output, "changed" flag, error behaviour) on the CRS regression
// corpus and by fuzzing.
//
// The functions return their input unchanged, without copying, when the
// transformation does not change it.
package transform

import (
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// owned maps a lower-case transformation name to this package's function.
var owned = map[string]plugintypes.Transformation{}

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
