package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/filter/rules"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	goodJSON := `{"directives_map": {"a": ["SecRuleEngine On"]}, "default_directives": "a"}`
	os.WriteFile(good, []byte(goodJSON), 0o644)
	// ok is the last line for a configuration: the CRS it was checked
	// against and the digest the plugin would name it by.
	ok := func(path, config string) string {
		return path + ": ok (checked against OWASP CRS " + rules.CRSVersion + "); configuration " + filter.ConfigDigest([]byte(config)) +
			", as the plugin's start line and waf_filter.config_info name it\n"
	}
	os.WriteFile(bad, []byte(`{"directives_map": {"a": ["SecNope"]}, "default_directives": "a", "admission": {"cas_retries": -1}}`), 0o644)
	for _, tc := range []struct {
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{args: []string{"--config", good}, wantCode: 0, wantStdout: ok(good, goodJSON)},
		{args: []string{"-"}, stdin: `{}`, wantCode: 0, wantStdout: ok("-", `{}`)},
		{args: []string{"-"}, stdin: `{"hold_headers_until_inspected": true}`, wantCode: 0,
			wantStdout: "-: note: hold_headers_until_inspected is true: set allow_on_headers_stop_iteration: true in the wasm filter's plugin config " +
				"(envoy.extensions.wasm.v3.PluginConfig, Envoy 1.35+; an Istio WasmPlugin cannot set it). " +
				"Without it Envoy delivers no body while the plugin holds the headers, and the plugin answers those requests 500 after hold_headers_timeout_ms\n" +
				ok("-", `{"hold_headers_until_inspected": true}`)},
		{args: []string{"--config", bad}, wantCode: 1, wantStderr: []string{
			bad + `: directives_map["a"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: unknown directive "secnope"`,
			bad + `: admission.cas_retries: got -1, want an integer from 0 to 1000`,
			bad + `: 2 problem(s); the plugin would refuse this configuration (checked against OWASP CRS ` + rules.CRSVersion + `)`,
		}},
		{args: nil, wantCode: 2},
		{args: []string{"--config", filepath.Join(dir, "missing.json")}, wantCode: 2},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
		if code != tc.wantCode || (tc.wantStdout != "" && stdout.String() != tc.wantStdout) {
			t.Errorf("run(%q): code %d, stdout %q, stderr %q; want code %d, stdout %q", tc.args, code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout)
		}
		if tc.wantStderr != nil {
			if got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.wantStderr, "\n") {
				t.Errorf("run(%q) stderr:\ngot  %q\nwant %q", tc.args, got, tc.wantStderr)
			}
		}
	}
}
