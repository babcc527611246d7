package rules

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/corazawaf/coraza/v3"
)

// testPlugin is a CRS plugin of this repository's own (testdata): its
// config file enables it, its before file exempts the webhook's
// "payload" argument from the SQL injection rules when it is enabled, and
// its after file removes rule 920350 (a numeric Host header).
func testPlugin(t *testing.T) fs.FS {
	t.Helper()
	f, err := WithPlugins(os.DirFS("testdata/plugins/test-exclusion"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// crsWAF compiles the product's rule set (as config/default.json writes
// it) from fsys.
func crsWAF(t *testing.T, fsys fs.FS, extra ...string) coraza.WAF {
	t.Helper()
	directives := append([]string{"Include " + Recommended, "SecRuleEngine On", "Include " + CRSSetup}, extra...)
	directives = append(directives, "Include "+CRSDir+"/*.conf")
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().WithRootFS(fsys).WithDirectives(strings.Join(directives, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return waf
}

// TestPlugins_order: "Include @owasp_crs/*.conf" reads the plugin's
// config file, its before file, the CRS's rules, then its after file.
func TestPlugins_order(t *testing.T) {
	got, err := fs.Glob(testPlugin(t), CRSDir+"/*.conf")
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := fs.Glob(FS, CRSDir+"/*.conf")
	want := append([]string{PluginsDir + "/test-exclusion-config.conf", PluginsDir + "/test-exclusion-before.conf"}, rules...)
	want = append(want, PluginsDir+"/test-exclusion-after.conf")
	if !slices.Equal(got, want) {
		t.Errorf("glob: %v\nwant %v", got, want)
	}
	if len(rules) < 20 || slices.ContainsFunc(rules, func(s string) bool { return strings.HasPrefix(s, PluginsDir) }) {
		t.Errorf("without plugins the glob is %v", rules)
	}
	if _, err := fs.ReadFile(testPlugin(t), PluginsDir+"/test-exclusion-after.conf"); err != nil {
		t.Errorf("a plugin file by its name: %v", err)
	}
}

// verdict runs a GET through waf and returns the interrupting rule (0 for
// none) and whether rule id matched.
func verdict(waf coraza.WAF, uri, host string, id int) (int, bool) {
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI(uri, "GET", "HTTP/1.1")
	tx.AddRequestHeader("Host", host)
	tx.AddRequestHeader("User-Agent", "Mozilla/5.0")
	tx.AddRequestHeader("Accept", "*/*")
	it := tx.ProcessRequestHeaders()
	if it == nil {
		it, _ = tx.ProcessRequestBody()
	}
	matched := false
	for _, m := range tx.MatchedRules() {
		matched = matched || m.Rule().ID() == id
	}
	if it != nil {
		return it.RuleID, matched
	}
	return 0, matched
}

// TestPlugins_apply: with the plugin, the webhook's SQL passes and the
// same SQL elsewhere is blocked; a numeric Host no longer matches 920350.
// Without it, both are what the CRS decides alone; with the plugin
// disabled in the operator's settings (before the CRS rules, as CRS
// documents), its before file does nothing.
func TestPlugins_apply(t *testing.T) {
	const sqli = "?payload=1%20UNION%20SELECT%20password%20FROM%20users"
	with, without := crsWAF(t, testPlugin(t)), crsWAF(t, FS)
	disabled := crsWAF(t, testPlugin(t), `SecAction "id:1099010,phase:1,pass,nolog,setvar:tx.test-exclusion-plugin_enabled=0"`)
	for _, c := range []struct {
		name    string
		waf     coraza.WAF
		uri     string
		blocked bool
		host    string
		matches bool // 920350
	}{
		{"plugin, webhook", with, "/webhook/in" + sqli, false, "example.com", false},
		{"plugin, elsewhere", with, "/search" + sqli, true, "example.com", false},
		{"plugin, numeric host", with, "/", false, "10.1.2.3", false},
		{"no plugin, webhook", without, "/webhook/in" + sqli, true, "example.com", false},
		{"no plugin, numeric host", without, "/", false, "10.1.2.3", true},
		{"plugin disabled, webhook", disabled, "/webhook/in" + sqli, true, "example.com", false},
	} {
		rule, matched := verdict(c.waf, c.uri, c.host, 920350)
		if (rule != 0) != c.blocked || matched != c.matches {
			t.Errorf("%s: interrupted by rule %d, 920350 matched %v; want blocked %v, matched %v", c.name, rule, matched, c.blocked, c.matches)
		}
	}
}

// TestCheckPlugins refuses what is not a plugin's file, naming it.
func TestCheckPlugins(t *testing.T) {
	conf := &fstest.MapFile{Data: []byte("# rules\n")}
	for _, c := range []struct {
		files fstest.MapFS
		want  string // "" for accepted
	}{
		{fstest.MapFS{"a-config.conf": conf, "a-before.conf": conf, "a-after.conf": conf, "a.data": conf}, ""},
		{fstest.MapFS{"a-rules.conf": conf}, "a-rules.conf: a plugin's rule files are named"},
		{fstest.MapFS{"a-before.conf": conf, "README.md": conf}, "README.md: only a plugin's .conf and .data files"},
		{fstest.MapFS{"a/a-before.conf": conf}, "a is a folder"},
		{fstest.MapFS{"a.data": conf}, "no .conf file"},
	} {
		err := CheckPlugins(c.files)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.files, err, c.want)
		}
	}
}
