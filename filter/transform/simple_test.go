package transform

import (
	"strings"
	"testing"
	"unsafe"
)

// spaceRunes holds every rune that some transformation here treats as
// white space, and a few near misses, both as runes and as stray bytes.
var spaceRunes = []string{
	" ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "\x00", "\x85", "\xa0",
	"\u0085", "\u00a0", "\u1680", "\u2000", "\u2005", "\u200a", "\u200b", "\u2028", "\u2029",
	"\u202f", "\u205f", "\u3000", "\ufeff", "\u180e",
}

// withSpaces returns each of spaceRunes alone, doubled, paired with ' ',
// and between letters.
func withSpaces() []string {
	var out []string
	for _, s := range spaceRunes {
		out = append(out, s, s+s, " "+s, s+" ", "a"+s+"b", "a"+s+s+"b", "a "+s+" b", s+"x"+s)
	}
	return out
}

var caseEdgeCases = []string{
	"", "a", "A", "abc", "ABC", "aBc", "@[`{", "AZaz", "\x7f", "ÀÉÎÕÜ", "àéîõü", "ÀbC", "İ", "I\u0307",
	"\u212a", "\u212b", "ẞ", "ß", "Σ", "ΣΑΣ", "Ⱥ", "ȺȾ", "\u0130x", "ǅ", "Ǆ", "Ω", "\u2126",
	"Ａ", "ａ", "\U00010400", "\U00010428", "\xff", "a\xff", "A\xff", "\xffA", "\xc3", "\xc3\x28",
	"\xed\xa0\x80", "\xf4\x90\x80\x80", "\ufffd", "\ufffdA", "é\xff", "plain\xe2\x82", "x\xc0\xaf",
}

func TestLowercaseEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "lowercase", caseEdgeCases...)
}

func FuzzLowercase(f *testing.F) { fuzzEqual(f, "lowercase") }

func TestRemoveNullsEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "removeNulls", "", "\x00", "\x00\x00", "a\x00", "\x00a", "a\x00b\x00\x00c", "\\0", "%00", "\xc0\x80")
}

var whitespaceEdgeCases = append(withSpaces(),
	"", "abc", "\xff", "a\xffb", "\xff ", " \xff", "\xc2", "\xc2 ", "\xe2\x80", "\xe2\x80 ", "\ufffd",
	"\ufffd \xff", "é \xc3", "a b\xa0c\x85d", "\xe0\xa0", "\xe0\xa0\xa0", "  \t\t\n\n  ", "x\u3000\u3000y",
)

func TestRemoveWhitespaceEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "removeWhitespace", whitespaceEdgeCases...)
}

func FuzzRemoveWhitespace(f *testing.F) { fuzzEqual(f, "removeWhitespace") }

func TestCompressWhitespaceEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "compressWhitespace", append(whitespaceEdgeCases,
		"a b c", "a  b", " a", "a ", "  ", "\xa0", "à", "Å", "ą", "你", "à à", "\xc2\xa0\xa0", "\xa0\xa0",
		"a\xa0\x85b", "\x85", "\x85\x85", "é\xa0é", "\xe4\xbd\xa0", " \xa0", "\xa0 ", " \t", "\t ",
	)...)
}

func FuzzCompressWhitespace(f *testing.F) { fuzzEqual(f, "compressWhitespace") }

func TestLengthEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "length", "", "a", "é", "\x00", strings.Repeat("x", 12345))
}

func TestSHA1EqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "sha1", "", "a", "abc", "\x00", "\xff", strings.Repeat("x", 1000))
}

func TestHexEncodeEqualsBuiltin(t *testing.T) {
	var all strings.Builder
	for c := 0; c < 256; c++ {
		all.WriteByte(byte(c))
	}
	equalOnCorpus(t, "hexEncode", "", "a", "\x00", "\xff", all.String())
}

var trimEdgeCases = append(withSpaces(),
	"", "a", " a ", "\t\n\v\f\r a b \r\f\v\n\t", "      ", " \x00 ", "\x00 a \x00", "\xa0a\xa0",
	"\u00a0a\u00a0", "\u3000a\u3000", " \u3000 a", "a \u2000", " \xff ",
)

func TestTrimEqualsBuiltin(t *testing.T)      { equalOnCorpus(t, "trim", trimEdgeCases...) }
func TestTrimLeftEqualsBuiltin(t *testing.T)  { equalOnCorpus(t, "trimLeft", trimEdgeCases...) }
func TestTrimRightEqualsBuiltin(t *testing.T) { equalOnCorpus(t, "trimRight", trimEdgeCases...) }

