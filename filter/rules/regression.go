//go:build !wasm

package rules

import "io/fs"

// RegressionTests returns the regression tests of the embedded CRS
// release (its tests/regression/tests/), for go-ftw and the corpus of the
// equivalence tests. Native builds only: the .wasm holds no tests.
func RegressionTests() fs.FS {
	sub, err := fs.Sub(regressionFiles, regressionDir)
	if err != nil {
		panic(err) // regressionDir is a constant folder of regressionFiles
	}
	return sub
}
