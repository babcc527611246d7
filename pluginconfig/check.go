package pluginconfig

import (
	"encoding/json"
	"errors"

	"github.com/wafguard/wafguard/admission"
)

// lenient reads the parts that can still be checked when the configuration
// as a whole is refused (an unknown key, a bad cross reference).
type lenient struct {
	DirectivesMap map[string][]string `json:"directives_map"`
	Admission     json.RawMessage     `json:"admission"`
	Memory        json.RawMessage     `json:"memory"`
}

// Check parses the plugin configuration data and compiles every rule set. It
// returns nil when the plugin would start with it, else one error per
// problem, joined with errors.Join: the first error in the document or the
// WAF's keys (the same text as the plugin's critical log line), then one
// per rule set that does not compile, in name order, then the admission
// error, then the memory error. Each message names the key or the rule set.
//
// Data that is not a JSON object gives only the decoding error.
func Check(data []byte) error {
	var errs []error
	doc, err := decode(data)
	if err == nil {
		err = doc.Config.Validate()
	}
	if err != nil {
		errs = append(errs, err)
		// Keep checking what can still be read: a lenient decode of
		// the rule sets (compiled with the preselection, the default)
		// and the two objects.
		var l lenient
		if json.Unmarshal(data, &l) != nil {
			return errors.Join(errs...)
		}
		doc = &document{Admission: l.Admission, Memory: l.Memory}
		doc.DirectivesMap = l.DirectivesMap
	}
	errs = append(errs, doc.CheckRuleSets()...)
	if _, err := admission.ParseConfig(doc.Admission); err != nil {
		errs = append(errs, err)
	}
	if _, err := admission.ParseMemoryConfig(doc.Memory); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Notes returns what an operator must set outside the plugin
// configuration for it to work as configured, one line each: with
// hold_headers_until_inspected, Envoy's allow_on_headers_stop_iteration.
// A configuration that does not decode has none.
func Notes(data []byte) []string {
	doc, err := decode(data)
	if err != nil {
		return nil
	}
	var notes []string
	if doc.HoldHeadersUntilInspected {
		notes = append(notes, "hold_headers_until_inspected is true: set allow_on_headers_stop_iteration: true in the wasm filter's plugin config "+
			"(envoy.extensions.wasm.v3.PluginConfig, Envoy 1.35+; an Istio WasmPlugin cannot set it). "+
			"Without it Envoy delivers no body while the plugin holds the headers, and the plugin answers those requests 500 after hold_headers_timeout_ms")
	}
	return notes
}

// Errors splits an error returned by Check into its problems, one per line
// of output.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
