package filter

import (
	"strings"
	"testing"
)

// TestUnavailable: what a VM cannot do is refused when the rule set
// compiles, with the directive's name and what to use instead; what it
// can do is not.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		directives []string
		want       string // "" for none
	}{
		{[]string{`SecRule REMOTE_ADDR "@rbl sbl-xbl.spamhaus.org" "id:1,phase:1,deny"`}, "@rbl is not available in the plugin: a proxy-wasm VM cannot resolve DNS names"},
		{[]string{`SecRule FILES_TMPNAMES "@inspectFile /bin/check" "id:2,phase:2,deny"`}, "@inspectFile is not available in the plugin"},
		{[]string{`SecRule REQUEST_BODY "@validateSchema s.json" "id:3,phase:2,deny"`}, "@validateSchema is not available in the plugin"},
		{[]string{"SecAuditEngine On", "SecAuditLogType Concurrent"}, "SecAuditLogType concurrent is not available in the plugin: a proxy-wasm VM has no file system; use SecAuditLogType proxywasm"},
		{[]string{"SecAuditEngine On", "SecAuditLogType HTTPS", "SecAuditLog https://x.example/"}, "SecAuditLogType https is not available in the plugin"},
		{[]string{"SecAuditEngine On", "SecAuditLogType syslog"}, "SecAuditLogType syslog is not available in the plugin"},
		{[]string{"SecAuditEngine On", "SecAuditLogType proxywasm", "SecAuditLogFormat OCSF"}, "SecAuditLogFormat OCSF is not available in the plugin; use JSON or Native"},
		{[]string{"SecAuditEngine On", "SecAuditLogType proxywasm", "SecAuditLogFormat \\", "  ocsf"}, "SecAuditLogFormat OCSF is not available"},
		{[]string{"SecAuditEngine On", "SecAuditLogType proxywasm", "SecAuditLogFormat JSON", `SecAction "id:4,phase:1,pass,msg:'ocsf'"`}, ""},
		{[]string{"SecAuditEngine On", "SecAuditLogType Serial", "SecAuditLog /dev/stdout", "SecAuditLogFormat Native"}, ""},
		{[]string{`SecRule ARGS "@rx evil" "id:5,phase:2,deny"`}, ""},
	} {
		for _, preselection := range []bool{false, true} {
			_, err := compileRuleSet("a", tc.directives, preselection)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%q: %v, want none", tc.directives, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%q: %v, want %q", tc.directives, err, tc.want)
			case err != nil && !strings.HasPrefix(err.Error(), `directives_map["a"]: `):
				t.Errorf("%q: %v does not name the rule set", tc.directives, err)
			}
		}
	}
}
