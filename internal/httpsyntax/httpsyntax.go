// Package httpsyntax holds the few HTTP syntax checks that the filter and the
// admission guard both make on configuration and on request headers. It
// allocates nothing, so the per-request checks are safe on the hot path.
package httpsyntax

import "strings"

// ContentLengthOver reports whether a Content-Length value is over limit. A
// value that is not a decimal number is left to Envoy's codec, which rejects
// it before any filter runs; an overlong number counts as over.
func ContentLengthOver(cl string, limit int64) bool {
	if cl == "" {
		return false
	}
	var n int64
	for i := 0; i < len(cl); i++ {
		c := cl[i]
		if c < '0' || c > '9' {
			return false
		}
		if n > (1<<62)/10 {
			return true
		}
		n = n*10 + int64(c-'0')
	}
	return n > limit
}

// ContentLength parses a Content-Length value: ok is false when it is not a
// decimal number (Envoy's codec rejects those before any filter runs); an
// overlong number gives 1<<62.
func ContentLength(cl string) (n int64, ok bool) {
	if cl == "" {
		return 0, false
	}
	for i := 0; i < len(cl); i++ {
		c := cl[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<62)/10 {
			return 1 << 62, true
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Token reports whether s is an RFC 9110 token (a header name, a media type
// part).
func Token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// FieldValue reports whether s is safe as a header value we send: visible
// ASCII, spaces and tabs, and so no CR, LF or NUL.
func FieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}
