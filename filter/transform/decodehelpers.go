package transform

import (
	"strings"
	"unsafe"
)

// Helpers shared by the decoding transformations of this package
// (urlDecode, urlDecodeUni, jsDecode, cssDecode, escapeSeqDecode). Their
// names carry a "dec" prefix so that they cannot collide with the helpers
// of the other transformations living in this package.

// decHexVal holds, for every byte, its value as a hexadecimal digit
// (0-15, either case), or -1 for a byte that is not one.
var decHexVal = func() (t [256]int8) {
	for b := range t {
		switch {
		case '0' <= b && b <= '9':
			t[b] = int8(b - '0')
		case 'a' <= b && b <= 'f':
			t[b] = int8(b-'a') + 10
		case 'A' <= b && b <= 'F':
			t[b] = int8(b-'A') + 10
		default:
			t[b] = -1
		}
	}
	return t
}()

// decIsHex reports whether b is a hexadecimal digit.
func decIsHex(b byte) bool { return decHexVal[b] >= 0 }

// decHexByte returns the byte written by the two hexadecimal digits
// s[0] and s[1]; the caller has checked both with decIsHex.
func decHexByte(s string) byte {
	return byte(decHexVal[s[0]])<<4 | byte(decHexVal[s[1]])
}

// decIsOctal reports whether b is an octal digit.
func decIsOctal(b byte) bool { return '0' <= b && b <= '7' }

// decIsCSpace reports whether b is white space for C's isspace in the "C"
// locale: space, \t, \n, \v, \f, \r.
func decIsCSpace(b byte) bool {
	return b == ' ' || ('\t' <= b && b <= '\r')
}

// decControlEscape maps the letter of a C-style control escape (\a \b \f
// \n \r \t \v) to the control byte it stands for.
func decControlEscape(b byte) (byte, bool) {
	switch b {
	case 'a':
		return '\a', true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'v':
		return '\v', true
	}
	return 0, false
}

// decString returns the bytes of buf as a string without copying them.
// buf is a buffer this package has just filled and never touches again.
func decString(buf []byte) string {
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// decNext returns the index of the first byte of s at or after from that
// is one of chars, or -1.
func decNext(s string, from int, chars string) int {
	var j int
	if len(chars) == 1 {
		j = strings.IndexByte(s[from:], chars[0])
	} else {
		j = strings.IndexAny(s[from:], chars)
	}
	if j >= 0 {
		return from + j
	}
	return -1
}
