// Command wafcheck checks a plugin configuration before it goes live: it
// parses the JSON, compiles every rule set natively with Coraza exactly as
// the plugin does at start, and validates the admission object. It prints
// every problem on its own line, naming the key or the rule set, and exits
// with status 1 when there is any (2 for a usage error).
//
//	go run ./cmd/wafcheck --config config/default.json
//	go run ./cmd/wafcheck - < plugin.json
package main

import (
	"io"
	"os"

	"github.com/wafguard/wafguard/pluginconfig"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return pluginconfig.Main("wafcheck", args, stdin, stdout, stderr)
}
