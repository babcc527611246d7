package filter

import (
	"reflect"
	"strings"
	"testing"
)

func TestValidate_defaults(t *testing.T) {
	for _, cfg := range []*Config{{}, {MetricLabels: map[string]string{"env": "prod"}}} {
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Validate(%+v): %v", cfg, err)
		}
		if cfg.DefaultDirectives != "default" || !reflect.DeepEqual(cfg.DirectivesMap["default"], defaultDirectives) {
			t.Errorf("got default %q, map %v; want the built-in CRS set", cfg.DefaultDirectives, cfg.DirectivesMap)
		}
	}
	// A configuration that names rule sets gets no default one.
	cfg := &Config{DirectivesMap: map[string][]string{"a": nil}}
	if err := cfg.Validate(); err == nil || cfg.DirectivesMap["default"] != nil {
		t.Errorf("Validate(directives_map without default_directives): err %v, map %v; want an error and no default set", err, cfg.DirectivesMap)
	}
}

// TestNewPlugin_validates: a Config built by hand is held to the same
// rules, with the same messages, as one pluginconfig.Parse decoded.
func TestNewPlugin_validates(t *testing.T) {
	for _, tc := range []struct {
		cfg  *Config
		want string
	}{
		{nil, "filter: nil configuration; parse one with pluginconfig.Parse"},
		{&Config{DirectivesMap: map[string][]string{"a": nil}, DefaultDirectives: "b"},
			`default_directives: "b" names no entry in directives_map; want one of "a"`},
		{&Config{DirectivesMap: map[string][]string{"a": nil}, DefaultDirectives: "a", PerAuthorityDirectives: map[string]string{"x.example": "c"}},
			`per_authority_directives["x.example"]: "c" names no entry in directives_map; want one of "a"`},
	} {
		if _, err := NewPlugin(tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("NewPlugin(%+v): got %v, want %s", tc.cfg, err, tc.want)
		}
	}
}

func TestCheckRuleSets(t *testing.T) {
	for _, include := range []string{
		"@recommended-conf", "@crs-setup-conf", "@demo-conf",
		"@coraza.conf-recommended", "@crs-setup.conf.example",
		"@owasp_crs/REQUEST-901-INITIALIZATION.conf",
	} {
		cfg := &Config{DirectivesMap: map[string][]string{"a": {"Include " + include}}}
		if errs := cfg.CheckRuleSets(); errs != nil {
			t.Errorf("Include %s: %v", include, errs)
		}
	}
	off := false
	cfg := &Config{
		DirectivesMap: map[string][]string{
			"c": {"Include @owasp_crs/NO-SUCH-FILE.conf"},
			"a": {"SecNoSuchDirective 1"},
			"b": {"SecRuleEngine On", `SecAction "id:4242001,phase:1,pass,nolog"`},
		},
		RulePreselection: &off,
	}
	want := []string{
		`directives_map["a"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: unknown directive "secnosuchdirective"`,
		`directives_map["c"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: failed to readfile: open @owasp_crs/NO-SUCH-FILE.conf: file does not exist`,
	}
	errs := cfg.CheckRuleSets()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors %v, want %d, one per broken rule set in name order", len(errs), errs, len(want))
	}
	for i := range want {
		if errs[i].Error() != want[i] {
			t.Errorf("error %d:\ngot  %s\nwant %s", i, errs[i], want[i])
		}
	}
	// With rule_preselection off the sets are compiled as the plugin
	// compiles them then: without the screen's index.
	b := strings.Join(cfg.DirectivesMap["b"], "\n")
	_, off1 := wafCache["rule_preselection=false\n"+b]
	_, on := wafCache[b]
	if !off1 || on {
		t.Errorf("rule set b compiled without the preselection: %v, with it: %v; want only without", off1, on)
	}
}

func TestSplitAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ip   string
		port int
	}{
		{"10.1.2.3:43210", "10.1.2.3", 43210},
		{"[2001:db8::1]:8080", "2001:db8::1", 8080},
		{"[2001:db8::1]", "2001:db8::1", 0},
		{"2001:db8::1", "2001:db8::1", 0},
		{"10.1.2.3", "10.1.2.3", 0},
		{"10.1.2.3:notaport", "10.1.2.3:notaport", 0},
		{"", "", 0},
		{"[broken", "[broken", 0},
	} {
		ip, port := splitAddress(tc.in)
		if ip != tc.ip || port != tc.port {
			t.Errorf("splitAddress(%q) = %q, %d; want %q, %d", tc.in, ip, port, tc.ip, tc.port)
		}
	}
}

func TestEncodeLabels(t *testing.T) {
	got := interruptionMetricName(encodeLabels(map[string]string{"zone": "eu-1", "app": "shop"}), 949110, phaseRequestBody)
	want := "waf_filter.tx.interruptions_app=shop_zone=eu-1_ruleid=949110_phase=http_request_body"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestValidate_labelKey(t *testing.T) {
	for _, key := range []string{"phase", "ruleid", "crs", "config", "Owner", "team_name", "1x", ""} {
		data := `{"directives_map": {"a": []}, "default_directives": "a", "metric_labels": {"` + key + `": "x"}}`
		_, err := parseConfig([]byte(data))
		want := `metric_labels: key "` + key + `": want 1 to 32 lower-case letters and digits, starting with a letter, other than "ruleid", "phase", "crs" and "config"`
		if err == nil || err.Error() != want {
			t.Errorf("key %q: got %v, want %s", key, err, want)
		}
	}
}

func TestValidate_duplicateHost(t *testing.T) {
	data := `{"directives_map": {"a": []}, "default_directives": "a", "per_authority_directives": {"a.example.com": "a", "A.example.com:80": "a"}}`
	_, err := parseConfig([]byte(data))
	want := `per_authority_directives["a.example.com"]: same host "a.example.com" as "A.example.com:80" (ports and case are ignored); keep one of them`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
