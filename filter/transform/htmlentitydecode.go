package transform

import (
	"strings"

	"golang.org/x/net/html"
)

func init() { add("htmlEntityDecode", htmlEntityDecode) }

// htmlEntityDecode decodes HTML character references the way an HTML5
// parser does in text: named references (with or without the ';', for the
// legacy names that allow it, taking the longest such name), decimal and
// hex numeric references (the ';' optional), Windows-1252 numbers 0x80-0x9F
// mapped to the characters they meant, and 0, surrogates and values above
// U+10FFFF replaced by U+FFFD. A '&' that starts no reference is kept.
//
// Coraza's built-in is golang.org/x/net/html's UnescapeString, and so is
// the decoding here: the full named-reference table (over 2,200 names) and
// its matching rules live there, and sharing them is what keeps this
// function equal to the built-in. What this function adds is the fast path
// (no '&' that can start a reference, or nothing decoded: the input itself
// comes back, and only the first case is free of any copy).
//
// "changed" is Coraza's: set when the output length differs from the
// input length. A reference whose UTF-8 replacement is exactly as long as
// itself therefore changes the value without setting it.
func htmlEntityDecode(input string) (string, bool, error) {
	if !htmlMayDecode(input) {
		return input, false, nil
	}
	out := html.UnescapeString(input)
	if out == input {
		return input, false, nil
	}
	return out, len(out) != len(input), nil
}

// htmlMayDecode reports whether some '&' of s can start a character
// reference: "&#" and a decimal digit, "&#x" (or "&#X") and a hex digit,
// or '&' and an ASCII letter or digit (a name, which only the table can
// confirm). Any other '&' is kept as it is by the decoder.
func htmlMayDecode(s string) bool {
	for i := strings.IndexByte(s, '&'); i >= 0; i = decNext(s, i+1, "&") {
		if i+1 >= len(s) {
			return false
		}
		c := s[i+1]
		if c == '#' {
			switch {
			case i+2 >= len(s):
			case s[i+2] == 'x' || s[i+2] == 'X':
				if i+3 < len(s) && decIsHex(s[i+3]) {
					return true
				}
			case '0' <= s[i+2] && s[i+2] <= '9':
				return true
			}
			continue
		}
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}
