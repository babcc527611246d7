package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// Defaults and bounds of the operability keys; docs/configuration.md
// explains each choice.
const (
	// DefaultRuleMetricsTopN is how many distinct rule ids get their own
	// match counter on each VM before the rest share the "other" one.
	DefaultRuleMetricsTopN = 50
	// DefaultRequestJSONMaxDepth is the deepest nesting of objects and
	// arrays let through in a JSON request body.
	DefaultRequestJSONMaxDepth = 64
	// DefaultRequestBodyNoFilesLimit is the largest request body, other
	// than multipart/form-data, let through (ModSecurity's default for
	// SecRequestBodyNoFilesLimit).
	DefaultRequestBodyNoFilesLimit = 1 << 20

	// DefaultHoldHeadersTimeoutMS is how long, with
	// hold_headers_until_inspected, a stream whose headers the plugin
	// holds may wait for its first body callback before the plugin takes
	// it that Envoy delivers none (allow_on_headers_stop_iteration not
	// set) and answers it 500.
	DefaultHoldHeadersTimeoutMS = 3000

	minHoldHeadersTimeoutMS = 100
	maxHoldHeadersTimeoutMS = 600000
	maxRuleMetricsTopN      = 1000
	maxRequestJSONMaxDepth  = 100000
	maxNoFilesLimit         = 1 << 40
	maxDenyBody             = 64 << 10
)

// Statuses of the replies the filter sends for its own body checks.
const (
	statusJSONTooDeep  = 400
	statusBodyTooLarge = 413
)

// operability is the validated form of the logging, metrics and body-check
// keys of Config.
type operability struct {
	jsonLog      bool
	ruleTopN     int
	jsonMaxDepth int
	noFilesLimit int64
	// rawTypes are lower-case media types without parameters.
	rawTypes []string
	// deny maps a rule set name to its custom reply.
	deny map[string]*denyResponse
	// holdHeaders is hold_headers_until_inspected, holdTimeout
	// hold_headers_timeout_ms.
	holdHeaders bool
	holdTimeout time.Duration
}

// denyResponse is one rule set's custom deny reply, built at plugin start so
// that a block only sends precomputed values.
type denyResponse struct {
	// status replaces the rule's status when not 0.
	status  int
	body    []byte
	headers [][2]string
}

// rawDenyResponse mirrors one deny_response entry.
type rawDenyResponse struct {
	Status      *int              `json:"status"`
	Body        *string           `json:"body"`
	ContentType *string           `json:"content_type"`
	Headers     map[string]string `json:"headers"`
}

const denyResponseKeys = "status, body, content_type, headers"

// validateOperability checks the operability keys and fills c.ops.
func (c *Config) validateOperability() error {
	ops := operability{
		jsonLog:      c.JSONLog,
		ruleTopN:     DefaultRuleMetricsTopN,
		jsonMaxDepth: DefaultRequestJSONMaxDepth,
		noFilesLimit: DefaultRequestBodyNoFilesLimit,
		holdHeaders:  c.HoldHeadersUntilInspected,
		holdTimeout:  DefaultHoldHeadersTimeoutMS * time.Millisecond,
	}
	if n := c.HoldHeadersTimeoutMS; n != nil {
		if *n < minHoldHeadersTimeoutMS || *n > maxHoldHeadersTimeoutMS {
			return fmt.Errorf("hold_headers_timeout_ms: got %d, want %d to %d (milliseconds)", *n, minHoldHeadersTimeoutMS, maxHoldHeadersTimeoutMS)
		}
		ops.holdTimeout = time.Duration(*n) * time.Millisecond
	}
	if n := c.RuleMetricsTopN; n != nil {
		if *n < 0 || *n > maxRuleMetricsTopN {
			return fmt.Errorf("rule_metrics_top_n: got %d, want 0 (only the \"other\" counter) to %d", *n, maxRuleMetricsTopN)
		}
		ops.ruleTopN = *n
	}
	if n := c.RequestJSONMaxDepth; n != nil {
		if *n < 0 || *n > maxRequestJSONMaxDepth {
			return fmt.Errorf("request_json_max_depth: got %d, want 0 (off) or 1 to %d", *n, maxRequestJSONMaxDepth)
		}
		ops.jsonMaxDepth = *n
	}
	if n := c.RequestBodyNoFilesLimit; n != nil {
		if *n < 0 || *n > maxNoFilesLimit {
			return fmt.Errorf("request_body_no_files_limit: got %d, want 0 (off) or 1 to %d bytes", *n, int64(maxNoFilesLimit))
		}
		ops.noFilesLimit = *n
	}
	for i, t := range c.RawBodyContentTypes {
		mt := strings.ToLower(strings.TrimSpace(t))
		if !validMediaType(mt) {
			return fmt.Errorf("raw_body_content_types[%d]: got %q, want a media type without parameters, e.g. \"application/octet-stream\"", i, t)
		}
		ops.rawTypes = append(ops.rawTypes, mt)
	}
	deny, err := parseDenyResponses(c.DenyResponse, c)
	if err != nil {
		return err
	}
	ops.deny = deny
	c.ops = ops
	return nil
}

