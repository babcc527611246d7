package filter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wafguard/wafguard/internal/httpsyntax"
)

// Config holds the WAF's keys of the plugin configuration document, which
// pluginconfig decodes (the document also holds the admission and memory
// objects). Its keys are a superset of coraza-proxy-wasm's, so
// configurations written for it load unchanged. The json tags are the key
// names.
type Config struct {
	// Digest names the configuration a plugin runs: the first 12 hex
	// digits of the sha256 of its JSON text, which pluginconfig.Parse
	// sets (ConfigDigest). It is not read from the JSON. The start log
	// line and the waf_filter.config_info gauge carry it.
	Digest string `json:"-"`
	// DirectivesMap names rule sets; each is a list of SecLang lines.
	DirectivesMap map[string][]string `json:"directives_map"`
	// DefaultDirectives names the rule set for authorities that
	// PerAuthorityDirectives does not list.
	DefaultDirectives string `json:"default_directives"`
	// PerAuthorityDirectives maps a request authority (host, without port,
	// lower case) to a rule set name.
	PerAuthorityDirectives map[string]string `json:"per_authority_directives"`
	// PerRouteDirectives maps the name of an Envoy route (its `name`,
	// which the xds.route_name property reads per stream) to a rule set
	// name. A stream on a listed route takes that rule set whatever its
	// authority; otherwise PerAuthorityDirectives, then
	// DefaultDirectives decide.
	PerRouteDirectives map[string]string `json:"per_route_directives"`
	// MetricLabels are appended to every metric name as _key=value pairs,
	// in key order.
	MetricLabels map[string]string `json:"metric_labels"`
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
	// HoldHeadersUntilInspected pauses the request headers of a request
	// whose body the WAF reads, and the response headers of a response
	// whose body it reads, until the body's phase has decided: the
	// upstream sees nothing of a request the WAF blocks, and a response
	// blocked in phase 4 is answered with the block reply instead of a
	// reset. It needs allow_on_headers_stop_iteration: true in Envoy's
	// wasm PluginConfig (Envoy 1.35+); see hold.go.
	HoldHeadersUntilInspected bool `json:"hold_headers_until_inspected"`
	// HoldHeadersTimeoutMS bounds, until Envoy has shown that it delivers
	// bodies while headers are held, how long a stream may wait for its
	// first body callback; nil gives DefaultHoldHeadersTimeoutMS.
	HoldHeadersTimeoutMS *int `json:"hold_headers_timeout_ms"`

	// ops is the validated form of the keys above, built by Validate.
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

// Validate fills in the defaults of absent keys and checks the keys: the
// cross references between rule set names, the metric labels and the
// operability keys. With no directives_map, default_directives and
// per_authority_directives, the rule set "default" holds the whole CRS in
// blocking mode. Rule sets are compiled later, by NewPlugin (or checked one
// by one with CheckRuleSets). pluginconfig.Parse calls it on the decoded
// document; NewPlugin calls it again, so a Config built by hand is held to
// the same rules with the same messages.
func (c *Config) Validate() error {
	if c.DirectivesMap == nil && c.DefaultDirectives == "" && len(c.PerAuthorityDirectives) == 0 {
		c.DirectivesMap = map[string][]string{defaultRuleSetName: defaultDirectives}
		c.DefaultDirectives = defaultRuleSetName
	}
	return c.validate()
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
	for _, route := range sortedKeys(c.PerRouteDirectives) {
		name := c.PerRouteDirectives[route]
		if route == "" {
			return errors.New(`per_route_directives: empty route name; give the name of an Envoy route (its "name" in the route configuration)`)
		}
		if _, ok := c.DirectivesMap[name]; !ok {
			return fmt.Errorf("per_route_directives[%q]: %q names no entry in directives_map; want one of %s", route, name, names)
		}
	}
	for _, key := range sortedKeys(c.MetricLabels) {
		value := c.MetricLabels[key]
		if !validLabelKey(key) {
			return fmt.Errorf("metric_labels: key %q: want 1 to 32 lower-case letters and digits, starting with a letter, other than \"ruleid\", \"phase\", \"crs\" and \"config\"", key)
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
	if k == "" || len(k) > 32 || k == "ruleid" || k == "phase" || k == "crs" || k == "config" || !('a' <= k[0] && k[0] <= 'z') {
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

// ConfigDigest is Config.Digest for a configuration's JSON text data.
func ConfigDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}
