// Package registertest holds the tests of fastpath.Register, Instance and
// Owns. They live apart from package fastpath's tests because Register
// replaces Coraza's built-in operators for the rest of the test binary,
// and those tests compare against the built-ins.
package registertest
