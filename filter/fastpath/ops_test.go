package fastpath

import (
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/internal/crscorpus"

	"github.com/wafguard/wafguard/filter/rules"
)

// The equality tests compile each rule twice into one WAF: once with
// Coraza's built-in operator (the built-ins stay registered as long as
// nobody in this test binary calls Register; see notRegistered) and once
// with this package's, registered under "fp_" + the built-in's name. Every
// tested rule captures and ends with the fprec action, which records
// TX.0 to TX.9 for the rule; an fpreset SecAction before each rule clears
// them. This package's operator is also evaluated directly, outside
// Coraza, with a TransactionState that only answers Capturing() and
// records CaptureField, capturing and not.

// ownNames maps the built-in names to the ones this package's operators
// are registered under in the tests.
var ownNames = map[string]string{}

func init() {
	for _, o := range operators {
		name := "fp_" + o.name
		ownNames[o.name] = name
		plugins.RegisterOperator(name, recording(strings.ToLower(name), o.factory))
	}
	plugins.RegisterAction("fprec", func() plugintypes.Action { return recAction{} })
	plugins.RegisterAction("fpreset", func() plugintypes.Action { return resetAction{} })
}

// notRegistered fails the test when Register ran in this test binary: the
// rules naming the built-ins would then compile with this package's
// operators, and the comparison would prove nothing.
func notRegistered(t testing.TB) {
	t.Helper()
	if registered.Load() {
		t.Fatal("Register ran in this test binary: the built-in operators are gone")
	}
}

// unset marks a capture field no operator set since the last fpreset.
const unset = "\x00fastpath:unset"

// outcome is a rule's verdict and the capture fields it set.
type outcome struct {
	matched bool
	fields  map[int]string
}

