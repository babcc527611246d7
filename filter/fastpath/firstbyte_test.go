package fastpath

import (
	"math/rand/v2"
	"testing"

	"rsc.io/binaryregexp"
	bsyntax "rsc.io/binaryregexp/syntax"
)

func TestFirstBytes(t *testing.T) {
	for _, c := range []struct {
		expr string
		want string // the set's bytes in order; "" for no filter
	}{
		{`\$+(?:[A-Z_a-z\x7f-\x{ff}][0-9A-Z_a-z\x7f-\x{ff}]*|\{.+\})`, "$"},
		{`\x{bc}[^>\x{be}]*[>\x{be}]|<[^\x{be}]*\x{be}`, "<\xbc"},
		{`\xac\xed\x00\x05`, "\xac"},
		{`(?i)ab\xff`, "Aa"},
		{`x?y*\xfe`, "xy\xfe"},
		{`^\b(?:\xff|z)`, "z\xff"},
		{`a{0,3}b`, "ab"},
		{`a*`, ""},
		{`\xff|`, ""},
		{`^`, ""},
		{`(?:a|b?)`, ""},
	} {
		re, err := bsyntax.Parse(c.expr, bsyntax.Perl)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		s := firstBytes(re)
		var got []byte
		if s != nil {
			for b := range 256 {
				if s[b] {
					got = append(got, byte(b))
				}
			}
		}
		if string(got) != c.want {
			t.Errorf("firstBytes(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// TestFirstBytes_neverRejectsAMatch runs the CRS's byte patterns on values
// built from their own bytes and random ones: whenever the pattern
// matches, the filter must let the value through.
func TestFirstBytes_neverRejectsAMatch(t *testing.T) {
	patterns := []string{
		`\$+(?:[A-Z_a-z\x7f-\x{ff}][0-9A-Z_a-z\x7f-\x{ff}]*|[\s\x0b]*\{.+\})(?:[\s\x0b]|\[.+\]|\{.+\}|/\*.*\*/|//.*|#.*)*\(.*\)`,
		`\x{bc}[^>\x{be}]*[>\x{be}]|<[^\x{be}]*\x{be}`,
		`\xac\xed\x00\x05`,
		`(?i)\xc0x|[\x80-\x{ff}]{2}`,
	}
	alphabet := []byte("$<>{}()[]/*#x ab\n\x0b\x7f\x80\xac\xbc\xbe\xc0\xe0\xed\xff\x00\x05")
	// Pieces of matches, put in some values whole.
	pieces := []string{"$a(b)", "\xbcx>", "<\xbe", "\xac\xed\x00\x05", "\xc0x", "\xe0X", "\x80\x81"}
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range patterns {
		re := binaryregexp.MustCompile(p)
		parsed, err := bsyntax.Parse(p, bsyntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		s := firstBytes(parsed)
		if s == nil {
			t.Fatalf("%s: no filter", p)
		}
		matched := 0
		for range 20000 {
			b := make([]byte, r.IntN(12))
			for i := range b {
				if r.IntN(4) == 0 {
					b[i] = byte(r.IntN(256))
				} else {
					b[i] = alphabet[r.IntN(len(alphabet))]
				}
			}
			if r.IntN(3) == 0 {
				at := r.IntN(len(b) + 1)
				b = append(b[:at:at], append([]byte(pieces[r.IntN(len(pieces))]), b[at:]...)...)
			}
			v := string(b)
			if re.MatchString(v) {
				matched++
				if !s.in(v) {
					t.Fatalf("%s matches %q, which the filter rejects", p, v)
				}
			}
		}
		if matched == 0 {
			t.Errorf("%s matched none of the values: the test shows nothing", p)
		}
	}
}
