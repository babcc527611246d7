package pluginconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// document is the JSON shape of the plugin configuration: one object whose
// keys are the WAF's (filter.Config, embedded so that its keys sit at the
// top level) plus the admission and memory objects, kept undecoded for
// their owner, the admission package.
type document struct {
	filter.Config
	Admission json.RawMessage `json:"admission"`
	Memory    json.RawMessage `json:"memory"`
}

// keys lists the top-level keys, for error messages.
const keys = "directives_map, default_directives, per_authority_directives, per_route_directives, metric_labels, admission, memory, " +
	"json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection, " +
	"hold_headers_until_inspected, hold_headers_timeout_ms"

// decode decodes the document strictly: one object, no unknown keys,
// nothing after it. Empty data (or only whitespace) is the empty document.
// Errors locate the problem and say what is valid.
func decode(data []byte) (*document, error) {
	doc := &document{}
	if len(bytes.TrimSpace(data)) == 0 {
		return doc, nil
	}
	err := jsonstrict.Decode(data, doc)
	switch {
	case err == nil:
		return doc, nil
	case errors.Is(err, jsonstrict.ErrTrailingData):
		return nil, errors.New("plugin configuration: unexpected data after the JSON object; give exactly one object")
	}
	return nil, describeJSONError(data, err)
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
		typeErr = asDeclared(typeErr)
		field := typeErr.Field
		if field == "" {
			return fmt.Errorf("plugin configuration: got JSON %s, want an object with the keys %s", typeErr.Value, keys)
		}
		return fmt.Errorf("%s: got JSON %s, want %s: %w", field, typeErr.Value, describeType(field), typeErr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("plugin configuration: truncated JSON (%d bytes): %w", len(data), err)
	}
	if name, ok := jsonstrict.UnknownKey(err); ok {
		return fmt.Errorf("plugin configuration: unknown key %s; valid keys are %s", name, keys)
	}
	return fmt.Errorf("plugin configuration: %w", err)
}

// embedded is the Go name encoding/json puts in front of the WAF's keys,
// which document embeds.
var embedded = reflect.TypeFor[filter.Config]().Name()

// asDeclared names a type error's field as the struct that declares it
// does: encoding/json reports a key of the embedded filter.Config as
// "document.Config.directives_map", and the user wrote "directives_map",
// which is a field of Config.
func asDeclared(e *json.UnmarshalTypeError) *json.UnmarshalTypeError {
	field, ok := strings.CutPrefix(e.Field, embedded+".")
	if !ok {
		return e
	}
	c := *e
	c.Struct, c.Field = embedded, field
	return &c
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
	case "per_route_directives":
		return "an object of Envoy route names to directives_map names"
	case "metric_labels":
		return "an object of strings to strings"
	case "json_log", "rule_preselection", "hold_headers_until_inspected":
		return "true or false"
	case "rule_metrics_top_n", "request_json_max_depth", "request_body_no_files_limit":
		return "a non-negative integer"
	case "hold_headers_timeout_ms":
		return "an integer number of milliseconds"
	case "raw_body_content_types":
		return `a list of media types, e.g. ["application/octet-stream"]`
	case "deny_response":
		return `an object of rule set names to {"status", "body", "content_type", "headers"}`
	}
	return "another type"
}
