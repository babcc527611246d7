package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// Config is the plugin configuration. Its JSON shape is a superset of
// coraza-proxy-wasm's, so configurations written for it load unchanged.
type Config struct {
	// DirectivesMap names rule sets; each is a list of SecLang lines.
	DirectivesMap map[string][]string `json:"directives_map"`
	// DefaultDirectives names the rule set for authorities that
	// PerAuthorityDirectives does not list.
	DefaultDirectives string `json:"default_directives"`
	// PerAuthorityDirectives maps a request authority (host, without port,
	// lower case) to a rule set name.
	PerAuthorityDirectives map[string]string `json:"per_authority_directives"`
	// MetricLabels are appended to every metric name as _key=value pairs,
	// in key order.
	MetricLabels map[string]string `json:"metric_labels"`
	// Admission is the admission guard's configuration, left undecoded for
	// the admission package; nil when the key is absent.
	Admission json.RawMessage `json:"admission"`
	// Memory is the VM heap budget and the memory side of admission,
	// left undecoded for the admission package (ParseMemoryConfig); nil
	// when the key is absent, which gives the defaults.
	Memory json.RawMessage `json:"memory"`

	// JSONLog adds one JSON line per transaction to the proxy log.
	JSONLog bool `json:"json_log"`
	// RuleMetricsTopN bounds the per-rule match counters; nil gives
	// DefaultRuleMetricsTopN.
	RuleMetricsTopN *int `json:"rule_metrics_top_n"`
	// DenyResponse holds a custom deny reply per rule set, decoded by
	// parseDenyResponses into denyResponses.
	DenyResponse json.RawMessage `json:"deny_response"`
	// RequestJSONMaxDepth bounds the nesting of JSON request bodies; nil
	// gives DefaultRequestJSONMaxDepth, 0 turns the check off.
	RequestJSONMaxDepth *int `json:"request_json_max_depth"`
	// RequestBodyNoFilesLimit bounds request bodies that are not
	// multipart/form-data; nil gives DefaultRequestBodyNoFilesLimit, 0
	// turns the limit off.
	RequestBodyNoFilesLimit *int64 `json:"request_body_no_files_limit"`
	// RawBodyContentTypes lists media types whose request bodies Coraza
	// keeps as raw bytes (REQUEST_BODY) instead of parsing them into ARGS.
	RawBodyContentTypes []string `json:"raw_body_content_types"`
	// RulePreselection removes, per transaction and phase, the rules that
	// cannot match before Coraza evaluates the rest (filter/preselect);
	// nil gives true, false evaluates every rule.
	RulePreselection *bool `json:"rule_preselection"`

	// ops is the validated form of the keys above, built by validate.
	ops operability
}

// defaultRuleSetName is the name of the rule set used when the
// configuration names none.
const defaultRuleSetName = "default"

// defaultDirectives is the rule set used when the configuration has no
// directives_map: Coraza's recommended settings with blocking on, and the
// whole CRS.
var defaultDirectives = []string{
	"Include @recommended-conf",
	"SecRuleEngine On",
	"Include @crs-setup-conf",
	"Include @owasp_crs/*.conf",
}

// configKeys lists the top-level keys, for error messages.
const configKeys = "directives_map, default_directives, per_authority_directives, metric_labels, admission, memory, " +
	"json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection"

