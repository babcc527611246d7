package fastpath

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// crsFiltered builds every CRS @rx pattern that gets a literal filter (the
// byte patterns aside).
func crsFiltered(t *testing.T) []plugintypes.Operator {
	t.Helper()
	var ops []plugintypes.Operator
	for _, p := range crsPatterns(t) {
		op, err := newRx(plugintypes.OperatorOptions{Arguments: p})
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if o, ok := op.(*rx); ok && o.filter != nil {
			ops = append(ops, op)
		}
	}
	if len(ops) < 100 {
		t.Fatalf("%d filtered CRS patterns, want more", len(ops))
	}
	return ops
}

// TestUnion_sameAsFilters: the union of the CRS's literal filters says,
// for every value, of every filter what the filter's own mayMatch says:
// on the regression-test corpus, its non-ASCII variants (with the two
// runes that fold to ASCII letters), and random byte strings made of the
// literals' own pieces.
func TestUnion_sameAsFilters(t *testing.T) {
	ops := crsFiltered(t)
	u := NewUnion(ops)
	t.Logf("%d filters, union of %d bytes", len(ops), u.Size())
	corpus := sampled(attackCorpus(t))
	folds := strings.NewReplacer("k", "\u212a", "s", "\u017f")
	for _, v := range corpus[:len(corpus)/4] {
		corpus = append(corpus, "\u00e9"+v+"\xff", strings.ToUpper(v), folds.Replace(v))
	}
	r := rand.New(rand.NewPCG(1, 2))
	var pieces []string
	for _, op := range ops {
		pieces = append(pieces, op.(*rx).filter.lits...)
	}
	for range 3000 {
		var b strings.Builder
		for range 1 + r.IntN(6) {
			p := pieces[r.IntN(len(pieces))]
			if r.IntN(3) == 0 {
				p = strings.ToUpper(p)
			}
			if r.IntN(4) == 0 && len(p) > 1 {
				p = p[:len(p)-1]
			}
			b.WriteString(p)
			b.WriteByte(" \x80é\u212az/"[r.IntN(6)])
		}
		corpus = append(corpus, b.String())
	}
	hits := make([]uint64, (len(ops)+63)/64)
	wrong := 0
	for _, v := range corpus {
		clear(hits)
		u.Scan(v, hits)
		for i, op := range ops {
			want := op.(*rx).filter.mayMatch(v)
			if got := hits[i>>6]&(1<<(i&63)) != 0; got != want {
				wrong++
				if wrong < 10 {
					t.Errorf("%q on %q: union %v, filter %v (literals %q)", op.(*rx).expr, v, got, want, op.(*rx).filter.lits)
				}
			}
		}
	}
	t.Logf("%d values, %d wrong", len(corpus), wrong)
}

func TestUnion_small(t *testing.T) {
	var ops []plugintypes.Operator
	for _, p := range []string{"(?i)select", "union|selec", "abc", "bcd|cde"} {
		op, err := newRx(plugintypes.OperatorOptions{Arguments: p})
		if err != nil || !Filtered(op) {
			t.Fatalf("%q: %v", p, err)
		}
		ops = append(ops, op)
	}
	u := NewUnion(ops)
	for _, c := range []struct {
		value string
		want  uint64
	}{
		{"", 0},
		{"SeLeCt", 0b0011},
		{"unio", 0},
		{"xunionx", 0b0010},
		{"abcde", 0b1100},
		{"ab\u00e9cd", 0},
		{"\u212a", 0b1111},
		{"\xc5", 0},
	} {
		hits := []uint64{0}
		u.Scan(c.value, hits)
		if hits[0] != c.want {
			t.Errorf("%q: hits %04b, want %04b", c.value, hits[0], c.want)
		}
	}
}

func FuzzUnion(f *testing.F) {
	for _, s := range []string{"select", "SELECT union", "\u212a", "abc", "x<script>"} {
		f.Add(s)
	}
	var ops []plugintypes.Operator
	for _, p := range []string{"(?i)select|union", "<script", "abc|bcd|cde", "[kK]elvin", "(?:s|S)leep", "on(?:load|error)"} {
		op, err := newRx(plugintypes.OperatorOptions{Arguments: p})
		if err != nil || !Filtered(op) {
			f.Fatalf("%q: %v", p, err)
		}
		ops = append(ops, op)
	}
	u := NewUnion(ops)
	f.Fuzz(func(t *testing.T, v string) {
		hits := []uint64{0}
		u.Scan(v, hits)
		for i, op := range ops {
			if got, want := hits[0]&(1<<i) != 0, op.(*rx).filter.mayMatch(v); got != want {
				t.Errorf("%q on %q: union %v, filter %v", op.(*rx).expr, v, got, want)
			}
		}
	})
}

