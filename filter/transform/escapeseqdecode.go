package transform

import "strings"

func init() { add("escapeSeqDecode", escapeSeqDecode) }

// escapeSeqDecode decodes ANSI C escape sequences, each to one byte:
// \a \b \f \n \r \t \v give the control character; \\ \? \' \" give the
// character; \xHH (or \XHH) gives the byte; \O, \OO or \OOO (octal, up to
// three digits) gives the low byte of the value, so \777 gives 0xff and
// \400 gives 0x00. A backslash before any other byte, including a \x
// without two hex digits, is dropped and the byte kept. A backslash ending
// the value stays. When nothing changes the input itself is returned, with
// "changed" false.
func escapeSeqDecode(input string) (string, bool, error) {
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
		if c, ok := decControlEscape(next); ok {
			b, i = c, i+2
		} else if (next == 'x' || next == 'X') && i+3 < len(input) && decIsHex(input[i+2]) && decIsHex(input[i+3]) {
			b, i = decHexByte(input[i+2:]), i+4
		} else if decIsOctal(next) {
			end := i + 2 // one past the last octal digit
			for end < i+4 && end < len(input) && decIsOctal(input[end]) {
				end++
			}
			for _, d := range []byte(input[i+1 : end]) {
				b = b<<3 | (d - '0') // overflow drops the high bits
			}
			i = end
		} else {
			// \\ \? \' \" and every unknown escape: the byte itself.
			b, i = next, i+2
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
