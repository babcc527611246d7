package transform

import "slices"

func init() { addInto("cmdLine", cmdLineInto) }

// cmdLineInto normalises a command line the way ModSecurity's t:cmdLine does,
// byte by byte (ASCII only):
//   - the quoting and escaping bytes \ " ' ^ are deleted;
//   - each run of the separators space, tab, CR, LF, ',' and ';' becomes
//     one space;
//   - a space that such a run left just before '/' or '(' is deleted;
//   - A-Z become a-z.
//
// "changed" is set exactly when the output differs from the input, and
// the input itself comes back when it does not.
func cmdLineInto(dst []byte, input string) ([]byte, bool, bool) {
	// Find the first byte where the output departs from the input. Before
	// it, each separator is a lone ' ' that the output keeps.
	afterSpace := false
	i := 0
scan:
	for ; i < len(input); i++ {
		switch c := input[i]; c {
		case '\\', '"', '\'', '^':
			break scan
		case ' ':
			if afterSpace {
				break scan
			}
			afterSpace = true
		case '\t', '\r', '\n', ',', ';':
			break scan
		case '/', '(':
			if afterSpace {
				break scan
			}
			afterSpace = false
		default:
			if 'A' <= c && c <= 'Z' {
				break scan
			}
			afterSpace = false
		}
	}
	if i == len(input) {
		return dst, true, false
	}
	// A space deleted before '/' or '(' is one this function wrote: out
	// never shrinks into dst.
	out := append(slices.Grow(dst, len(input)), input[:i]...)
	// afterSpace: the last byte of out is the space a separator run gave.
	for ; i < len(input); i++ {
		c := input[i]
		switch c {
		case '\\', '"', '\'', '^':
			// deleted
		case ' ', '\t', '\r', '\n', ',', ';':
			if !afterSpace {
				out = append(out, ' ')
				afterSpace = true
			}
		case '/', '(':
			if afterSpace {
				out = out[:len(out)-1]
			}
			out = append(out, c)
			afterSpace = false
		default:
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			afterSpace = false
		}
	}
	return out, false, true
}
