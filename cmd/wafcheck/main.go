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
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wafguard/wafguard/configcheck"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wafcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "plugin configuration JSON `file` (\"-\" for standard input)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := *config
	if path == "" && fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	if path == "" || fs.NArg() > 1 || (*config != "" && fs.NArg() != 0) {
		fmt.Fprintln(stderr, "usage: wafcheck --config FILE (or wafcheck FILE, or - for standard input)")
		return 2
	}
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wafcheck: reading the configuration: %v\n", err)
		return 2
	}
	problems := configcheck.Errors(configcheck.Check(data))
	for _, p := range problems {
		fmt.Fprintf(stderr, "%s: %v\n", path, p)
	}
	if len(problems) != 0 {
		fmt.Fprintf(stderr, "%s: %d problem(s); the plugin would refuse this configuration\n", path, len(problems))
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}
