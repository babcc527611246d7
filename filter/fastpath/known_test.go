package fastpath

import (
	"regexp/syntax"
	"slices"
	"testing"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// TestKnownRxs checks every entry of the table of known patterns against
// a parse of its pattern now: the table must give each pattern the filter
// the parse gives, or the operator would judge values differently with it.
func TestKnownRxs(t *testing.T) {
	if len(knownRxs) == 0 {
		t.Fatal("the table of known patterns is empty: write it with WAFGUARD_UPDATE_KNOWN_RX=1 go test ./filter -run TestKnownRx")
	}
	for i, k := range knownRxs {
		if i > 0 && knownRxs[i-1].expr >= k.expr {
			t.Fatalf("entry %d is not after entry %d: the table must be sorted, without repeats", i, i-1)
		}
		re, err := syntax.Parse(k.expr, syntax.Perl)
		if err != nil {
			t.Errorf("entry %d does not parse: %v", i, err)
			continue
		}
		if want := filterLiterals(re); !slices.Equal(k.lits, want) || (k.lits == nil) != (want == nil) {
			t.Errorf("entry %d (%.60q...): literals %q, a parse gives %q", i, k.expr, k.lits, want)
		}
		if got, ok := knownLiterals(k.expr); !ok || !slices.Equal(got, k.lits) {
			t.Errorf("entry %d: knownLiterals = %q, %v", i, got, ok)
		}
	}
}

// TestKnownRx_lookup: a pattern out of the table is parsed, and an
// operator built from a known pattern has the filter a parse gives.
func TestKnownRx_lookup(t *testing.T) {
	if _, ok := knownLiterals("(?sm)not a pattern of the embedded rule sets"); ok {
		t.Error("an unknown pattern was found")
	}
	k := knownRxs[len(knownRxs)/2]
	re, err := syntax.Parse(k.expr, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	want := newLiteralFilter(re)
	op, err := newRx(plugintypes.OperatorOptions{Arguments: k.expr[len("(?sm)"):]})
	if err != nil {
		t.Fatal(err)
	}
	got := op.(*rx).filter
	if (got == nil) != (want == nil) || (got != nil && (!slices.Equal(got.lits, want.lits) || got.first != want.first)) {
		t.Errorf("the operator's filter differs from a parse's")
	}
}
