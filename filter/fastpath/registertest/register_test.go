package registertest

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/filter/fastpath"
)

// screenState is what a rule screen hands the operators: it is not
// capturing, and anything else panics.
type screenState struct {
	plugintypes.TransactionState
}

func (screenState) Capturing() bool { return false }

func compile(t *testing.T, root fstest.MapFS, rules ...string) coraza.WAF {
	t.Helper()
	cfg := coraza.NewWAFConfig().WithDirectives("SecRuleEngine On\n" + strings.Join(rules, "\n"))
	if root != nil {
		cfg = cfg.WithRootFS(root)
	}
	waf, err := coraza.NewWAF(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return waf
}

func TestInstance(t *testing.T) {
	fastpath.Register()
	root := fstest.MapFS{"words.data": {Data: []byte("# comment\nAlpha\nbeta\n")}}
	waf := compile(t, root,
		`SecRule ARGS "@rx ^a+b$" "id:1,phase:2,pass,nolog"`,
		`SecRule ARGS "@pm foo bar" "id:2,phase:2,pass,nolog,capture"`,
		`SecRule ARGS "@pmFromFile words.data" "id:3,phase:2,pass,nolog"`,
		`SecRule ARGS "@pmf words.data" "id:4,phase:2,pass,nolog"`,
		`SecRule ARGS "@contains needle" "id:5,phase:2,pass,nolog"`,
		`SecRule ARGS "@beginsWith /admin" "id:6,phase:2,pass,nolog"`,
		`SecRule ARGS "@endsWith .php" "id:7,phase:2,pass,nolog"`,
		`SecRule ARGS "!@streq POST" "id:8,phase:2,pass,nolog"`,
		`SecRule ARGS "@within GET,POST" "id:9,phase:2,pass,nolog"`,
		`SecRule ARGS "@detectSQLi" "id:10,phase:2,pass,nolog,capture"`,
		`SecRule ARGS "@detectXSS" "id:11,phase:2,pass,nolog"`,
		`SecRule ARGS "@contains %{tx.x}" "id:12,phase:2,pass,nolog"`,
		`SecRule ARGS "@ipMatch 127.0.0.1" "id:13,phase:2,pass,nolog"`,
		`SecRule ARGS "@contains  spaced  " "id:14,phase:2,pass,nolog"`,
		`SecRule ARGS "@contains say \"hi\"" "id:15,phase:2,pass,nolog"`,
	)
	tx := waf.NewTransaction()
	tx.AddGetRequestArgument("a", "1' OR '1'='1")
	tx.ProcessRequestHeaders()
	if it, err := tx.ProcessRequestBody(); it != nil || err != nil {
		t.Fatal(it, err)
	}
	_ = tx.Close()

	state := screenState{}
	for _, tc := range []struct {
		name, args string
		hit, miss  string
	}{
		{"rx", "^a+b$", "aaab", "ab!"},
		{"pm", "foo bar", "xxBARxx", "baz"},
		{"pmfromfile", "words.data", "ALPHABET", "comment"},
		{"pmf", "words.data", "the beta", "alp"},
		{"contains", "needle", "haystack needle", "Needle"},
		{"beginswith", "/admin", "/admin/x", "/x/admin"},
		{"endswith", ".php", "index.php", "index.php5"},
		{"streq", "POST", "POST", "post"},
		{"within", "GET,POST", "GET", "PUT"},
		{"detectsqli", "", "1' OR '1'='1", "hello world"},
		{"detectxss", "", "<script>alert(1)</script>", "hello world"},
		{"contains", "spaced", "unspaced", "spac"},
		{"contains", `say "hi"`, `they say "hi"`, "say hi"},
	} {
		op, ok := fastpath.Instance(tc.name, tc.args)
		if !ok {
			t.Errorf("Instance(%q, %q): none", tc.name, tc.args)
			continue
		}
		if !op.Evaluate(state, tc.hit) || op.Evaluate(state, tc.miss) {
			t.Errorf("Instance(%q, %q): wrong verdicts on %q and %q", tc.name, tc.args, tc.hit, tc.miss)
		}
	}
	// A macro's operator is built, but a screen must not evaluate it.
	if _, ok := fastpath.Instance("contains", "%{tx.x}"); !ok {
		t.Error("no instance for a macro argument")
	}
	for _, tc := range [][2]string{
		{"ipmatch", "127.0.0.1"},     // not this package's
		{"pm", "never compiled"},     // no rule
		{"pmFromFile", "words.data"}, // names are lower case
		{"contains", " spaced "},     // arguments are trimmed
		{"detectsqli", "x"},
	} {
		if _, ok := fastpath.Instance(tc[0], tc[1]); ok {
			t.Errorf("Instance(%q, %q): found", tc[0], tc[1])
		}
	}
	for _, name := range []string{"rx", "pm", "pmfromfile", "pmf", "contains", "beginswith", "endswith", "streq", "within", "detectsqli", "detectxss",
		"validatebyterange", "eq", "ge", "gt", "le", "lt"} {
		if !fastpath.Owns(name) {
			t.Errorf("Owns(%q) = false", name)
		}
	}
	if fastpath.Owns("ipmatch") || fastpath.Owns("validateurlencoding") {
		t.Error("Owns claims a built-in")
	}

	// Another WAF reads a data file of the same name with other contents:
	// the argument no longer tells which operator is meant.
	compile(t, fstest.MapFS{"words.data": {Data: []byte("xy\n")}},
		`SecRule ARGS "@pmFromFile words.data" "id:3,phase:2,pass,nolog"`)
	if _, ok := fastpath.Instance("pmfromfile", "words.data"); ok {
		t.Error("Instance of a data file read with two contents")
	}
	if _, ok := fastpath.Instance("pmf", "words.data"); !ok {
		t.Error("@pmf words.data is gone")
	}
	// The same contents again leave one unambiguous instance.
	compile(t, root, `SecRule ARGS "@pm foo bar" "id:2,phase:2,pass,nolog"`)
	if _, ok := fastpath.Instance("pm", "foo bar"); !ok {
		t.Error("@pm foo bar compiled twice is gone")
	}
}

// TestJudge checks that the screen's decision of each operator is its
// Evaluate verdict, and that an operator with a macro has none.
func TestJudge(t *testing.T) {
	fastpath.Register()
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(`SecRule ARGS "@rx ^a+b$" "id:1"
SecRule ARGS "@rx \xff\xfe" "id:2"
SecRule ARGS "@pm foo bar" "id:3"
SecRule ARGS "@contains oo" "id:4"
SecRule ARGS "@detectSQLi" "id:5"
SecRule ARGS "@detectXSS" "id:6"
SecRule ARGS "@streq %{tx.x}" "id:7"
SecRule ARGS "@pm Abc  ſ" "id:8"`))
	if err != nil || waf == nil {
		t.Fatal(err)
	}
	values := []string{"", "aab", "ab", "xaab", "foo", "BAR", "\xff\xfe", "1' or '1'='1", "<script>alert(1)</script>", "boo",
		"xFoOx", "fo", "xyz", "xABCx", "ſ", "S", "\u212a", "k", "\xc3\x9f"}
	for _, c := range []struct{ name, args string }{
		{"rx", "^a+b$"}, {"rx", `\xff\xfe`}, {"pm", "foo bar"}, {"pm", "Abc  ſ"}, {"contains", "oo"}, {"detectsqli", ""}, {"detectxss", ""},
	} {
		op, ok := fastpath.Instance(c.name, c.args)
		if !ok {
			t.Fatalf("no instance of @%s %s", c.name, c.args)
		}
		judge, ok := fastpath.Judge(op)
		if !ok {
			t.Fatalf("@%s %s has no decision", c.name, c.args)
		}
		for _, v := range values {
			if got, want := judge(v), op.Evaluate(screenState{}, v); got != want {
				t.Errorf("@%s %s on %q: judge %v, Evaluate %v", c.name, c.args, v, got, want)
			}
		}
	}
	op, ok := fastpath.Instance("streq", "%{tx.x}")
	if !ok {
		t.Fatal("no instance of @streq %{tx.x}")
	}
	if _, ok := fastpath.Judge(op); ok {
		t.Error("@streq %{tx.x} has a decision without a transaction")
	}
}
