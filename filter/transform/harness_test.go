package transform

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/internal/crscorpus"
)

// This test binary never calls Register: Coraza's built-in transformations
// stay in its registry, and builtin runs them through a real rule, so every
// comparison is against what Coraza v3.8.1 itself computes.

// probe is an operator that records the values a rule hands it.
type probe struct{ slot string }

var probed = map[string][]string{}

func (p probe) Evaluate(_ plugintypes.TransactionState, value string) bool {
	probed[p.slot] = append(probed[p.slot], value)
	return false
}

var registerProbe sync.Once

// builtinWAF compiles two rules that pass ARGS_GET:x through the built-in
// transformation: one plain (the transformed value), one multiMatch (the
// original, then the transformed value only when the transformation
// reported a change).
func builtinWAF(t testing.TB, name string) coraza.WAF {
	t.Helper()
	registerProbe.Do(func() {
		plugins.RegisterOperator("wafguardprobe", func(o plugintypes.OperatorOptions) (plugintypes.Operator, error) {
			return probe{slot: o.Arguments}, nil
		})
	})
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(fmt.Sprintf(`SecRuleEngine On
SecRule ARGS_GET:x "@wafguardprobe plain" "id:1,phase:1,pass,nolog,t:none,t:%[1]s"
SecRule ARGS_GET:x "@wafguardprobe multi" "id:2,phase:1,pass,nolog,t:none,t:%[1]s,multiMatch"`, name)))
	if err != nil {
		t.Fatalf("compiling the built-in %s: %v", name, err)
	}
	return waf
}

// builtinResult is what the built-in transformation made of one input.
type builtinResult struct {
	out     string
	changed bool
}

func runBuiltin(t testing.TB, waf coraza.WAF, in string) builtinResult {
	t.Helper()
	clear(probed)
	tx := waf.NewTransaction()
	tx.AddGetRequestArgument("x", in)
	tx.ProcessRequestHeaders()
	_ = tx.Close()
	plain, multi := probed["plain"], probed["multi"]
	if len(plain) != 1 || len(multi) == 0 || len(multi) > 2 || multi[0] != in {
		t.Fatalf("probe saw plain=%q multi=%q for %q", plain, multi, in)
	}
	return builtinResult{out: plain[0], changed: len(multi) == 2}
}

// ours is what Coraza does with this package's function: an error keeps
// the previous value and reports no change.
func ours(fn plugintypes.Transformation, in string) builtinResult {
	out, changed, err := fn(in)
	if err != nil {
		return builtinResult{out: in}
	}
	// Coraza's multiMatch collects the value only when the function
	// reports a change; the plain rule takes the output either way.
	return builtinResult{out: out, changed: changed}
}

// equalOnCorpus checks the named transformation against the built-in on
// the CRS corpus and on extra inputs.
func equalOnCorpus(t *testing.T, name string, extra ...string) {
	t.Helper()
	fn, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s is not implemented here", name)
	}
	corpus, err := crscorpus.Strings()
	if err != nil {
		t.Fatal(err)
	}
	waf := builtinWAF(t, name)
	bad := 0
	for _, in := range append(corpus, extra...) {
		want := runBuiltin(t, waf, in)
		got := ours(fn, in)
		if got != want {
			bad++
			if bad <= 10 {
				t.Errorf("%s(%q) = %q changed=%v, built-in %q changed=%v", name, in, got.out, got.changed, want.out, want.changed)
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d differences in all", name, bad)
	}
}

// fuzzEqual is the body of each transformation's fuzz target.
func fuzzEqual(f *testing.F, name string) {
	fn, ok := Lookup(name)
	if !ok {
		f.Fatalf("%s is not implemented here", name)
	}
	corpus, err := crscorpus.Strings()
	if err != nil {
		f.Fatal(err)
	}
	for i, s := range corpus {
		if i%16 == 0 && len(s) < 256 {
			f.Add(s)
		}
	}
	waf := builtinWAF(f, name)
	f.Fuzz(func(t *testing.T, in string) {
		want := runBuiltin(t, waf, in)
		if got := ours(fn, in); got != want {
			t.Fatalf("%s(%q) = %q changed=%v, built-in %q changed=%v", name, in, got.out, got.changed, want.out, want.changed)
		}
	})
}

// TestEveryOwnedNameIsABuiltin guards against a typo registering a new
// transformation instead of replacing one.
func TestEveryOwnedNameIsABuiltin(t *testing.T) {
	for _, name := range Names() {
		builtinWAF(t, name) // fails to compile on an unknown name
		if strings.ToLower(name) != name {
			t.Errorf("%q is not lower case", name)
		}
	}
}
