package pluginconfig

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/filter/rules"
)

// Main is the command line of the check, shared by cmd/wafcheck and any
// command that offers it as a subcommand: name is how usage messages call
// it, args are the arguments after it. It reads the configuration from
// --config FILE (or a lone FILE argument; "-" is standard input), prints
// each problem of Check on its own line to stderr, prefixed with the file
// name, and returns the exit status: 0 when the plugin would start, 1 when
// there are problems, 2 for usage and read errors. A configuration that
// starts may come with notes (Notes), printed to stdout before "ok".
func Main(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
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
		fmt.Fprintf(stderr, "usage: %s --config FILE (or %s FILE, or - for standard input)\n", name, name)
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
		fmt.Fprintf(stderr, "%s: reading the configuration: %v\n", name, err)
		return 2
	}
	problems := Errors(Check(data))
	for _, p := range problems {
		fmt.Fprintf(stderr, "%s: %v\n", path, p)
	}
	if len(problems) != 0 {
		fmt.Fprintf(stderr, "%s: %d problem(s); the plugin would refuse this configuration (checked against OWASP CRS %s)\n", path, len(problems), rules.CRSVersion)
		return 1
	}
	for _, n := range Notes(data) {
		fmt.Fprintf(stdout, "%s: note: %s\n", path, n)
	}
	fmt.Fprintf(stdout, "%s: ok (checked against OWASP CRS %s); configuration %s, as the plugin's start line and waf_filter.config_info name it\n", path, rules.CRSVersion, filter.ConfigDigest(data))
	return 0
}
