// Package pluginconfig owns the plugin configuration: the one JSON object
// Envoy hands the plugin (PluginConfig.configuration). Parse turns it into
// the parsed parts the packages act on: the filter's keys (filter.Config),
// the admission object (admission.Config) and the memory object
// (admission.MemoryConfig); main.go passes each to its package. Check
// validates a whole configuration natively before it goes live: the same
// keys, and every rule set compiled with Coraza as the plugin would,
// reporting every problem it finds, not only the first, so one run of a CI
// step lists them all. cmd/wafcheck and `wafhost check` are its command
// line (Main).
//
// This package alone decodes the document (document.go): the WAF's keys are
// the fields of filter.Config, which it embeds; the admission and memory
// objects are decoded by their owner, the admission package. The walk from
// a key to where it acts: `admission.max_inflight` is read by Parse
// (through admission.ParseConfig), handed by main.go to admission.New, and
// used by the Guard; `directives_map` is read by Parse into filter.Config,
// handed by main.go to filter.NewPlugin, which compiles each rule set.
package pluginconfig

import (
	"github.com/wafguard/wafguard/admission"
	"github.com/wafguard/wafguard/filter"
)

// Config is a parsed plugin configuration.
type Config struct {
	// Filter holds the WAF's keys (rule sets, logs, metrics, limits).
	Filter *filter.Config
	// Admission is the admission object (in-flight caps, body size).
	Admission admission.Config
	// Memory is the memory object (the VM's heap budget).
	Memory admission.MemoryConfig
}

// Parse decodes and validates the plugin configuration; empty data gives
// the defaults. It decodes the document once (strict: one object, no
// unknown keys), validates the WAF's keys (filter.Config.Validate), then
// hands the admission and memory objects to their parsers. The first
// problem is returned, in the words the plugin logs when it refuses to
// start; rule sets are compiled later (filter.NewPlugin, or Check).
func Parse(data []byte) (*Config, error) {
	doc, err := decode(data)
	if err != nil {
		return nil, err
	}
	if err := doc.Config.Validate(); err != nil {
		return nil, err
	}
	a, err := admission.ParseConfig(doc.Admission)
	if err != nil {
		return nil, err
	}
	m, err := admission.ParseMemoryConfig(doc.Memory)
	if err != nil {
		return nil, err
	}
	doc.Config.Digest = filter.ConfigDigest(data)
	return &Config{Filter: &doc.Config, Admission: a, Memory: m}, nil
}
