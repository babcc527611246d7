package fastpath

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// The fuzz targets compare this package's operators with Coraza's
// built-ins through the harness of ops_test.go.

// ruleSafe reports whether arg can be written into a rule's quoted
// operator text as is.
func ruleSafe(arg string) bool {
	for i := 0; i < len(arg); i++ {
		if c := arg[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// forget drops what the "fp_" factories recorded for c, so that fuzzing
// does not accumulate operators.
func forget(c opCase) {
	built.mu.Lock()
	delete(built.m, instanceKey{strings.ToLower(ownNames[c.op]), c.arg})
	built.mu.Unlock()
}

// fuzzCase compiles c with the built-in and with this package's operator
// and compares them on values; both must compile or neither.
func fuzzCase(t *testing.T, root fs.FS, c opCase, values ...string) {
	c.arg = strings.TrimSpace(c.arg) // as the rule parser hands it over
	builtin, own := compiles(root, c)
	if (builtin == nil) != (own == nil) {
		t.Fatalf("%v: the built-in compiles with %v, this package's with %v", c, builtin, own)
	}
	if builtin != nil {
		return
	}
	defer forget(c)
	p := compilePair(t, root, []opCase{c})
	defer p.close()
	for _, v := range values {
		p.run(t, v)
	}
}

func FuzzPM(f *testing.F) {
	crs := crsArgs(f)
	for _, a := range crs["pm"] {
		f.Add(a, "gzip, deflate, br")
	}
	for _, c := range handCases {
		if c.op == "pm" && ruleSafe(c.arg) {
			f.Add(c.arg, "xx foo FOO Ä é ſ abcd aa")
		}
	}
	f.Add("ab b", "abababab")
	f.Fuzz(func(t *testing.T, args, value string) {
		if !ruleSafe(args) {
			t.Skip()
		}
		fuzzCase(t, nil, opCase{"pm", args}, value, strings.ToUpper(value), args)
	})
}

func FuzzPMFromFile(f *testing.F) {
	root := testRoot(f)
	for _, name := range []string{"comments.data", "overlap.data", "nonascii.data", "unix-shell.data"} {
		f.Add(string(root[name].Data), "cat /etc/passwd FOO bar abcd ÉTÉ")
	}
	f.Fuzz(func(t *testing.T, content, value string) {
		root := fstest.MapFS{"f.data": {Data: []byte(content)}}
		fuzzCase(t, root, opCase{"pmFromFile", "f.data"}, value, strings.ToUpper(value), content)
	})
}

func FuzzStrMatch(f *testing.F) {
	for _, c := range handCases {
		if ruleSafe(c.arg) {
			f.Add(c.arg, "foo")
		}
	}
	f.Fuzz(func(t *testing.T, args, value string) {
		if !ruleSafe(args) {
			t.Skip()
		}
		for _, op := range []string{"contains", "beginsWith", "endsWith", "streq", "within"} {
			fuzzCase(t, nil, opCase{op, args}, value, args, "foo", "")
		}
	})
}

// fuzzValues compares the cases on fuzzed values, with the WAF compiled
// once per process.
func fuzzValues(f *testing.F, cases []opCase) {
	for _, v := range operatorValues {
		f.Add(v)
	}
	for _, v := range []string{"1' OR '1'='1", "1 UNION SELECT * FROM users--", "<img src=x onerror=alert(1)>", "javascript:alert(1)", "<a href=\"x\">", "1;DROP TABLE t", "\"><svg/onload=alert(1)>"} {
		f.Add(v)
	}
	p := compilePair(f, nil, cases)
	f.Cleanup(p.close)
	f.Fuzz(func(t *testing.T, value string) {
		p.run(t, value)
	})
}

func FuzzDetectSQLi(f *testing.F) {
	fuzzValues(f, []opCase{{"detectSQLi", ""}})
}

func FuzzDetectXSS(f *testing.F) {
	fuzzValues(f, []opCase{{"detectXSS", ""}})
}
