// Package httpsyntax holds the few HTTP syntax checks that the filter and the
// admission guard both make on configuration and on request headers. It
// allocates nothing, so the per-request checks are safe on the hot path.
package httpsyntax

import "strings"

// ContentLengthOver reports whether a Content-Length value is over limit. A
// value that is not a decimal number is left to Envoy's codec, which rejects
// it before any filter runs; an overlong number counts as over.
func ContentLengthOver(cl string, limit int64) bool {
	n, overlong, ok := parseContentLength(cl)
	return ok && (overlong || n > limit)
}

// ContentLength parses a Content-Length value: ok is false when it is not a
// decimal number (Envoy's codec rejects those before any filter runs); an
// overlong number gives 1<<62.
func ContentLength(cl string) (n int64, ok bool) {
	n, overlong, ok := parseContentLength(cl)
	if overlong {
		return 1 << 62, ok
	}
	return n, ok
}

// parseContentLength reads a decimal Content-Length; overlong is set, and
// what follows ignored, once the value passes about 1<<62.
func parseContentLength(cl string) (n int64, overlong, ok bool) {
	if cl == "" {
		return 0, false, false
	}
	for i := 0; i < len(cl); i++ {
		c := cl[i]
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if n > (1<<62)/10 {
			return n, true, true
		}
		n = n*10 + int64(c-'0')
	}
	return n, false, true
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

// AuthorityHost returns the host of a request's :authority as the plugin
// reads it everywhere: both the rule set (per_authority_directives) and the
// per-authority caps (admission.per_authority) are chosen by it, so a
// request can never get the rule set of one host and the cap of another.
// The host is in ASCII lower case, without surrounding spaces, without the
// port, and without one trailing dot ("example.com." names the same host as
// "example.com"). A bracketed IPv6 address keeps its brackets; a bare one
// (several colons, no brackets) has no port and stays whole. It allocates
// only to lower-case.
func AuthorityHost(authority string) string {
	host, _ := splitAuthority(authority)
	return host
}

// AuthorityWithPort returns the authority in AuthorityHost's form followed
// by ":port" when it has a port. It allocates only when the host changed
// and a port follows, or to lower-case.
func AuthorityWithPort(authority string) string {
	host, port := splitAuthority(authority)
	if port == "" {
		return host
	}
	a := strings.TrimSpace(authority)
	if len(a) == len(host)+1+len(port) && a[:len(host)] == host {
		return a // already in normal form
	}
	return host + ":" + port
}

func splitAuthority(authority string) (host, port string) {
	a := strings.TrimSpace(authority)
	host = a
	if i := strings.LastIndexByte(a, ':'); i >= 0 && !strings.Contains(a[i:], "]") {
		// A colon outside brackets starts the port, unless the value is
		// a bare IPv6 address.
		if strings.Count(a, ":") == 1 || strings.HasPrefix(a, "[") {
			host, port = strings.TrimSpace(a[:i]), a[i+1:]
		}
	}
	if len(host) > 1 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	if HasUpper(host) {
		host = strings.ToLower(host)
	}
	if HasUpper(port) {
		port = strings.ToLower(port)
	}
	return host, port
}

// HasUpper reports whether s has an ASCII upper-case letter.
func HasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// MediaType returns the media type of a Content-Type value, lower case and
// without parameters. It allocates only when the value has upper case.
func MediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	if HasUpper(ct) {
		ct = strings.ToLower(ct)
	}
	return ct
}
