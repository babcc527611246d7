package transform

import "strings"

func init() { add("urlDecode", urlDecode) }

// urlDecode undoes form URL encoding: every '+' becomes a space and every
// '%' followed by two hexadecimal digits becomes the byte they spell. A '%'
// that is not followed by two hexadecimal digits (too close to the end, or
// a non-hex digit) stays as it is, and decoding resumes right after it, so
// "%%41" gives "%A". "%u" escapes are not special here.
//
// The "changed" flag is Coraza's: it is set as soon as the value holds a
// '%' or a '+', even when every '%' turns out to be invalid and the output
// equals the input. The input itself is returned whenever the output equals
// it, so only a real decoding allocates.
func urlDecode(input string) (string, bool, error) {
	i := strings.IndexAny(input, "%+")
	if i < 0 {
		return input, false, nil
	}
	var out []byte // allocated at the first byte that really changes
	lit := 0       // input[lit:] up to the current escape is still to be copied
	for i >= 0 {
		at := i
		var b byte
		switch {
		case input[i] == '+':
			b, i = ' ', i+1
		case i+2 < len(input) && decIsHex(input[i+1]) && decIsHex(input[i+2]):
			b, i = decHexByte(input[i+1:]), i+3
		default:
			// A '%' that starts no valid escape is kept verbatim.
			i = decNext(input, i+1, "%+")
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(input))
		}
		out = append(append(out, input[lit:at]...), b)
		lit = i
		i = decNext(input, i, "%+")
	}
	if out == nil {
		return input, true, nil
	}
	return decString(append(out, input[lit:]...)), true, nil
}
