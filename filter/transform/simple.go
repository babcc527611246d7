package transform

import (
	"crypto/fips140"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

func init() {
	addInto("lowercase", lowerCaseInto)
	add("removeNulls", removeNulls)
	addInto("removeWhitespace", removeWhitespaceInto)
	add("compressWhitespace", compressWhitespace)
	add("length", length)
	add("sha1", sha1Digest)
	add("hexEncode", hexEncode)
	add("trim", trimBoth)
	add("trimLeft", trimLeft)
	add("trimRight", trimRight)
}

// builtString turns a buffer this package has just filled, and never
// touches again, into a string without a second copy.
func builtString(buf []byte) string {
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// replacementChar is U+FFFD in UTF-8, what a rune-by-rune rewrite of a
// string through strings.Map puts in place of each byte that does not
// start a valid UTF-8 sequence.
const replacementChar = "\uFFFD"

// invalidAt reports whether s[i:] starts with a byte that is not a valid
// UTF-8 sequence, given r and size as decoded there.
func invalidAt(r rune, size int) bool {
	return r == utf8.RuneError && size == 1
}

// lowerCaseInto lower-cases the value with Unicode case mapping (so 'İ' gives
// 'i' and the Kelvin sign gives 'k', possibly changing the length). As
// soon as anything changes, every byte that is not valid UTF-8 becomes
// U+FFFD, and an invalid byte counts as a change by itself: this is what
// strings.ToLower does. The value is returned as it is when it holds no
// upper-case rune and is valid UTF-8.
func lowerCaseInto(dst []byte, input string) ([]byte, bool, bool) {
	i := 0
	for i < len(input) {
		c := input[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(input[i:])
		if invalidAt(r, size) || unicode.ToLower(r) != r {
			break
		}
		i += size
	}
	if i == len(input) {
		return dst, true, false
	}
	out := append(slices.Grow(dst, len(input)+utf8.UTFMax), input[:i]...)
	for i < len(input) {
		c := input[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(input[i:])
		if invalidAt(r, size) {
			out = append(out, replacementChar...)
		} else {
			out = utf8.AppendRune(out, unicode.ToLower(r))
		}
		i += size
	}
	return out, false, true
}

// removeNulls deletes every NUL byte; "changed" says whether there was one.
func removeNulls(input string) (string, bool, error) {
	i := strings.IndexByte(input, 0)
	if i < 0 {
		return input, false, nil
	}
	out := make([]byte, i, len(input)-1)
	copy(out, input[:i])
	for i++; i < len(input); i++ {
		if input[i] != 0 {
			out = append(out, input[i])
		}
	}
	return builtString(out), true, nil
}

// removeWhitespaceInto deletes every rune that unicode.IsSpace calls a space
// (the ASCII ones, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000). The value is rewritten rune by rune as soon as
// it holds a space or a byte that is not valid UTF-8, and each such byte
// then becomes U+FFFD; "changed" only reports removed spaces, so a value
// whose only defect is invalid UTF-8 comes back rewritten but "unchanged",
// as Coraza's does.
func removeWhitespaceInto(dst []byte, input string) ([]byte, bool, bool) {
	i := 0
	for i < len(input) {
		c := input[i]
		if c < utf8.RuneSelf {
			if asciiSpace(c) {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(input[i:])
		if invalidAt(r, size) || unicode.IsSpace(r) {
			break
		}
		i += size
	}
	if i == len(input) {
		return dst, true, false
	}
	out := append(slices.Grow(dst, len(input)+2*utf8.UTFMax), input[:i]...)
	changed := false
	for i < len(input) {
		c := input[i]
		if c < utf8.RuneSelf {
			if asciiSpace(c) {
				changed = true
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(input[i:])
		switch {
		case invalidAt(r, size):
			out = append(out, replacementChar...)
		case unicode.IsSpace(r):
			changed = true
		default:
			out = append(out, input[i:i+size]...)
		}
		i += size
	}
	return out, false, changed
}

// asciiSpace reports whether c is one of the six ASCII white-space bytes
// of C's isspace: space, \t, \n, \v, \f, \r.
func asciiSpace(c byte) bool {
	return c == ' ' || ('\t' <= c && c <= '\r')
}

// compressSpaceAt reports whether the rune r (of size bytes) that starts
// at input[i] is white space for compressWhitespace: an ASCII space
// character, U+0085, U+00A0, or a lone 0xA0 byte (a Latin-1 non-breaking
// space) at a rune boundary. A lone 0x85 byte is not.
func compressSpaceAt(input string, i int, r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x85, 0xA0:
		return true
	}
	return input[i] == 0xA0
}

// compressWhitespace replaces each run of white space (see compressSpaceAt)
// by one ASCII space. "changed" is set exactly when the output differs
// from the input: a run longer than one, or a lone white-space rune other
// than ' '. Multi-byte runes are kept whole.
func compressWhitespace(input string) (string, bool, error) {
	prevSpace := false
	i := 0
	for i < len(input) {
		r, size := rune(input[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(input[i:])
		}
		if compressSpaceAt(input, i, r) {
			if r != ' ' || prevSpace {
				break
			}
			prevSpace = true
		} else {
			prevSpace = false
		}
		i += size
	}
	if i == len(input) {
		return input, false, nil
	}
	out := make([]byte, i, len(input))
	copy(out, input[:i])
	inRun := prevSpace
	for i < len(input) {
		r, size := rune(input[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(input[i:])
		}
		if compressSpaceAt(input, i, r) {
			if !inRun {
				out = append(out, ' ')
				inRun = true
			}
		} else {
			out = append(out, input[i:i+size]...)
			inRun = false
		}
		i += size
	}
	return builtString(out), true, nil
}

// length replaces the value by its length in bytes, in decimal. It always
// reports a change.
func length(input string) (string, bool, error) {
	return strconv.Itoa(len(input)), true, nil
}

// errSHA1FIPS is what sha1Digest returns when the process runs in a FIPS
// 140-3 mode: Coraza then refuses t:sha1 (the rule keeps the value as it
// was), and so does this package.
var errSHA1FIPS = errors.New("sha1 transformation is unavailable in FIPS 140-3 mode")

// sha1Digest replaces the value by its raw 20-byte SHA-1 digest and always
// reports a change, except in FIPS mode where it fails (see errSHA1FIPS).
func sha1Digest(input string) (string, bool, error) {
	if fips140.Enabled() {
		return input, false, errSHA1FIPS
	}
	sum := sha1.Sum([]byte(input))
	return string(sum[:]), true, nil
}

// hexEncode replaces each byte by two lower-case hexadecimal digits. It
// always reports a change, even for an empty value.
func hexEncode(input string) (string, bool, error) {
	return hex.EncodeToString([]byte(input)), true, nil
}

// trimSpace reports whether c is cut by the trim transformations: the six
// bytes of C's isspace (no Unicode space, no NBSP).
func trimSpace(c byte) bool { return asciiSpace(c) }

// trimBoth cuts white space (see trimSpace) from both ends of the value.
// The result is a slice of the input; "changed" says whether it is shorter.
func trimBoth(input string) (string, bool, error) {
	lo, hi := 0, len(input)
	for lo < hi && trimSpace(input[lo]) {
		lo++
	}
	for hi > lo && trimSpace(input[hi-1]) {
		hi--
	}
	return input[lo:hi], hi-lo != len(input), nil
}

// trimLeft cuts white space (see trimSpace) from the start of the value.
func trimLeft(input string) (string, bool, error) {
	lo := 0
	for lo < len(input) && trimSpace(input[lo]) {
		lo++
	}
	return input[lo:], lo != 0, nil
}

// trimRight cuts white space (see trimSpace) from the end of the value.
func trimRight(input string) (string, bool, error) {
	hi := len(input)
	for hi > 0 && trimSpace(input[hi-1]) {
		hi--
	}
	return input[:hi], hi != len(input), nil
}
