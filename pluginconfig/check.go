// Package configcheck validates a whole plugin configuration natively, before
// it goes live: the filter's keys, every rule set (each compiled with Coraza
// as the plugin would) and the admission object. It reports every problem it
// finds, not only the first, so one run of a CI step lists them all.
//
// cmd/wafcheck is its command line.
package pluginconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"

	"github.com/wafguard/wafguard/admission"
	"github.com/wafguard/wafguard/filter"
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
// problem, joined with errors.Join: the first error in the filter's own keys
// (the same text as the plugin's critical log line), then one per rule set
// that does not compile, in name order, then the admission error, then the memory error. Each
// message names the key or the rule set.
//
// Data that is not a JSON object gives only the decoding error.
func Check(data []byte) error {
	var errs []error
	var sets map[string][]string
	var adm, mem json.RawMessage
	cfg, err := filter.ParseConfig(data)
	if err == nil {
		sets, adm, mem = cfg.DirectivesMap, cfg.Admission, cfg.Memory
	} else {
		errs = append(errs, err)
		var l lenient
		if json.Unmarshal(data, &l) != nil {
			return errors.Join(errs...)
		}
		sets, adm, mem = l.DirectivesMap, l.Admission, l.Memory
	}
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := filter.CheckRuleSet(name, sets[name]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(bytes.TrimSpace(adm)) != 0 {
		if _, err := admission.ParseConfig(adm); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := admission.ParseMemoryConfig(mem); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