func (o outcome) String() string {
	if !o.matched {
		return "no match"
	}
	keys := make([]int, 0, len(o.fields))
	for k := range o.fields {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var b strings.Builder
	b.WriteString("match")
	for _, k := range keys {
		fmt.Fprintf(&b, " TX.%d=%q", k, o.fields[k])
	}
	return b.String()
}

func sameOutcome(a, b outcome) bool {
	return a.matched == b.matched && maps.Equal(a.fields, b.fields)
}

// records holds, per transaction ID, the outcome of each rule that ran
// fprec.
var records = struct {
	sync.Mutex
	m map[string]map[int]outcome
}{m: map[string]map[int]outcome{}}

type recAction struct{}

func (recAction) Init(plugintypes.RuleMetadata, string) error { return nil }
func (recAction) Type() plugintypes.ActionType                { return plugintypes.ActionTypeNondisruptive }
func (recAction) Evaluate(r plugintypes.RuleMetadata, tx plugintypes.TransactionState) {
	o := outcome{matched: true, fields: map[int]string{}}
	col := tx.Variables().TX()
	for i := 0; i < 10; i++ {
		if v := col.Get(strconv.Itoa(i)); len(v) > 0 && v[0] != unset {
			o.fields[i] = v[0]
		}
	}
	records.Lock()
	defer records.Unlock()
	m := records.m[tx.ID()]
	if m == nil {
		m = map[int]outcome{}
		records.m[tx.ID()] = m
	}
	m[r.ID()] = o
}

type resetAction struct{}

func (resetAction) Init(plugintypes.RuleMetadata, string) error { return nil }
func (resetAction) Type() plugintypes.ActionType                { return plugintypes.ActionTypeNondisruptive }
func (resetAction) Evaluate(_ plugintypes.RuleMetadata, tx plugintypes.TransactionState) {
	col := tx.Variables().TX()
	for i := 0; i < 10; i++ {
		col.Set(strconv.Itoa(i), []string{unset})
	}
}

// opCase is an operator (Coraza's name) and its argument as Coraza hands
// it over (after the rule parser's unescaping and trimming).
type opCase struct {
	op, arg string
}

func (c opCase) String() string { return "@" + c.op + " " + c.arg }

func (c opCase) hasMacro() bool { return strings.Contains(c.arg, "%{") }

// rule is the SecRule text for c with operator name op.
func (c opCase) rule(op string, id int) string {
	text := "@" + op
	if c.arg != "" {
		text += " " + strings.ReplaceAll(c.arg, `"`, `\"`)
	}
	return fmt.Sprintf("SecAction \"id:%d,phase:1,pass,nolog,fpreset\"\nSecRule ARGS_GET:x \"%s\" \"id:%d,phase:1,pass,nolog,capture,fprec\"\n", id, text, id+1)
}

// macroSetup sets the TX variables the tested macros name.
const macroSetup = `SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.x=foo,setvar:'tx.y=a b',\
setvar:'tx.allowed_methods=GET HEAD POST OPTIONS',\
setvar:'tx.allowed_request_content_type=|application/x-www-form-urlencoded| |multipart/form-data| |text/xml| |application/json|',\
setvar:'tx.allowed_request_content_type_charset=|utf-8| |iso-8859-1| |iso-8859-15| |windows-1252|',\
setvar:'tx.allowed_http_versions=HTTP/1.0 HTTP/1.1 HTTP/2 HTTP/2.0 HTTP/3 HTTP/3.0',\
setvar:'tx.restricted_extensions=.asa/ .asax/ .backup/ .bak/ .bat/ .cdx/ .cer/ .cfg/ .cmd/ .com/ .config/ .conf/ .cs/',\
setvar:'tx.restricted_headers_basic=/content-encoding/ /proxy/ /lock-token/ /content-range/ /if/ /x-http-method-override/',\
setvar:'tx.restricted_headers_extended=/accept-charset/'"
`

// pairWAF is a WAF with, for each case that compiles, the built-in's rule
// and this package's.
type pairWAF struct {
	waf   coraza.WAF
	cases []opCase
	// own holds this package's operator for each case, built by Coraza
	// for the WAF, nil for cases with a macro.
	own []plugintypes.Operator
}

func ruleID(i int, own bool) int {
	id := 1000 + 10*i
	if own {
		id += 5
	}
	return id + 1
}

// newWAF compiles directives, reading data files from root when it is not
// nil.
func newWAF(root fs.FS, directives string) (coraza.WAF, error) {
	cfg := coraza.NewWAFConfig().WithDirectives(directives)
	if root != nil {
		cfg = cfg.WithRootFS(root)
	}
	return coraza.NewWAF(cfg)
}

// compilePair compiles cases, which must all compile, into one WAF.
func compilePair(t testing.TB, root fs.FS, cases []opCase) *pairWAF {
	t.Helper()
	notRegistered(t)
	var b strings.Builder
	b.WriteString(macroSetup)
	for i, c := range cases {
		b.WriteString(c.rule(c.op, 1000+10*i))
		b.WriteString(c.rule(ownNames[c.op], 1000+10*i+5))
	}
	waf, err := newWAF(root, b.String())
	if err != nil {
		t.Fatalf("compiling %d cases: %v", len(cases), err)
	}
	p := &pairWAF{waf: waf, cases: cases, own: make([]plugintypes.Operator, len(cases))}
	for i, c := range cases {
		if c.hasMacro() {
			continue
		}
		op, ok := built.get(strings.ToLower(ownNames[c.op]), c.arg)
		if !ok {
			t.Fatalf("%v: no operator of this package was recorded", c)
		}
		p.own[i] = op
	}
	return p
}

func (p *pairWAF) close() {
	if c, ok := p.waf.(experimental.WAFCloser); ok {
		_ = c.Close()
	}
}

// run evaluates every case on value, through the WAF and directly, and
// reports each difference with the built-in; it returns how many cases
// matched.
func (p *pairWAF) run(t testing.TB, value string) int {
	t.Helper()
	got := p.outcomes(t, value)
	matched := 0
	for i, c := range p.cases {
		want := got[ruleID(i, false)]
		if want.matched {
			matched++
		}
		if inWAF := got[ruleID(i, true)]; !sameOutcome(inWAF, want) {
			t.Errorf("%v on %q: built-in: %v; this package's, in the WAF: %v", c, value, want, inWAF)
		}
		if op := p.own[i]; op != nil {
			if direct := evalDirect(t, op, value); !sameOutcome(direct, want) {
				t.Errorf("%v on %q: built-in: %v; this package's, evaluated directly: %v", c, value, want, direct)
			}
		}
	}
	return matched
}

// outcomes runs a transaction with value as ARGS_GET:x and returns the
// outcome of each rule that matched, by rule ID.
func (p *pairWAF) outcomes(t testing.TB, value string) map[int]outcome {
	t.Helper()
	tx := p.waf.NewTransaction()
	tx.AddGetRequestArgument("x", value)
	tx.ProcessRequestHeaders()
	id := tx.ID()
	if err := tx.Close(); err != nil {
		t.Fatal(err)
	}
	records.Lock()
	defer records.Unlock()
	got := records.m[id]
	delete(records.m, id)
	return got
}

// evalDirect evaluates op on value with a state that only answers
// Capturing() and records CaptureField (anything else panics): once
// capturing, for the outcome, and once not, which must give the same
// verdict and no capture.
func evalDirect(t testing.TB, op plugintypes.Operator, value string) outcome {
	t.Helper()
	tx := &captureTx{capturing: true, fields: map[int]string{}}
	o := outcome{matched: op.Evaluate(tx, value), fields: map[int]string{}}
	if o.matched {
		o.fields = tx.fields
	} else if len(tx.fields) > 0 {
		t.Errorf("%T on %q: captured %v without a match", op, value, tx.fields)
	}
	quiet := &captureTx{fields: map[int]string{}}
	if m := op.Evaluate(quiet, value); m != o.matched || len(quiet.fields) > 0 {
		t.Errorf("%T on %q: not capturing: match %v, fields %v; capturing: match %v", op, value, m, quiet.fields, o.matched)
	}
	if m, ok := op.(interface{ matches(string) bool }); ok && m.matches(value) != o.matched {
		t.Errorf("%T on %q: matches says %v, Evaluate %v", op, value, !o.matched, o.matched)
	}
	return o
}

// compiles reports whether a WAF with c's rule compiles, with the
// built-in operator and with this package's.
func compiles(root fs.FS, c opCase) (builtin, own error) {
	try := func(op string) error {
		waf, err := newWAF(root, c.rule(op, 100))
		if err == nil {
			if cl, ok := waf.(experimental.WAFCloser); ok {
				_ = cl.Close()
			}
		}
		return err
	}
	return try(c.op), try(ownNames[c.op])
}

// crsOperatorRe finds an operator at the start of a rule's quoted operator
// text.
var crsOperatorRe = regexp.MustCompile(`"!?@([A-Za-z]+)[ "]`)

// crsArgs returns, for each operator name, the distinct arguments the CRS
// rule files give it, as Coraza hands them to the operator.
func crsArgs(t testing.TB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	seen := map[opCase]bool{}
	err := fs.WalkDir(rules.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".conf") {
			return err
		}
		b, err := fs.ReadFile(rules.FS, path)
		if err != nil {
			return err
		}
		s := string(b)
		for _, loc := range crsOperatorRe.FindAllStringSubmatchIndex(s, -1) {
			name := s[loc[2]:loc[3]]
			rest := s[loc[3]:]
			var arg strings.Builder
			for j := 0; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) && rest[j+1] == '"' {
					j++
				}
				arg.WriteByte(rest[j])
			}
			c := opCase{name, strings.TrimSpace(arg.String())}
			if !seen[c] {
				seen[c] = true
				out[name] = append(out[name], c.arg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testRoot is the file system the tested WAFs read data files from: the
// CRS data files and a few hand-written ones, at its top.
func testRoot(t testing.TB) fstest.MapFS {
	t.Helper()
	root := fstest.MapFS{
		"empty.data":    {Data: nil},
		"comments.data": {Data: []byte("# a comment\n\n   Foo Bar  \n#not\n\tBAZ\t\r\nqux\r\n  # indented comment\nlast-no-newline")},
		"blank.data":    {Data: []byte("\n\n  \n#\n")},
		"overlap.data":  {Data: []byte("a\nab\nabc\nbcd\ncd\n")},
		"nonascii.data": {Data: []byte("ÉTÉ\nſelect\n\u212aelvin\n\xff\xfe\nİstanbul\n")},
		"long.data":     {Data: []byte("first\n" + strings.Repeat("y", 70000) + "\nafter-the-long-line\n")},
		"dup.data":      {Data: []byte("foo\nFOO\nfoo\n")},
		"dir/sub.data":  {Data: []byte("inside\n")},
	}
	files, err := fs.Glob(rules.FS, "@owasp_crs/*.data")
	if err != nil || len(files) < 10 {
		t.Fatalf("CRS data files: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := fs.ReadFile(rules.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		root[strings.TrimPrefix(f, "@owasp_crs/")] = &fstest.MapFile{Data: b}
	}
	return root
}

// handCases are edge cases for each operator.
var handCases = []opCase{
	{"eq", "0"}, {"eq", "5"}, {"eq", "-3"}, {"eq", "%{tx.x}"}, {"eq", "x"}, {"eq", "99999999999999999999"},
	{"ge", "1"}, {"ge", "%{tx.missing}"}, {"gt", "255"}, {"gt", "5a"}, {"le", "0"}, {"le", "+7"}, {"lt", "2"}, {"lt", "%{tx.y}"},
	{"lt", ""}, {"gt", "%{"},
	{"validateByteRange", "1-255"}, {"validateByteRange", "32-126"}, {"validateByteRange", "0-255"}, {"validateByteRange", ""},
	{"validateByteRange", "9,10,13,32-126"}, {"validateByteRange", " 65 - 90"}, {"validateByteRange", "65-90, 97-122"},
	{"validateByteRange", "300"}, {"validateByteRange", "a-b"}, {"validateByteRange", "5-1"}, {"validateByteRange", "1-1,255"},
	{"validateByteRange", "-1"}, {"validateByteRange", "1-"}, {"validateByteRange", "1-255,"},
	{"pm", "foo bar"}, {"pm", "FOO Bar"}, {"pm", "a ab abc"}, {"pm", "abc bcd cde"}, {"pm", "foo  bar"},
	{"pm", ""}, {"pm", "é Ä ſ \u212a"}, {"pm", "\xff"}, {"pm", "ß ss"}, {"pm", "a"}, {"pm", "aa aaa"},
	{"pm", "%{tx.x}"}, {"pm", "<script> javascript: onerror="}, {"pm", "select union insert"},
	{"pm", "/ ; -- ' \""}, {"pm", "x y z 1 2 3 4 5 6 7 8 9 0"}, {"pm", "İ K"},
	{"pmFromFile", "empty.data"}, {"pmFromFile", "comments.data"}, {"pmFromFile", "blank.data"},
	{"pmFromFile", "overlap.data"}, {"pmFromFile", "nonascii.data"}, {"pmFromFile", "long.data"},
	{"pmFromFile", "dup.data"}, {"pmFromFile", "dir/sub.data"}, {"pmFromFile", "missing.data"},
	{"pmFromFile", "/comments.data"}, {"pmFromFile", "comments.data overlap.data"}, {"pmFromFile", ""},
	{"pmf", "comments.data"}, {"pmf", "unix-shell.data"}, {"pmf", "missing.data"},
	{"contains", "a"}, {"contains", "A"}, {"contains", "é"}, {"contains", "\xff"}, {"contains", ""},
	{"contains", "%{tx.x}"}, {"contains", "pre%{tx.x}post"}, {"contains", "%{tx.missing}"}, {"contains", "%{ARGS_GET.x}"},
	{"contains", "%{tx.empty}"}, {"contains", "a%{"}, {"contains", "%{foo"}, {"contains", "%{tx.}"},
	{"contains", "%{nosuchvariable.x}"}, {"contains", "%{}"}, {"contains", "50%"}, {"contains", "%{tx.y}"},
	{"beginsWith", "a"}, {"beginsWith", "GET"}, {"beginsWith", "%{tx.x}"}, {"beginsWith", ""}, {"beginsWith", "/"},
	{"endsWith", "a"}, {"endsWith", ".php"}, {"endsWith", "%{ARGS_GET.x}"}, {"endsWith", ""}, {"endsWith", "é"},
	{"streq", "a"}, {"streq", "A"}, {"streq", "%{ARGS_GET.x}"}, {"streq", "%{tx.x}"}, {"streq", ""}, {"streq", "1"},
	{"within", "GET,POST"}, {"within", "GET HEAD POST"}, {"within", "%{tx.allowed_methods}"}, {"within", ""},
	{"within", "a"}, {"within", "%{tx.empty}"}, {"within", "é"},
	{"detectSQLi", ""}, {"detectSQLi", "ignored"}, {"detectXSS", ""}, {"detectXSS", "ignored"},
}

// equalityCases returns the CRS's arguments and the hand-written cases for
// op, those that compile, checking that each compiles with this package's
// operator exactly when it does with the built-in.
func equalityCases(t testing.TB, root fs.FS, crs map[string][]string, ops ...string) []opCase {
	t.Helper()
	var cases []opCase
	for _, op := range ops {
		for _, a := range crs[op] {
			cases = append(cases, opCase{op, a})
		}
		for _, c := range handCases {
			if c.op == op {
				cases = append(cases, c)
			}
		}
	}
	var ok []opCase
	for _, c := range cases {
		builtin, own := compiles(root, c)
		if (builtin == nil) != (own == nil) {
			t.Errorf("%v: the built-in compiles with %v, this package's with %v", c, builtin, own)
		}
		if builtin == nil && own == nil {
			ok = append(ok, c)
		}
	}
	return ok
}

func corpus(t testing.TB) []string {
	t.Helper()
	s, err := crscorpus.Strings()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// operatorValues are values aimed at the hand-written cases and the CRS
// arguments: hits, near misses, case variants, overlaps, more than ten
// matches, and the expansions of the macros.
var operatorValues = []string{
	"", "a", "A", "foo", "FOO", "xfoox", "foo bar foo bar", "abcd", "abcde", "aaaaaa", "é", "É", "Ä", "ä", "\xff", "\xfe\xff",
	"ſ", "S", "s", "\u212a", "k", "K", "ss", "ß", "SS", "İ", "i̇", "i", "GET", "get", "GET /", "POST", "HEAD", "GET,POST", "T,P",
	"HTTP/1.1", "HTTP/2", "HTTP/3.0", "HTTP/4", "JSON", "1", "11", "x.pdf", "x.PDF", ".pdf", "(internal dummy connection)",
	"gzip", "deflate, br", "AppleWebKit", "Android 12", "#", "#:~:text=", "#:~:text=foo", "-->", "<!--", "?>", "( )", "( ",
	"<title>punkholicshell</title>", `<h1 style="margin-bottom: 0">webadmin.php</h1>`, "document.cookie", "DOCUMENT.COOKIE",
	"1 2 3 4 5 6 7 8 9 0 x y z", "xyz1234567890", "abcabcabcabcabcabcabcabcabcabcabcabc", "prefoopost", "tx.missing", "foox",
	"a b", "/etc/passwd", "../../etc/shadow", "cat /etc/passwd; wget x", "nc -e /bin/sh", "SELECT union INSERT",
	"Foo Bar", "foo bar", "baz", "BAZ", "qux", "last-no-newline", "first", "after-the-long-line", "inside", "ÉTÉ", "été",
	"ſelect", "select", "SELECT", "\u212aelvin", "kelvin", "İstanbul", "istanbul", "a%{", "50%", "application/json",
	"|application/json|", "|utf-8|", "/proxy/", ".bak/", "ignored", "1' or '1'='1", "<script>alert(1)</script>",
	"/ ; -- ' \"", "\x00", "a\x00b", "0", "1", "2", "5", "-3", "255", "256", "+7", "7", " 5", "5 ", "1e3", "99999999999999999999", strings.Repeat("ab", 5000), strings.Repeat("foo ", 30),
}

// TestEqualToBuiltins compares every operator with Coraza's built-in over
// the CRS's arguments and hand-written edge cases, on the CRS regression
// corpus (sampled: every fourth value, all with FASTPATH_FULL_CORPUS=1)
// and values aimed at the cases.
func TestEqualToBuiltins(t *testing.T) {
	notRegistered(t)
	root := testRoot(t)
	crs := crsArgs(t)
	for _, op := range []string{"pm", "pmFromFile", "contains", "beginsWith", "endsWith", "streq", "within", "detectSQLi", "detectXSS", "validateByteRange", "lt", "ge", "gt", "eq"} {
		if len(crs[op]) == 0 {
			t.Errorf("no @%s in the CRS", op)
		}
	}
	values := append(sampled(corpus(t)), operatorValues...)
	for _, group := range [][]string{
		{"pm"}, {"pmFromFile", "pmf"}, {"contains", "beginsWith", "endsWith", "streq", "within"}, {"detectSQLi", "detectXSS"},
		{"validateByteRange"}, {"eq", "ge", "gt", "le", "lt"},
	} {
		t.Run(strings.Join(group, ","), func(t *testing.T) {
			cases := equalityCases(t, root, crs, group...)
			p := compilePair(t, root, cases)
			defer p.close()
			matched := 0
			for _, v := range values {
				matched += p.run(t, v)
				if t.Failed() {
					t.FailNow() // one value's differences are enough to read
				}
			}
			t.Logf("%d cases, %d values, %d matches", len(cases), len(values), matched)
		})
	}
}

// TestPMCapturesTen checks the limit of ten capture fields and the order
// of overlapping matches against the built-in.
func TestPMCapturesTen(t *testing.T) {
	root := testRoot(t)
	p := compilePair(t, root, []opCase{{"pm", "a ab b ba"}, {"pmFromFile", "overlap.data"}})
	defer p.close()
	for _, v := range []string{"abababababababababababab", "ab", "aab", "abcd abcd abcd abcd abcd abcd abcd abcd abcd abcd abcd"} {
		p.run(t, v)
	}
	// The harness sees the built-in's captures.
	got := p.outcomes(t, "xxabababababababababababab")
	for i := range p.cases {
		for _, own := range []bool{false, true} {
			if o := got[ruleID(i, own)]; !o.matched || len(o.fields) != 10 || o.fields[0] == "" {
				t.Errorf("%v (own: %v): %v, want ten capture fields", p.cases[i], own, o)
			}
		}
	}
	op, _ := newPM(plugintypes.OperatorOptions{Arguments: "a"})
	tx := &captureTx{capturing: true, fields: map[int]string{}}
	if !op.Evaluate(tx, strings.Repeat("a", 20)) || len(tx.fields) != 10 {
		t.Errorf("twenty matches: fields %v, want TX.0 to TX.9", tx.fields)
	}
}

// TestPMFromFileSearch checks how the data file is found: in the directory
// of the rule file, then the working directory; an absolute name from the
// root.
func TestPMFromFileSearch(t *testing.T) {
	root := absFS{fstest.MapFS{
		"rules/a.data":    {Data: []byte("from-rules\n")},
		"rules/both.data": {Data: []byte("first-dir\n")},
		"both.data":       {Data: []byte("root-top\n")},
		"abs.data":        {Data: []byte("absolute\n")},
	}}
	for _, tc := range []struct {
		args  []string
		path  []string
		value string
		want  bool
		err   bool
	}{
		{[]string{"a.data"}, []string{"rules"}, "from-rules", true, false},
		{[]string{"a.data"}, []string{"nowhere", "rules"}, "from-rules", true, false},
		{[]string{"both.data"}, []string{"rules", ""}, "first-dir", true, false},
		{[]string{"both.data"}, []string{"", "rules"}, "root-top", true, false},
		{[]string{"a.data"}, nil, "", false, true},
		{[]string{"a.data"}, []string{"nowhere"}, "", false, true},
		{[]string{"/abs.data"}, nil, "absolute", true, false},
		{[]string{"/abs.data"}, []string{"rules"}, "absolute", true, false},
		{[]string{"/rules/a.data"}, []string{"nowhere"}, "from-rules", true, false},
		{[]string{"/a.data"}, []string{"rules"}, "", false, true},
	} {
		for _, a := range tc.args {
			op, err := newPMFromFile(plugintypes.OperatorOptions{Arguments: a, Path: tc.path, Root: root})
			if (err != nil) != tc.err {
				t.Errorf("%s in %q: error %v", a, tc.path, err)
				continue
			}
			if err == nil && op.Evaluate(&captureTx{fields: map[int]string{}}, tc.value) != tc.want {
				t.Errorf("%s in %q: %q does not match", a, tc.path, tc.value)
			}
		}
	}
}

// absFS opens absolute names from its top, like Coraza's default root.
type absFS struct{ m fstest.MapFS }

func (f absFS) Open(name string) (fs.File, error) { return f.m.Open(strings.TrimPrefix(name, "/")) }

// TestMacroOperatorsNeedState documents the exception Instance describes:
// an argument with a macro is expanded from the transaction.
func TestMacroOperatorsNeedState(t *testing.T) {
	op, err := newContains(plugintypes.OperatorOptions{Arguments: "%{tx.x}"})
	if err != nil {
		t.Fatal(err)
	}
	if op.(*strMatch).expand == nil {
		t.Fatal("the macro is not expanded")
	}
	for _, a := range []string{"a", "a%b", "%", "{tx.x}"} {
		op, err := newContains(plugintypes.OperatorOptions{Arguments: a})
		if err != nil {
			t.Fatal(err)
		}
		if op.(*strMatch).expand != nil {
			t.Errorf("%q: expanded as a macro", a)
		}
		// The state panics on anything but Capturing().
		if !op.Evaluate(&captureTx{}, a) {
			t.Errorf("%q does not contain itself", a)
		}
	}
}

func TestOwns(t *testing.T) {
	for _, name := range []string{"rx", "pm", "pmfromfile", "pmf", "contains", "beginswith", "endswith", "streq", "within", "detectsqli", "detectxss", "validatebyterange", "eq", "lt", "ge", "gt", "le"} {
		if !Owns(name) {
			t.Errorf("Owns(%q) = false", name)
		}
	}
	for _, name := range []string{"", "EQ", "ipMatch", "ipmatch", "pmFromFile", "@pm", "validateByteRange", "unconditionalmatch"} {
		if Owns(name) {
			t.Errorf("Owns(%q) = true", name)
		}
	}
}

// TestInstancesAmbiguous checks that two builds for one name and argument
// that may judge values differently are not handed out.
func TestInstancesAmbiguous(t *testing.T) {
	in := instances{m: map[instanceKey]*instanceEntry{}}
	a := fstest.MapFS{"f.data": {Data: []byte("abc\n")}}
	b := fstest.MapFS{"f.data": {Data: []byte("xy\n")}}
	build := func(root fs.FS) plugintypes.Operator {
		op, err := newPMFromFile(plugintypes.OperatorOptions{Arguments: "f.data", Path: []string{""}, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	in.put("pmfromfile", "f.data", build(a))
	in.put("pmfromfile", "f.data", build(a))
	if _, ok := in.get("pmfromfile", "f.data"); !ok {
		t.Fatal("two builds of one file are ambiguous")
	}
	in.put("pmfromfile", "f.data", build(b))
	if _, ok := in.get("pmfromfile", "f.data"); ok {
		t.Fatal("builds of two files are not ambiguous")
	}
	in.put("pm", "x", func() plugintypes.Operator { op, _ := newPM(plugintypes.OperatorOptions{Arguments: "x"}); return op }())
	in.put("pm", "x", func() plugintypes.Operator { op, _ := newPM(plugintypes.OperatorOptions{Arguments: "x"}); return op }())
	if _, ok := in.get("pm", "x"); !ok {
		t.Fatal("@pm x is ambiguous")
	}
}
