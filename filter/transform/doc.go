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
// transformation does not change it. For the preselection, Lookup gives a
// function by name, LookupInto the variant that appends to a reused buffer
// (Into), and Triggers the bytes without which a function changes nothing.
//
// Files, by role:
//   - transform.go: the registry (Register, Lookup, LookupInto, Names, Into).
//   - triggers.go: Triggers: for most functions, bytes without which it
//     changes nothing (where its first scan stops).
//   - simple.go: lowercase and removeWhitespace (with an Into), removeNulls,
//     compressWhitespace, trim, trimLeft, trimRight, length, sha1,
//     hexEncode.
//   - cmdline.go, base64.go: cmdLine and base64Decode (with an Into).
//   - comments.go: replaceComments, removeCommentsChar, removeComments.
//   - path.go: normalizePath and normalizePathWin (and the -ise spellings).
//   - urldecode.go, urldecodeuni.go, jsdecode.go, cssdecode.go,
//     escapeseqdecode.go, htmlentitydecode.go, utf8tounicode.go: one
//     decoder each; decodehelpers.go: the digit and escape helpers they
//     share.
//
// Tests (the test binary never calls Register, so Coraza's built-ins stay
// the reference):
//   - harness_test.go: runs a built-in through a real rule; equalOnCorpus
//     and fuzzEqual compare a function with it; every name is a built-in's.
//   - simple_test.go, comments_test.go, path_test.go, decode_test.go: each
//     function equals the built-in on the corpus and edge cases, most with
//     a fuzz target; simple_test.go and decode_test.go also check that an
//     unchanged value comes back without allocating, a changed one with
//     one buffer.
//   - mixes_test.go: the same equality on mixes of the tokens each one
//     reacts to.
//   - into_test.go: each Into gives what its function gives.
//   - triggers_test.go: a value without the trigger bytes is unchanged.
package transform