var cmdLineEdgeCases = []string{
	"", "a", "A", "cat /etc/passwd", "cat  /etc/passwd", "cat\t/etc", "c\\a\"t' ^/etc", "a ,;\t\r\n b",
	"a,b", "a;b", "a ;b", " ", "  ", ",", ", ", " ,", "/", " /", "  /", ", /", "(", " (", "a (b)",
	"a\" /", "a \"/", "a ^ /", " \\(", "a b", "a b c", "a/ b", "a( b", "a /b /c", "a\v\fb", "\x00 \x00",
	"ÀB", "\xff A", "echo Hello;ls -la /TMP", "a ,/", "a\\ /", "a /\"/", "//", " //", "(( ((",
}

func TestCmdLineEqualsBuiltin(t *testing.T) { equalOnCorpus(t, "cmdLine", cmdLineEdgeCases...) }

func FuzzCmdLine(f *testing.F) { fuzzEqual(f, "cmdLine") }

var base64EdgeCases = []string{
	"", "Q", "QQ", "QUI", "QUJD", "QUJDRA", "QUJDRA=", "QUJDRA==", "QUJDRA==QUJD", "QU=JD", "QUJ D",
	" QUJD", "=QUJD", "QU\r\nJD", "\r\n", "\nQ\nQ\n", "QUJD\r", "QU-JD", "QU_JD", "QU.JD", "QU\tJD",
	"QU\x00JD", "QU\xffJD", "\xff", "QUJD\x80", "+/+/", "////", "++++", "AAAA", "AA", "AAA", "AAAAA",
	"YWJj", "YWJj=", "YW=Jj", "!!!", "aGVsbG8gd29ybGQ", "aGVsbG8gd29ybGQ=", "aGVsbG8gd29ybGQh",
	"PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "Zm9v\nYmFy", "Zm9v YmFy", "QQ==\n", "Q===", "0123456789",
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
}

func TestBase64DecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "base64Decode", base64EdgeCases...)
}

func FuzzBase64Decode(f *testing.F) { fuzzEqual(f, "base64Decode") }

// TestSimpleReturnInputWhenUnchanged checks the fast path of this
// package's scanning transformations: a value they leave as it is comes
// back as the very same string, without an allocation.
func TestSimpleReturnInputWhenUnchanged(t *testing.T) {
	cases := map[string][]string{
		"lowercase":          {"", "plain text", "é ß \ufffd"},
		"removeNulls":        {"", "plain text"},
		"removeWhitespace":   {"", "plain_text", "é\ufffd"},
		"compressWhitespace": {"", "plain text with single spaces", "é à"},
		"trim":               {"", "plain text", "\xa0x\xa0"},
		"trimLeft":           {"", "plain text "},
		"trimRight":          {"", " plain text"},
		"cmdLine":            {"", "cat etc/passwd", "a(b) c/d"},
		"replaceComments":    {"", "plain text */ -- #"},
		"removeCommentsChar": {"", "plain text - / * < <!-"},
		"removeComments":     {"", "plain text */ -> - <!-"},
		"normalizePath":      {"/a/b/", "a/b", "/"[:0], "../a"},
		"normalizePathWin":   {"/a/b/", "C:/x/y.txt", "../a"},
	}
	for name, inputs := range cases {
		fn, ok := Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		for _, in := range inputs {
			in = strings.Clone(in)
			out, changed, err := fn(in)
			if err != nil || changed || out != in || (len(in) > 0 && unsafe.StringData(out) != unsafe.StringData(in)) {
				t.Errorf("%s(%q) = %q, %v, %v: want the input itself", name, in, out, changed, err)
			}
			if n := testing.AllocsPerRun(10, func() { _, _, _ = fn(in) }); n != 0 {
				t.Errorf("%s(%q): %v allocations", name, in, n)
			}
		}
	}
}

// TestSimpleAllocateOnce checks that a change allocates one buffer.
func TestSimpleAllocateOnce(t *testing.T) {
	cases := map[string]string{
		"lowercase":          "Plain Text With Capitals É",
		"removeNulls":        "a\x00b\x00c",
		"removeWhitespace":   "a b\tc\u3000d",
		"compressWhitespace": "a  b\t\tc\u00a0d",
		"cmdLine":            `C"a"t  /etc ; LS`,
		"replaceComments":    "a/*x*/b/*y*/c",
		"removeCommentsChar": "a/*x*/b<!--y-->c#",
		"removeComments":     "a/*x*/b<!--y-->c--z",
		"base64Decode":       "aGVsbG8gd29ybGQh",
		"normalizePathWin":   `C:\a\..\b\c.txt. ::$DATA`,
	}
	for name, in := range cases {
		fn, _ := Lookup(name)
		if n := testing.AllocsPerRun(10, func() { _, _, _ = fn(in) }); n != 1 {
			t.Errorf("%s(%q): %v allocations, want 1", name, in, n)
		}
	}
}
