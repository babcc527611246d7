package transform

import "unicode/utf8"

func init() { add("utf8toUnicode", utf8toUnicode) }

// utf8toUnicode rewrites every non-ASCII character of a UTF-8 value as a
// %uHHHH escape: lower-case hex digits, zero-padded to four, more digits
// for code points above U+FFFF (U+1F600 gives "%u1f600"). Each byte that
// is not part of valid UTF-8 (a stray continuation byte, a truncated or
// overlong sequence, an encoded surrogate) counts as U+FFFD and gives
// "%ufffd". ASCII bytes are kept. A value that is all ASCII is returned as
// is, with "changed" false.
func utf8toUnicode(input string) (string, bool, error) {
	first := -1
	for k := 0; k < len(input); k++ {
		if input[k] >= utf8.RuneSelf {
			first = k
			break
		}
	}
	if first < 0 {
		return input, false, nil
	}
	// Size the output exactly, then fill it.
	size := first
	for k := first; k < len(input); {
		if input[k] < utf8.RuneSelf {
			size++
			k++
			continue
		}
		r, w := utf8.DecodeRuneInString(input[k:])
		size += 2 + u8HexLen(r)
		k += w
	}
	out := make([]byte, first, size)
	copy(out, input[:first])
	for k := first; k < len(input); {
		if input[k] < utf8.RuneSelf {
			out = append(out, input[k])
			k++
			continue
		}
		r, w := utf8.DecodeRuneInString(input[k:])
		out = append(out, '%', 'u')
		for shift := 4 * (u8HexLen(r) - 1); shift >= 0; shift -= 4 {
			out = append(out, "0123456789abcdef"[r>>shift&0xf])
		}
		k += w
	}
	return decString(out), true, nil
}

// u8HexLen is the number of hex digits utf8toUnicode writes for r: at
// least four.
func u8HexLen(r rune) int {
	switch {
	case r > 0xfffff:
		return 6
	case r > 0xffff:
		return 5
	}
	return 4
}