// ParseConfig decodes and validates the plugin configuration. Empty data (or
// only whitespace) gives the defaults: the rule set "default" with the whole
// CRS in blocking mode. Rule sets are compiled later, by NewPlugin or Check.
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{}
	if len(bytes.TrimSpace(data)) != 0 {
		if err := decodeStrict(data, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.DirectivesMap == nil && cfg.DefaultDirectives == "" && len(cfg.PerAuthorityDirectives) == 0 {
		cfg.DirectivesMap = map[string][]string{defaultRuleSetName: defaultDirectives}
		cfg.DefaultDirectives = defaultRuleSetName
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeStrict decodes one JSON object into cfg, refusing unknown keys and
// trailing data.
func decodeStrict(data []byte, cfg *Config) error {
	err := jsonstrict.Decode(data, cfg)
	switch {
	case errors.Is(err, jsonstrict.ErrTrailingData):
		return errors.New("plugin configuration: unexpected data after the JSON object; give exactly one object")
	case err != nil:
		return describeJSONError(data, err)
	}
	return nil
}

// describeJSONError turns encoding/json errors into messages that locate the
// problem and say what is valid.
func describeJSONError(data []byte, err error) error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("plugin configuration: invalid JSON at byte offset %d: %w", syntaxErr.Offset, err)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return fmt.Errorf("plugin configuration: got JSON %s, want an object with the keys %s: %w", typeErr.Value, configKeys, err)
		}
		return fmt.Errorf("%s: got JSON %s, want %s: %w", field, typeErr.Value, describeType(field), err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("plugin configuration: truncated JSON (%d bytes): %w", len(data), err)
	}
	if name, ok := jsonstrict.UnknownKey(err); ok {
		return fmt.Errorf("plugin configuration: unknown key %s; valid keys are %s", name, configKeys)
	}
	return fmt.Errorf("plugin configuration: %w", err)
}

// describeType says what a key holds, for type errors.
func describeType(field string) string {
	key, _, _ := strings.Cut(field, ".")
	switch key {
	case "directives_map":
		return `an object of rule set names to lists of SecLang lines, e.g. {"crs": ["Include @owasp_crs/*.conf"]}`
	case "default_directives":
		return "a string naming a directives_map entry"
	case "per_authority_directives":
		return "an object of authorities to directives_map names"
	case "metric_labels":
		return "an object of strings to strings"
	case "json_log", "rule_preselection":
		return "true or false"
	case "rule_metrics_top_n", "request_json_max_depth", "request_body_no_files_limit":
		return "a non-negative integer"
	case "raw_body_content_types":
		return `a list of media types, e.g. ["application/octet-stream"]`
	case "deny_response":
		return `an object of rule set names to {"status", "body", "content_type", "headers"}`
	}
	return "another type"
}

// validate checks the cross references between keys and the metric labels.
func (c *Config) validate() error {
	if len(c.DirectivesMap) == 0 {
		return errors.New(`directives_map: empty; add at least one rule set, e.g. {"crs": ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]}, or remove directives_map, default_directives and per_authority_directives to use that set`)
	}
	names := c.ruleSetNames()
	for _, name := range sortedKeys(c.DirectivesMap) {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("directives_map: empty rule set name %q; name each rule set, e.g. \"crs\"", name)
		}
	}
	if c.DefaultDirectives == "" {
		return fmt.Errorf("default_directives: missing; want one of %s (the rule set for authorities not in per_authority_directives)", names)
	}
	if _, ok := c.DirectivesMap[c.DefaultDirectives]; !ok {
		return fmt.Errorf("default_directives: %q names no entry in directives_map; want one of %s", c.DefaultDirectives, names)
	}
	seen := make(map[string]string, len(c.PerAuthorityDirectives))
	for _, authority := range sortedKeys(c.PerAuthorityDirectives) {
		name := c.PerAuthorityDirectives[authority]
		host := httpsyntax.AuthorityHost(authority)
		if host == "" {
			return fmt.Errorf("per_authority_directives: empty authority %q; give a host name such as \"example.com\"", authority)
		}
		if _, ok := c.DirectivesMap[name]; !ok {
			return fmt.Errorf("per_authority_directives[%q]: %q names no entry in directives_map; want one of %s", authority, name, names)
		}
		if other, dup := seen[host]; dup {
			return fmt.Errorf("per_authority_directives[%q]: same host %q as %q (ports and case are ignored); keep one of them", authority, host, other)
		}
		seen[host] = authority
	}
	for _, key := range sortedKeys(c.MetricLabels) {
		value := c.MetricLabels[key]
		if !validLabelKey(key) {
			return fmt.Errorf("metric_labels: key %q: want 1 to 32 lower-case letters and digits, starting with a letter, other than \"ruleid\" and \"phase\"", key)
		}
		if !validLabelValue(value) {
			return fmt.Errorf("metric_labels[%q]: value %q: want 1 to 64 letters, digits, '.' or '-' (no '_', which separates labels)", key, value)
		}
	}
	return c.validateOperability()
}

// sortedKeys returns the keys of m in order, so that errors and metric names
// do not depend on map iteration order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ruleSetNames lists the directives_map names, quoted and sorted.
func (c *Config) ruleSetNames() string {
	names := make([]string, 0, len(c.DirectivesMap))
	for name := range c.DirectivesMap {
		names = append(names, fmt.Sprintf("%q", name))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func validLabelKey(k string) bool {
	if k == "" || len(k) > 32 || k == "ruleid" || k == "phase" || !('a' <= k[0] && k[0] <= 'z') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func validLabelValue(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
