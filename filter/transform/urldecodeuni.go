package transform

func init() { add("urlDecodeUni", urlDecodeUni) }

// urlDecodeUni decodes like urlDecode ('+' to space, "%HH" to a byte) and
// also decodes the IIS-style "%uHHHH" escape ('u' in either case) to a
// single byte:
//   - a code point that ModSecurity's best-fit table for code page 20127
//     (US-ASCII) folds to an ASCII character gives that character, e.g.
//     %u00e9 gives 'e' and %u2019 gives an apostrophe;
//   - full-width ASCII, U+FF01 to U+FF5E, gives the ASCII character it
//     is a wide form of (%uff1c gives '<');
//   - any other code point gives its low byte (%u0130 gives 0x30).
//
// Invalid escapes are kept verbatim: a '%' not followed by two hex digits
// stays and decoding resumes after it; a "%u" not followed by four hex
// digits stays and decoding resumes after the 'u'. Unlike urlDecode,
// "changed" is set only when a byte really changed, and the input is then
// returned as is, without allocating.
func urlDecodeUni(input string) (string, bool, error) {
	i := decNext(input, 0, "%+")
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
		case i+1 < len(input) && (input[i+1] == 'u' || input[i+1] == 'U'):
			if i+5 < len(input) && decIsHex(input[i+2]) && decIsHex(input[i+3]) &&
				decIsHex(input[i+4]) && decIsHex(input[i+5]) {
				code := rune(decHexByte(input[i+2:]))<<8 | rune(decHexByte(input[i+4:]))
				b, i = uniToByte(code), i+6
			} else {
				i = decNext(input, i+2, "%+") // "%u" kept verbatim
				continue
			}
		case i+2 < len(input) && decIsHex(input[i+1]) && decIsHex(input[i+2]):
			b, i = decHexByte(input[i+1:]), i+3
		default:
			i = decNext(input, i+1, "%+") // '%' kept verbatim
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
		return input, false, nil
	}
	return decString(append(out, input[lit:]...)), true, nil
}

// uniToByte is the byte a %uHHHH escape of code point code decodes to.
func uniToByte(code rune) byte {
	if code < rune(len(bestFitASCII)) {
		if b := bestFitASCII[code]; b != 0 {
			return b
		}
	}
	if 0xff01 <= code && code <= 0xff5e {
		return byte(code - 0xfee0) // full-width ASCII
	}
	return byte(code)
}

// bestFitASCII maps a code point below U+2123 to the ASCII character that
// ModSecurity's best-fit table for code page 20127 (the codepage 20127
// section of its unicode.mapping, which Coraza v3.8.1 reproduces for
// urlDecodeUni) folds it to, or 0 when that table has no entry for it. The
// table's other entries, U+FF01 to U+FF5E, are the full-width forms, which
// uniToByte folds by arithmetic (the fallback rule for U+FFxx gives the
// same byte for all of them, U+FF1F included).
var bestFitASCII = func() (t [0x2123]byte) {
	for _, r := range bestFitRuns {
		for k := 0; k < len(r.to); k++ {
			t[r.from+rune(k)] = r.to[k]
		}
	}
	return t
}()

// bestFitRuns lists the best-fit folds as runs of consecutive code points:
// the k-th byte of to is the fold of code point from+k.
var bestFitRuns = []struct {
	from rune
	to   string
}{
	// Latin-1 supplement: symbols, then accented letters.
	{0x00a0, " !c"},
	{0x00a4, "$Y|"},
	{0x00a9, "Ca<"},
	{0x00ad, "-R"},
	{0x00b2, "23"},
	{0x00b7, ".,1o>"},
	{0x00c0, "AAAAAAACEEEEIIIIDNOOOOO"},
	{0x00d8, "OUUUUY"},
	{0x00e0, "aaaaaaaceeeeiiii"},
	{0x00f1, "nooooo"},
	{0x00f8, "ouuuuy"},
	// Latin extended-A.
	{0x00ff, "yAaAaAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIi"},
	{0x0134, "JjKk"},
	{0x0139, "LlLlLl"},
	{0x0141, "LlNnNnNn"},
	{0x014c, "OoOoOoOoRrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyYZ"},
	{0x017b, "ZzZz"},
	// Latin extended-B.
	{0x0180, "b"},
	{0x0189, "D"},
	{0x0191, "Ff"},
	{0x0197, "I"},
	{0x019a, "l"},
	{0x019f, "OOo"},
	{0x01ab, "t"},
	{0x01ae, "TUu"},
	{0x01b6, "z"},
	{0x01cd, "AaIiOoUuUuUuUuUu"},
	{0x01de, "Aa"},
	{0x01e4, "GgGgKkOoOo"},
	{0x01f0, "j"},
	// IPA, spacing modifiers, combining marks.
	{0x0261, "g"},
	{0x02b9, `'"`},
	{0x02bc, "'"},
	{0x02c4, "^"},
	{0x02c6, "^"},
	{0x02c8, "'"},
	{0x02cb, "`"},
	{0x02cd, "_"},
	{0x02dc, "~"},
	{0x0300, "`"},
	{0x0302, "^~"},
	{0x030e, `"`},
	{0x0331, "__"},
	// General punctuation: spaces, dashes, quotes, bullets, primes.
	{0x2000, "       "},
	{0x2010, "--"},
	{0x2013, "--"},
	{0x2018, "'',"},
	{0x201c, `"""`},
	{0x2022, "."},
	{0x2026, "."},
	{0x2032, "'"},
	{0x2035, "`"},
	{0x2039, "<>"},
	// Letterlike symbols: the trade mark sign.
	{0x2122, "T"},
}
