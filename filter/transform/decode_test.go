package transform

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// allUniEscapes is "%uHHHH" for every code point of the BMP, spelled with
// lower-case, upper-case or mixed hex digits depending on the code point.
func allUniEscapes() string {
	var b strings.Builder
	for c := 0; c <= 0xffff; c++ {
		switch c % 3 {
		case 0:
			fmt.Fprintf(&b, "%%u%04x", c)
		case 1:
			fmt.Fprintf(&b, "%%U%04X", c)
		default:
			fmt.Fprintf(&b, "%%u%02X%02x", c>>8, c&0xff)
		}
	}
	return b.String()
}

// allHexEscapes is "%HH" for every byte, in both cases.
func allHexEscapes(prefix string) string {
	var b strings.Builder
	for c := 0; c < 256; c++ {
		fmt.Fprintf(&b, "%s%02x%s%02X", prefix, c, prefix, c)
	}
	return b.String()
}

var urlEdgeCases = []string{
	"", "+", "++", "a+b", "%", "%%", "%%%", "%4", "%41", "%41%", "%4g", "%g4", "%zz", "%%41", "%+41",
	"100%", "100%2", "%2B", "%2b%2F", "%00", "%ff%FF%fF", "a%41b%42c", "%u0041", "%U0041", "%u004", "%u",
	"%uzzzz", "%u%41", "%U%41%", "%uff1c", "%uFF1C", "%u00e9", "%u2019", "%u0130", "%u12g4", "%u1234x",
	"%u12345", "x%u", "x%u1", "x%u12", "x%u123", "%u123%41", "%%u0041", "%u+", "%u%u0041", "%uff5e%uff5f",
	"%uff00%uff01%uff1f%uff20%uff3c", "%u0000%u00ff%u0100%u01ff%u2122%u2123%uffff", "%u00A0%u00a3%u0332",
	"\xff%41\xfe", "é%C3%A9", "a+%2+", allHexEscapes("%"), allUniEscapes(),
}

func TestURLDecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "urlDecode", urlEdgeCases...)
}

func FuzzURLDecode(f *testing.F) { fuzzEqual(f, "urlDecode") }

func TestURLDecodeUniEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "urlDecodeUni", urlEdgeCases...)
}

func FuzzURLDecodeUni(f *testing.F) { fuzzEqual(f, "urlDecodeUni") }

// allOctalEscapes is prefix followed by every octal number up to 0777 in
// its shortest and its three-digit spelling, each escape closed by 'z'.
func allOctalEscapes(prefix string) string {
	var b strings.Builder
	for c := 0; c <= 0777; c++ {
		fmt.Fprintf(&b, "%s%oz%s%03oz", prefix, c, prefix, c)
	}
	return b.String()
}

// someJSUniEscapes is \uHHHH for the code points around the full-width
// block and a sample of the rest, and \u{...} for the same ones.
func someJSUniEscapes() string {
	var b strings.Builder
	for c := 0; c <= 0xffff; c++ {
		if c < 0x200 || c >= 0xfef0 || c%251 == 0 {
			fmt.Fprintf(&b, `\u%04x\u%04X\u{%x}\u{%X}`, c, c, c, c)
		}
	}
	return b.String()
}

var htmlEdgeCases = []string{
	"&", "&&", "&;", "a&b", "&amp;", "&amp", "&AMP", "&AMP;", "&Amp;", "&lt;", "&lt", "&lt=", "&lt;=",
	"&gt&lt", "&notin;", "&notit;", "&not", "&noti", "&amp;lt;", "&NotEqualTilde;", "&bogus;", "&x;",
	"&#", "&#;", "&#x", "&#x;", "&#X41", "&#x41;", "&#65;", "&#65", "&#65a", "&#x41g", "&#0;", "&#13;",
	"&#128;", "&#x80;", "&#x9F;", "&#x9f", "&#159;", "&#160;", "&#xD800;", "&#xdfff;", "&#x10FFFF;",
	"&#x110000;", "&#1114112;", "&#99999999999999999999;", "&#xfffffffffffffff;", "&acE;", "x&nGg;y",
	"&caps;&cups;", "&nLl;", "&acE", "&nbsp;&nbsp", "&copy2", "&aacute;&Aacute;", "&AElig", "&AElig;",
	"&frac12;&frac12", "&supe;&sup2", "&\xff;", "&é;", "&#x1F600;", "&#128512;", "&ThickSpace;",
}

func TestHTMLEntityDecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "htmlEntityDecode", htmlEdgeCases...)
}

func FuzzHTMLEntityDecode(f *testing.F) { fuzzEqual(f, "htmlEntityDecode") }

var jsEdgeCases = []string{
	`\`, `a\`, `\\`, `\\\`, `x\\y`, `\u`, `\u{`, `\u{}`, `\u{41}`, `\u{0041}`, `\u{1F600}`, `\u{ff01}`,
	`\u{0ff01}`, `\u{00ff01}`, `\u{FF5E}`, `\u{ff5f}`, `\u{ff00}`, `\u{1234567}`, `\u{123456}`, `\u{41`,
	`\u{4g}`, `\u{ 41}`, `\U{41}`, `\u0041`, `\uFF01`, `\uff5e`, `\uff5f`, `\uff00`, `\uFf3c`, `\u004`,
	`\u00zz`, `\U0041`, `\u00411`, `\x41`, `\X41`, `\x4`, `\x4g`, `\x`, `\0`, `\7`, `\8`, `\9`, `\12`,
	`\123`, `\377`, `\400`, `\477`, `\1234`, `\08`, `\0a`, `\a\b\f\n\r\t\v\?\\\'\"\z\e`, "\\é", "\\\xff",
	`\u{ff01}\uFf01`, `\u{10FFFF}\u{110000}\u{FFFFFF}`, "a\\\nb", `\uD800`,
	allHexEscapes(`\x`), allOctalEscapes(`\`), someJSUniEscapes(),
}

func TestJSDecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "jsDecode", jsEdgeCases...)
}

func FuzzJSDecode(f *testing.F) { fuzzEqual(f, "jsDecode") }

var cssEdgeCases = []string{
	`\`, `a\`, `\\`, `\\\`, `\41`, `\41 b`, `\41  b`, "\\41\tb", "\\41\nb", "\\41\vb", "\\41\fb",
	"\\41\rb", "\\41\r\nb", `\0`, `\00`, `\000000`, `\0000000`, `\D800`, `\dfff`, `\110000`, `\10FFFF`,
	`\FFFFFF`, `\ff01`, `\FF5E`, `\ff5f`, `\ff00`, `\0ff01 x`, "\\\n", "\\\nx", "\\\r\n", `\g`, "\\é",
	"\\\xff", `\1234567`, `\e9`, `\E9 x`, `\20ac`, `\5c\5c`, `\\\0`, `\u0041`, `\x41`, `\A`, `\a`, `\G`,
	"\\\x00", "\\ ", `\0 `, `\41\42\43`, allHexEscapes(`\`), someJSUniEscapes(),
}

func TestCSSDecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "cssDecode", cssEdgeCases...)
}

func FuzzCSSDecode(f *testing.F) { fuzzEqual(f, "cssDecode") }

var escapeSeqEdgeCases = []string{
	`\`, `a\`, `\\`, `\\\`, `x\\y`, `\a\b\f\n\r\t\v\\\?\'\"`, `\e\z\A\N`, `\x41`, `\X41`, `\x4`, `\X4`,
	`\x`, `\x4g`, `\xg4`, `\x411`, `\0`, `\7`, `\8`, `\9`, `\08`, `\12`, `\123`, `\1234`, `\377`, `\400`,
	`\477`, `\777`, `\0777`, "\\é", "\\\xff", "\\\x00", `\u0041`, "a\\\nb",
	allHexEscapes(`\x`), allHexEscapes(`\X`), allOctalEscapes(`\`),
}

func TestEscapeSeqDecodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "escapeSeqDecode", escapeSeqEdgeCases...)
}

func FuzzEscapeSeqDecode(f *testing.F) { fuzzEqual(f, "escapeSeqDecode") }

// someRunes is a sample of code points of every UTF-8 length, around
// the boundaries where the number of hex digits changes.
func someRunes() string {
	var b strings.Builder
	for _, r := range []rune{0x7f, 0x80, 0xff, 0x100, 0x7ff, 0x800, 0xfff, 0x1000, 0xd7ff, 0xe000,
		0xfffd, 0xffff, 0x10000, 0xfffff, 0x100000, 0x10ffff} {
		b.WriteRune(r)
	}
	for r := rune(0x80); r <= 0x10ffff; r += 997 {
		b.WriteRune(r)
	}
	return b.String()
}

var utf8EdgeCases = []string{
	"é", "aé", "éa", "\xff", "a\xffb", "\xc3", "\xc3\x28", "\xe2\x82", "\xe2\x82\xac", "\xed\xa0\x80",
	"\xed\x9f\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80",
	"\xf0\x9f\x98\x80", "\xf8\x88\x80\x80\x80", "\x80\x80", "\U0010FFFF", "\uFFFD", "a\x00é", "%u00e9é",
	someRunes(),
}

func TestUTF8ToUnicodeEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "utf8toUnicode", utf8EdgeCases...)
}

func FuzzUTF8ToUnicode(f *testing.F) { fuzzEqual(f, "utf8toUnicode") }

// TestDecodersReturnInputWhenUnchanged checks the fast path: a value the
// transformation leaves as it is comes back as the very same string,
// without an allocation.
func TestDecodersReturnInputWhenUnchanged(t *testing.T) {
	cases := map[string][]string{
		"urlDecode":        {"", "plain text", "100%", "%zz%4", "%u0041"},
		"urlDecodeUni":     {"", "plain text", "100%", "%zz%4", "%u004", "%uzzzz%"},
		"htmlEntityDecode": {"", "plain text", "a & b", "&#;", "&#x;", "&#xg", "& &#", "&&", "&"},
		"jsDecode":         {"", "plain text", `trailing\`},
		"cssDecode":        {"", "plain text"},
		"escapeSeqDecode":  {"", "plain text", `trailing\`},
		"utf8toUnicode":    {"", "plain text", "\x00\x7f"},
	}
	for name, inputs := range cases {
		fn, _ := Lookup(name)
		for _, in := range inputs {
			in = strings.Clone(in)
			out, _, err := fn(in)
			if err != nil || out != in || (len(in) > 0 && unsafe.StringData(out) != unsafe.StringData(in)) {
				t.Errorf("%s(%q) = %q, %v: want the input itself", name, in, out, err)
			}
			if n := testing.AllocsPerRun(10, func() { _, _, _ = fn(in) }); n != 0 {
				t.Errorf("%s(%q): %v allocations", name, in, n)
			}
		}
	}
}

// TestDecodersAllocateOnce checks that a decoding allocates one buffer.
func TestDecodersAllocateOnce(t *testing.T) {
	cases := map[string]string{
		"urlDecode":       "a+b%41%zz%u0041 and some more text",
		"urlDecodeUni":    "a+b%41%zz%u0041%uff1c and some more text",
		"jsDecode":        `a\x41\u0041\u{41}\101\n and some more text`,
		"cssDecode":       `a\41 \0\ff01\g and some more text`,
		"escapeSeqDecode": `a\x41\101\n\q and some more text`,
		"utf8toUnicode":   "é\xff\U0001F600 and some more text",
	}
	for name, in := range cases {
		fn, _ := Lookup(name)
		if n := testing.AllocsPerRun(10, func() { _, _, _ = fn(in) }); n != 1 {
			t.Errorf("%s(%q): %v allocations, want 1", name, in, n)
		}
	}
}

func BenchmarkDecoders(b *testing.B) {
	inputs := map[string][2]string{
		"urlDecode":        {"id=1&name=plain-value-without-escapes", "q=%27%20UNION%20SELECT+1%2C2--+-"},
		"urlDecodeUni":     {"id=1&name=plain-value-without-escapes", "q=%u0027%20UNION%uff08SELECT+1--"},
		"htmlEntityDecode": {"plain text without references at all", "&lt;script&gt;alert(&#x31;)&lt;/script&gt;"},
		"jsDecode":         {"plain text without escapes at all", `\x3cscript\x3ealert(\u0031)\74/script>`},
		"cssDecode":        {"plain text without escapes at all", `\3c script\3e alert(1)\3c/script\3e`},
		"escapeSeqDecode":  {"plain text without escapes at all", `\x3cscript\x3e\101\n\t\'\"`},
		"utf8toUnicode":    {"plain ascii text only, nothing to do", "naïve café ＜script＞"},
	}
	for name, in := range inputs {
		fn, _ := Lookup(name)
		for k, label := range []string{"unchanged", "changed"} {
			b.Run(name+"/"+label, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, _, _ = fn(in[k])
				}
			})
		}
	}
}