// parseDenyResponses decodes deny_response strictly: every entry must name a
// directives_map rule set.
func parseDenyResponses(raw json.RawMessage, c *Config) (map[string]*denyResponse, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("deny_response: got %s, want an object of rule set names to {%s}", shortJSON(raw), denyResponseKeys)
	}
	out := make(map[string]*denyResponse, len(m))
	for _, name := range sortedKeys(m) {
		path := fmt.Sprintf("deny_response[%q]", name)
		if _, ok := c.DirectivesMap[name]; !ok {
			return nil, fmt.Errorf("%s: names no entry in directives_map; want one of %s", path, c.ruleSetNames())
		}
		var r rawDenyResponse
		if err := jsonstrict.Decode(m[name], &r); err != nil {
			if errors.Is(err, jsonstrict.ErrTrailingData) {
				return nil, fmt.Errorf("%s: unexpected data after the object", path)
			}
			if key, ok := jsonstrict.UnknownKey(err); ok {
				return nil, fmt.Errorf("%s: unknown key %s; valid keys are %s", path, key, denyResponseKeys)
			}
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, fmt.Errorf("%s.%s: got JSON %s, want %s", path, te.Field, te.Value, denyFieldType(te.Field))
			}
			return nil, fmt.Errorf("%s: got %s, want an object with the keys %s", path, shortJSON(m[name]), denyResponseKeys)
		}
		d := &denyResponse{}
		if r.Status != nil {
			if s := *r.Status; s != 0 && (s < 200 || s > 599) {
				return nil, fmt.Errorf("%s.status: got %d, want 0 (the rule's status) or 200 to 599", path, s)
			}
			d.status = *r.Status
		}
		if r.Body != nil {
			if len(*r.Body) > maxDenyBody {
				return nil, fmt.Errorf("%s.body: got %d bytes, want at most %d", path, len(*r.Body), maxDenyBody)
			}
			d.body = []byte(*r.Body)
		}
		if r.ContentType != nil {
			ct := *r.ContentType
			if ct == "" || !httpsyntax.FieldValue(ct) {
				return nil, fmt.Errorf("%s.content_type: got %q, want a media type such as \"application/json\"", path, ct)
			}
			d.headers = append(d.headers, [2]string{"content-type", ct})
		} else if len(d.body) != 0 {
			d.headers = append(d.headers, [2]string{"content-type", "text/plain; charset=utf-8"})
		}
		for _, k := range sortedKeys(r.Headers) {
			v := r.Headers[k]
			lk := strings.ToLower(k)
			switch {
			case !httpsyntax.Token(lk):
				return nil, fmt.Errorf("%s.headers: name %q: want a header name of letters, digits and !#$%%&'*+-.^_`|~", path, k)
			case lk == "content-type":
				return nil, fmt.Errorf("%s.headers[%q]: set the content type with content_type instead", path, k)
			case lk == "content-length" || lk == "transfer-encoding" || lk == "connection":
				return nil, fmt.Errorf("%s.headers[%q]: Envoy sets this header; remove it", path, k)
			case !httpsyntax.FieldValue(v):
				return nil, fmt.Errorf("%s.headers[%q]: value %q: want printable characters without CR or LF", path, k, v)
			}
			d.headers = append(d.headers, [2]string{lk, v})
		}
		out[name] = d
	}
	return out, nil
}

func denyFieldType(field string) string {
	switch field {
	case "status":
		return "an integer status code"
	case "body", "content_type":
		return "a string"
	case "headers":
		return "an object of header names to values"
	}
	return "another type"
}

func shortJSON(raw []byte) string {
	const max = 40
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}

// validMediaType accepts type/subtype made of header token characters.
func validMediaType(s string) bool {
	t, sub, ok := strings.Cut(s, "/")
	return ok && httpsyntax.Token(t) && httpsyntax.Token(sub)
}
