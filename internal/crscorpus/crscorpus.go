// Package crscorpus gives the strings of the OWASP CRS regression tests
// (payloads, URIs, header values) in a few decoded forms, plus hand-written
// edge cases: the corpus that the equivalence tests of the filter's own
// operators and transformations run over.
package crscorpus

import (
	"html"
	"io/fs"
	"net/url"
	"strings"

	"github.com/wafguard/wafguard/filter/rules"
)

// extra are edge cases the regression tests lack: case-folding runes,
// invalid UTF-8, escapes cut short, NULs, long runs.
var extra = []string{
	"1' UNION SELECT password FROM users--", "<script>alert(1)</script>", "../../etc/passwd",
	"; cat /etc/passwd", "${jndi:ldap://x}", "sElEcT * fRoM t", "ſelect", "\u212aill",
	"", "%", "%4", "%u", "%u12", "%u123", "%uFF1C", "%%41", "%zz", "&", "&#", "&#x", "&#x41", "&lt", "&lt;&amp;&quot",
	"\\", "\\u", "\\u00", "\\x4", "\\x41\\u0041\\101\\0", "/*", "/* x", "*/", "--", "#", "a\x00b\x00", "\xff\xfe\x80",
	"\xc3\x28", "\xe2\x82", "\xf0\x9f\x98\x80", "é", "Ａ", "a\tb\nc\rd\fe\vf g", "   ", "..\\..\\win.ini",
	"./a/../b//c/./", "/a/b/../../..", "C:\\Windows\\..\\x", "^c\"a\"t ,/e\\tc;", "YWJj", "YWJj=", "YW=Jj", "!!!",
	"\\e\\n\\t\\'\\\"\\?\\a\\b\\f\\v\\r\\x7g\\777\\08", "\\1\\12\\123\\1234", "&#0;&#65536;&#1114112;&#x110000;",
	"\\41 x\\4142434445464748", "\\\n\\g", strings.Repeat("a%41", 300),
}

// Strings returns the corpus, each string once, in a stable order.
func Strings() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	crstests := rules.RegressionTests()
	err := fs.WalkDir(crstests, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := fs.ReadFile(crstests, path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			k := strings.Index(line, ": ")
			if k < 0 {
				continue
			}
			v := strings.Trim(strings.TrimSpace(line[k+2:]), `"'`)
			add(v)
			if u, err := url.QueryUnescape(v); err == nil {
				add(u)
				add(strings.ToLower(u))
				add(html.UnescapeString(u))
				add(strings.Join(strings.Fields(u), ""))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range extra {
		add(s)
	}
	return out, nil
}
