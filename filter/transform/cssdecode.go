package transform

import (
	"strings"
	"unicode/utf8"
)

func init() { add("cssDecode", cssDecode) }

// cssDecode decodes CSS 2 escapes:
//   - a backslash and 1 to 6 hex digits give that code point, UTF-8
//     encoded, with three adjustments: 0, surrogates and values above
//     U+10FFFF give U+FFFD, and full-width ASCII (U+FF01 to U+FF5E) gives
//     the plain ASCII character; one white-space byte (C isspace) right
//     after the digits belongs to the escape and is dropped;
//   - a backslash before a newline is dropped along with the newline;
//   - a backslash before any other byte is dropped and the byte kept;
//   - a backslash ending the value is dropped.
//
// As in Coraza, "changed" is set whenever the value holds a backslash.
// Without one the input itself is returned.
func cssDecode(input string) (string, bool, error) {
	i := strings.IndexByte(input, '\\')
	if i < 0 {
		return input, false, nil
	}
	out := make([]byte, 0, len(input)+2) // "\0" grows by one byte
	lit := 0                             // input[lit:i] is still to be copied
	for i >= 0 {
		out = append(out, input[lit:i]...)
		i++ // past the backslash
		if i == len(input) {
			lit = i
			break
		}
		n := 0
		var code rune
		for n < 6 && i+n < len(input) && decIsHex(input[i+n]) {
			code = code<<4 | rune(decHexVal[input[i+n]])
			n++
		}
		switch {
		case n > 0:
			switch {
			case code == 0:
				code = utf8.RuneError
			case 0xff01 <= code && code <= 0xff5e:
				code -= 0xfee0 // full-width ASCII
			}
			out = utf8.AppendRune(out, code) // invalid code points give U+FFFD
			i += n
			if i < len(input) && decIsCSpace(input[i]) {
				i++
			}
		case input[i] == '\n':
			i++
		default:
			out = append(out, input[i])
			i++
		}
		lit = i
		i = decNext(input, i, `\`)
	}
	return decString(append(out, input[lit:]...)), true, nil
}
