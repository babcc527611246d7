package transform

import "slices"

func init() { addInto("base64Decode", base64DecodeInto) }

// base64Value maps a byte to its value in the standard Base64 alphabet
// (A-Z a-z 0-9 + /), or to -1.
var base64Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for v := 0; v < len(alphabet); v++ {
		t[alphabet[v]] = int8(v)
	}
	return t
}()

// base64DecodeInto decodes standard Base64 leniently and never fails:
//   - CR and LF are skipped anywhere;
//   - '=' or a space ends the decoding (padding is optional);
//   - any other byte outside the alphabet (base64url's '-' and '_'
//     included) also ends it, keeping what was decoded before it;
//   - a last group of 2 or 3 digits gives 1 or 2 bytes, a lone last digit
//     nothing.
//
// It always reports a change, even when the value is empty.
func base64DecodeInto(dst []byte, input string) ([]byte, bool, bool) {
	if input == "" {
		return dst, true, true
	}
	out := slices.Grow(dst, len(input)/4*3+2)
	var acc uint32 // the digits of the group so far, 6 bits each
	digits := 0
loop:
	for i := 0; i < len(input); i++ {
		c := input[i]
		switch c {
		case '\r', '\n':
			continue
		case '=', ' ':
			break loop
		}
		v := base64Value[c]
		if v < 0 {
			break
		}
		acc = acc<<6 | uint32(v)
		digits++
		if digits == 4 {
			out = append(out, byte(acc>>16), byte(acc>>8), byte(acc))
			acc, digits = 0, 0
		}
	}
	switch digits {
	case 2:
		out = append(out, byte(acc>>4))
	case 3:
		out = append(out, byte(acc>>10), byte(acc>>2))
	}
	return out, false, true
}
