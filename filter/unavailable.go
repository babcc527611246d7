package filter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// What a proxy-wasm VM cannot do is refused when a rule set compiles, with
// an error that names it and what to use instead, rather than compiled
// into something that silently does nothing.
//
// The plugin is built with Coraza's configuration for WebAssembly (the
// tinygo build tag, magefile.go): Coraza then leaves out the audit log
// writers that need files, sockets or HTTPS, the OCSF audit log format,
// and the operators that need DNS, processes or a schema file, and
// installs stand-ins for them (a writer that drops every entry, a
// formatter that writes nothing, operators that always match). The plugin
// replaces each stand-in with a refusal, natively too, so that the tests
// see what the VM does.

// unavailableOperators are the operators a VM cannot run, with why.
var unavailableOperators = map[string]string{
	"rbl":            "a proxy-wasm VM cannot resolve DNS names",
	"inspectFile":    "a proxy-wasm VM cannot run programs",
	"validateSchema": "a proxy-wasm VM has no file system to read the schema from",
}

// unavailableWriters are the SecAuditLogType values a VM cannot write to,
// with why.
var unavailableWriters = map[string]string{
	"concurrent": "a proxy-wasm VM has no file system",
	"https":      "a proxy-wasm VM cannot open connections",
	"syslog":     "a proxy-wasm VM cannot open sockets",
}

func init() {
	// Registration only fills Coraza's registries (no host call).
	for name, why := range unavailableOperators {
		err := fmt.Errorf("@%s is not available in the plugin: %s; remove the rule or use another operator", name, why)
		plugins.RegisterOperator(name, func(plugintypes.OperatorOptions) (plugintypes.Operator, error) { return nil, err })
	}
	for name, why := range unavailableWriters {
		err := fmt.Errorf("SecAuditLogType %s is not available in the plugin: %s; use SecAuditLogType %s (the proxy log) or Serial with SecAuditLog /dev/stdout",
			name, why, auditWriterName)
		plugins.RegisterAuditLogWriter(name, func() plugintypes.AuditLogWriter { return refusedWriter{err} })
	}
}

// refusedWriter is an audit log writer whose Init fails: Coraza then
// refuses the rule set.
type refusedWriter struct{ err error }

func (w refusedWriter) Init(plugintypes.AuditLogConfig) error { return w.err }
func (w refusedWriter) Write(plugintypes.AuditLog) error      { return w.err }
func (refusedWriter) Close() error                            { return nil }

// errOCSF is the error for a rule set that asks for the OCSF audit log
// format.
var errOCSF = errors.New("SecAuditLogFormat OCSF is not available in the plugin; use JSON or Native")

// unavailableDirective returns the error for a directive of the rule set
// that asks for what the plugin does not have, nil when none does. Only
// the OCSF audit log format is refused this way: an audit log formatter
// cannot refuse at compile time.
func unavailableDirective(directives string) error {
	if !strings.Contains(strings.ToLower(directives), "ocsf") {
		return nil
	}
	directives = strings.ReplaceAll(directives, "\\\n", " ")
	for line := range strings.Lines(directives) {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "SecAuditLogFormat") && strings.EqualFold(strings.Trim(f[1], `"'`), "ocsf") {
			return errOCSF
		}
	}
	return nil
}
