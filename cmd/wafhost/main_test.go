package main

import "testing"

// Bad flags fail before anything is compiled, naming the flag and the fix.
func TestRun_badFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--envoy", "1.20"}, `--envoy: envoy version "1.20": want 1.33 to 1.38 (cpp-host #427) or 1.39 and later (cpp-host #533)`},
		{[]string{"--failure-policy", "retry"}, `--failure-policy: failure policy "retry": want fail_closed, fail_open or fail_reload`},
		{[]string{"--log-level", "loud"}, `--log-level: log level "loud": want one of trace, debug, info, warn, error, critical`},
		{[]string{"--concurrency", "0"}, `--concurrency: got 0, want 1 or more`},
		{[]string{"--config", "a.json", "--config-json", "{}"}, `--config and --config-json: give one of them`},
		{[]string{"--stats-tags", "rule_id"}, `--stats-tags: stats tag 0 "rule_id": want tag_name=regex`},
		{[]string{"--vm-env", "GOGC"}, `--vm-env "GOGC": want NAME=value`},
		{[]string{"--vm-env", "=1"}, `--vm-env "=1": want NAME=value`},
		{[]string{"--upstream", "localhost:80"}, `--upstream: upstream "localhost:80": want an absolute http:// or https:// URL`},
	}
	for _, c := range cases {
		err := run(append(c.args, "--admin", ""))
		if err == nil || err.Error() != c.want {
			t.Errorf("run(%q): %v, want %s", c.args, err, c.want)
		}
	}
}
