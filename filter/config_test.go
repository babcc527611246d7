package filter

import (
	"reflect"
	"testing"
)

func TestParseConfig_defaults(t *testing.T) {
	for _, data := range []string{"", "  \n", "{}", `{"admission": {"max_inflight": 3}}`} {
		cfg, err := ParseConfig([]byte(data))
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", data, err)
		}
		if cfg.DefaultDirectives != "default" || !reflect.DeepEqual(cfg.DirectivesMap["default"], defaultDirectives) {
			t.Errorf("ParseConfig(%q): got default %q, map %v; want the built-in CRS set", data, cfg.DefaultDirectives, cfg.DirectivesMap)
		}
	}
}

func TestParseConfig_admissionKeptRaw(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"admission": {"max_inflight": 3, "unknown_to_us": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(cfg.Admission), `{"max_inflight": 3, "unknown_to_us": true}`; got != want {
		t.Errorf("Admission: got %s, want %s", got, want)
	}
	cfg, err = ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admission != nil {
		t.Errorf("Admission: got %s, want nil when absent", cfg.Admission)
	}
}

func TestParseConfig_drop_in(t *testing.T) {
	// A coraza-proxy-wasm configuration loads unchanged.
	data := `{
		"directives_map": {
			"rs1": ["Include @demo-conf", "Include @crs-setup-conf", "SecDebugLogLevel 9", "SecRuleEngine On", "Include @owasp_crs/*.conf"],
			"rs2": ["Include @recommended-conf", "SecRuleEngine DetectionOnly"]
		},
		"default_directives": "rs1",
		"per_authority_directives": {"foo.example.com": "rs2", "bar.example.com:8080": "rs2"},
		"metric_labels": {"owner": "coraza", "identifier": "global"}
	}`
	if err := Check([]byte(data)); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestCheck_aliases(t *testing.T) {
	for _, include := range []string{
		"@recommended-conf", "@crs-setup-conf", "@demo-conf",
		"@coraza.conf-recommended", "@crs-setup.conf.example",
		"@owasp_crs/REQUEST-901-INITIALIZATION.conf",
	} {
		data := `{"directives_map": {"a": ["Include ` + include + `"]}, "default_directives": "a"}`
		if err := Check([]byte(data)); err != nil {
			t.Errorf("Include %s: %v", include, err)
		}
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

func TestParseConfig_labelKey(t *testing.T) {
	for _, key := range []string{"phase", "ruleid", "Owner", "team_name", "1x", ""} {
		data := `{"directives_map": {"a": []}, "default_directives": "a", "metric_labels": {"` + key + `": "x"}}`
		_, err := ParseConfig([]byte(data))
		want := `metric_labels: key "` + key + `": want 1 to 32 lower-case letters and digits, starting with a letter, other than "ruleid" and "phase"`
		if err == nil || err.Error() != want {
			t.Errorf("key %q: got %v, want %s", key, err, want)
		}
	}
}

func TestParseConfig_duplicateHost(t *testing.T) {
	data := `{"directives_map": {"a": []}, "default_directives": "a", "per_authority_directives": {"a.example.com": "a", "A.example.com:80": "a"}}`
	_, err := ParseConfig([]byte(data))
	want := `per_authority_directives["a.example.com"]: same host "a.example.com" as "A.example.com:80" (ports and case are ignored); keep one of them`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