// TestACTable_rows: the rows of the shallow states say, for every byte,
// what the transitions and failure links say; an automaton that reads
// every byte has none, and answers as before.
func TestACTable_rows(t *testing.T) {
	sparse := func(a *acTable) *acTable {
		b := *a
		b.dense, b.rows = 0, nil
		return &b
	}
	check := func(name string, a *acTable) {
		t.Helper()
		if a.dense == 0 {
			t.Fatalf("%s: no rows", name)
		}
		s := sparse(a)
		// Every state: those with rows, and those past them, which
		// fall back onto them.
		for st := uint32(1); st < uint32(len(a.fail)); st++ {
			for c := range 256 {
				if got, want := a.next(st, byte(c)), s.next(st, byte(c)); got != want {
					t.Fatalf("%s: state %d (rows up to %d) byte %#x: %d, transitions %d", name, st, a.dense, c, got, want)
				}
			}
		}
	}
	u := NewUnion(crsFiltered(t))
	check("CRS union", &u.acTable)
	if int(u.dense) >= len(u.fail)-1 || u.dense > maxDenseRows {
		t.Errorf("CRS union: %d of %d states have rows, want the shallow ones only", u.dense, len(u.fail)-1)
	}
	pats := []string{"select", "union", "sleep(", "<script", "Select", "SEL", "a", "zz\x00\xff"}
	check("pm set", &newPMSet(pats, nil).acTable)

	// 26 states one byte deep and 676 two bytes deep: the rows stop at
	// maxDenseRows, and the states past them fall back onto them.
	var wide []string
	for x := 'a'; x <= 'z'; x++ {
		for y := 'a'; y <= 'z'; y++ {
			wide = append(wide, string([]rune{x, y, '!'}))
		}
	}
	w := newPMSet(wide, nil)
	check("wide pm set", &w.acTable)
	if w.dense != maxDenseRows {
		t.Errorf("wide pm set: %d states with rows, want %d", w.dense, maxDenseRows)
	}
	for v, want := range map[string]bool{"zz!": true, "QZ!": true, "zz": false, "z!z": false} {
		if got := w.match(v); got != want {
			t.Errorf("wide pm set, %q: match %v, want %v", v, got, want)
		}
	}

	var every []string
	for c := range 256 {
		every = append(every, string([]byte{byte(c), 'q'}))
	}
	all := newPMSet(every, nil)
	if all.dense != 0 {
		t.Errorf("an automaton that reads every byte: %d rows", all.dense)
	}
	for v, want := range map[string]bool{"xq": true, "\xffq": true, "AQ": true, "q": false, "abc": false} {
		if got := all.match(v); got != want {
			t.Errorf("%q: match %v, want %v", v, got, want)
		}
	}
}

