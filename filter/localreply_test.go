package filter

import "testing"

// TestLocalReply_details: the plugin's local replies carry response code
// details that name it and the reason, which Envoy's access log shows as
// %RESPONSE_CODE_DETAILS%: the rule of a block, the filter's own body
// checks. (The SDK's emulator drops details: the native runner has none.)
func TestLocalReply_details(t *testing.T) {
	config := configJSON(map[string]any{
		"directives_map": map[string][]string{"rules": {
			"SecRuleEngine On", "SecRequestBodyAccess On",
			`SecRule REQUEST_HEADERS:X-Canary "@streq 1" "id:1001,phase:1,deny,status:403"`,
		}},
		"default_directives":          "rules",
		"request_body_no_files_limit": 16,
	})
	cases := []struct {
		name    string
		ex      exchange
		status  int
		details string
	}{
		{"block", exchange{headers: [][2]string{{"x-canary", "1"}}}, 403, "wafguard_block_1001"},
		{"body over request_body_no_files_limit", exchange{method: "POST", headers: [][2]string{{"content-type", "text/plain"}}, body: [][]byte{[]byte("0123456789abcdefghij")}}, 413, "wafguard_body_limit"},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, config)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		_, native := p.(*nativePlugin)
		for _, c := range cases {
			out := p.do(t, c.ex)
			want := c.details
			if native {
				want = ""
			}
			if out.status != c.status || out.details != want {
				t.Errorf("%s: status %d, details %q; want %d, %q", c.name, out.status, out.details, c.status, want)
			}
		}
	})
}
