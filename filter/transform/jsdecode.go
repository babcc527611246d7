package transform

import "strings"

func init() { add("jsDecode", jsDecode) }

// jsDecode decodes JavaScript escapes, each to one byte:
//   - \u{H..H} (1 to 6 hex digits, closed by '}') and \uHHHH give the low
//     byte of the code point, except that full-width ASCII (U+FF01 to
//     U+FF5E) gives the ASCII character it is a wide form of;
//   - \xHH gives the byte;
//   - \O, \OO, \OOO (octal) give the byte; a third digit is taken only
//     when the first is 0-3, so that the value fits a byte (\477 is \47
//     then '7');
//   - \a \b \f \n \r \t \v give the control character, and a backslash
//     before any other byte (including a malformed \u or \x) is dropped.
//
// Only 'u' and 'x' in lower case introduce the code point escapes. A
// backslash ending the value stays. When nothing changes the input itself
// is returned, with "changed" false.
func jsDecode(input string) (string, bool, error) {
	i := strings.IndexByte(input, '\\')
	if i < 0 {
		return input, false, nil
	}
	var out []byte // allocated at the first escape
	lit := 0       // input[lit:] up to the current escape is still to be copied
	for i >= 0 && i+1 < len(input) {
		at := i
		var b byte
		next := input[i+1]
		if n := jsBraceEscapeLen(input, i); n > 0 {
			// \u{H..H}: n hex digits from i+3, then '}'.
			var code rune
			for _, d := range []byte(input[i+3 : i+3+n]) {
				code = code<<4 | rune(decHexVal[d])
			}
			b, i = jsCodePointByte(code), i+4+n
		} else if next == 'u' && i+5 < len(input) && decIsHex(input[i+2]) && decIsHex(input[i+3]) &&
			decIsHex(input[i+4]) && decIsHex(input[i+5]) {
			code := rune(decHexByte(input[i+2:]))<<8 | rune(decHexByte(input[i+4:]))
			b, i = jsCodePointByte(code), i+6
		} else if next == 'x' && i+3 < len(input) && decIsHex(input[i+2]) && decIsHex(input[i+3]) {
			b, i = decHexByte(input[i+2:]), i+4
		} else if decIsOctal(next) {
			n := 1
			for n < 3 && i+1+n < len(input) && decIsOctal(input[i+1+n]) {
				n++
			}
			if n == 3 && next > '3' {
				n = 2 // three digits would overflow a byte
			}
			for _, d := range []byte(input[i+1 : i+1+n]) {
				b = b<<3 | (d - '0')
			}
			i += 1 + n
		} else {
			if c, ok := decControlEscape(next); ok {
				b = c
			} else {
				b = next
			}
			i += 2
		}
		if out == nil {
			out = make([]byte, 0, len(input))
		}
		out = append(append(out, input[lit:at]...), b)
		lit = i
		i = decNext(input, i, `\`)
	}
	if out == nil {
		return input, false, nil
	}
	return decString(append(out, input[lit:]...)), true, nil
}

// jsBraceEscapeLen returns the number of hex digits (1 to 6) of a
// well-formed \u{H..H} escape starting at s[at], or 0 when there is none.
func jsBraceEscapeLen(s string, at int) int {
	if at+3 >= len(s) || s[at+1] != 'u' || s[at+2] != '{' {
		return 0
	}
	n := 0
	for n < 6 && at+3+n < len(s) && decIsHex(s[at+3+n]) {
		n++
	}
	if n == 0 || at+3+n >= len(s) || s[at+3+n] != '}' {
		return 0
	}
	return n
}

// jsCodePointByte is the byte jsDecode writes for a \u escape of code:
// its low byte, shifted to ASCII for the full-width forms U+FF01-U+FF5E.
func jsCodePointByte(code rune) byte {
	if 0xff01 <= code && code <= 0xff5e {
		return byte(code - 0xfee0)
	}
	return byte(code)
}