// TestUnion_otherOperators: a union that also stands in for @pm,
// @pmFromFile, @validateByteRange and the byte patterns never lets a value
// pass that the operator matches; for a list it takes whole, its answer is
// the operator's own, but for the runes that fold to ASCII letters, which
// pass every operator of a union.
func TestUnion_otherOperators(t *testing.T) {
	root := testRoot(t)
	crs := crsArgs(t)
	var ops []plugintypes.Operator
	var names []string
	add := func(name string, op plugintypes.Operator, err error) {
		if err == nil && Filtered(op) {
			ops = append(ops, op)
			names = append(names, name)
		}
	}
	for _, a := range append(crs["pm"], "é Ä ſ \u212a", "\xff", "İ K", "FOO Bar", "a ab abc") {
		op, err := newPM(plugintypes.OperatorOptions{Arguments: a})
		add("@pm "+a, op, err)
	}
	for _, a := range append(crs["pmFromFile"], append(crs["pmf"], "nonascii.data", "overlap.data", "dup.data")...) {
		op, err := newPMFromFile(plugintypes.OperatorOptions{Arguments: a, Path: []string{""}, Root: root})
		add("@pmFromFile "+a, op, err)
	}
	for _, a := range append(crs["validateByteRange"], "1-255", "65-90, 97-122", "9,10,13,32-126,128-255") {
		op, err := newByteRange(plugintypes.OperatorOptions{Arguments: a})
		add("@validateByteRange "+a, op, err)
	}
	var bytePatterns int
	for _, p := range crsPatterns(t) {
		if needsByteRegexp("(?sm)" + p) {
			op, err := newRx(plugintypes.OperatorOptions{Arguments: p})
			add("@rx "+p, op, err)
			bytePatterns++
		}
	}
	kinds := map[string]int{}
	for _, n := range names {
		kinds[strings.Fields(n)[0]]++
	}
	if kinds["@pm"] < 5 || kinds["@pmFromFile"] < 10 || kinds["@validateByteRange"] < 3 || kinds["@rx"] < 1 {
		t.Fatalf("operators a union stands in for, by kind: %v", kinds)
	}
	// The CRS's own @rx filters share the union, as in the screen.
	rxs := crsFiltered(t)
	all := append(slices.Clone(ops), rxs...)
	u := NewUnion(all)
	t.Logf("%v and %d @rx filters: union of %d bytes", kinds, len(rxs), u.Size())

	values := append(sampled(corpus(t)), operatorValues...)
	for _, op := range ops {
		if o, ok := op.(*pm); ok {
			for _, p := range o.patterns[:min(len(o.patterns), 50)] {
				values = append(values, p, strings.ToUpper(p), "x"+p+"x", p[:len(p)-1])
			}
		}
	}
	for c := range 256 {
		values = append(values, "ab"+string(rune(c))+"cd", string([]byte{byte(c)}))
	}
	hits := make([]uint64, (len(all)+63)/64)
	var wrong, passed, matched int
	for _, v := range values {
		clear(hits)
		u.Scan(v, hits)
		folds := strings.ContainsRune(v, '\u212a') || strings.ContainsRune(v, '\u017f')
		for i, op := range ops {
			hit := hits[i>>6]&(1<<(i&63)) != 0
			m := Confirm(op)(v)
			if m != op.Evaluate(&captureTx{}, v) {
				t.Fatalf("%s on %q: Confirm %v, Evaluate %v", names[i], v, m, !m)
			}
			o, isPM := op.(*pm)
			exactPM := isPM && patternBytes(o.patterns) <= maxUnionPM
			if m && !hit || exactPM && hit && !m && !folds {
				wrong++
				if wrong < 10 {
					t.Errorf("%s on %q: union %v, operator %v", names[i], v, hit, m)
				}
			}
			if hit {
				passed++
			}
			if m {
				matched++
			}
		}
		for i, op := range rxs {
			if got, want := hits[(len(ops)+i)>>6]&(1<<((len(ops)+i)&63)) != 0, op.(*rx).filter.mayMatch(v); got != want {
				wrong++
				if wrong < 10 {
					t.Errorf("%q on %q: union %v, filter %v", op.(*rx).expr, v, got, want)
				}
			}
		}
	}
	t.Logf("%d values: %d passed the union, %d matched, %d wrong", len(values), passed, matched, wrong)
}

// TestUnionLiterals_limits: a byte range goes into a union with up to
// maxUnionBytes bytes out of range, and a list whole with up to
// maxUnionPM bytes of patterns, else as pieces of pmPiece bytes.
func TestUnionLiterals_limits(t *testing.T) {
	for arg, want := range map[string]bool{"32-255": true, "33-255": false} { // 32 and 33 bytes out
		op, err := newByteRange(plugintypes.OperatorOptions{Arguments: arg})
		if err != nil {
			t.Fatal(err)
		}
		if got := Filtered(op); got != want {
			t.Errorf("@validateByteRange %s: in a union %v, want %v", arg, got, want)
		}
	}
	for _, size := range []int{maxUnionPM, maxUnionPM + 1} {
		// Patterns of 8 bytes, the last one shorter to make size.
		var pats []string
		for n := 0; n < size; n += 8 {
			pats = append(pats, fmt.Sprintf("w%06d;", n)[:min(8, size-n)])
		}
		lits := pmLiterals(pats)
		whole := slices.Equal(lits, pats)
		if want := size <= maxUnionPM; whole != want {
			t.Errorf("%d bytes of patterns: taken whole %v, want %v", size, whole, want)
		}
		if size > maxUnionPM {
			for _, l := range lits {
				if len(l) > pmPiece {
					t.Errorf("%d bytes of patterns: piece %q longer than %d", size, l, pmPiece)
					break
				}
			}
		}
	}
}
