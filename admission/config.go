package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// Defaults for the keys of the admission object. docs/admission.md explains
// each choice.
const (
	DefaultMaxInflight          = 0 // off: a cap depends on the upstream and must be chosen
	DefaultRetryAfterSeconds    = 1
	DefaultRetryAfterMaxSeconds = 30
	DefaultTickPeriodMS         = 1000
	DefaultStaleAfterTicks      = 5 // stale_after_ms defaults to 5 × tick_period_ms
	DefaultCASRetries           = 8
	DefaultOnCASExhausted       = "reject"
	DefaultSharedDataKey        = "wafguard.admission.v1"
)

// Bounds on the integer keys.
const (
	maxInflightLimit  = 1 << 30
	maxRetryAfter     = 3600
	minTickPeriodMS   = 10
	maxTickPeriodMS   = 60000
	maxStaleAfterMS   = 3600000
	maxCASRetries     = 1000
	maxBodyBytesLimit = 1 << 62
)

// Config is the validated admission configuration.
type Config struct {
	// MaxInflight caps the streams in flight in the process (all VMs that
	// share SharedDataKey in one vm_id). 0 turns the process cap off.
	MaxInflight int
	// MaxInflightPerVM caps the streams in flight in this VM (one Envoy
	// worker), counted locally. 0 turns it off.
	MaxInflightPerVM int
	// RetryAfterSeconds is the base Retry-After of a 429.
	RetryAfterSeconds int
	// RetryAfterMaxSeconds caps the base after it grows with the overload.
	RetryAfterMaxSeconds int
	// MaxRequestBodyBytes is the largest request body let through; 0 is off.
	MaxRequestBodyBytes int64
	// PerAuthority caps the streams in flight per :authority (lower case).
	PerAuthority map[string]AuthorityConfig
	// TickPeriodMS is the heartbeat and repair period.
	TickPeriodMS int
	// StaleAfterMS is how old a member's heartbeat may get before another
	// member takes its slots back.
	StaleAfterMS int
	// CASRetries bounds the retries after a CAS conflict in one operation.
	CASRetries int
	// FailOpen admits a stream when the CAS retries run out (on_cas_exhausted
	// "admit"); the default rejects it with 429.
	FailOpen bool
	// SharedDataKey is the shared-data key holding the counts.
	SharedDataKey string
	// RejectBody is the body of a 429; nil gives the default text.
	RejectBody []byte
	// RejectContentType is the content-type of a 429; "" gives
	// DefaultRejectContentType.
	RejectContentType string
	// RejectHeaders are extra 429 headers, with lower-case names, sorted.
	RejectHeaders [][2]string
}

// DefaultRejectContentType is the content-type of the default 429 body.
const DefaultRejectContentType = "text/plain; charset=utf-8"

// maxRejectBody bounds reject_body, which every VM keeps in memory.
const maxRejectBody = 64 << 10

// AuthorityConfig is one entry of per_authority.
type AuthorityConfig struct {
	MaxInflight int
}

// capOn reports whether any in-flight cap is configured.
func (c *Config) capOn() bool { return c.MaxInflight > 0 || len(c.PerAuthority) > 0 }

// rawConfig mirrors the JSON object; each field is parsed by hand so that
// the error names the key and shows the offending JSON value.
type rawConfig struct {
	MaxInflight          json.RawMessage `json:"max_inflight"`
	MaxInflightPerVM     json.RawMessage `json:"max_inflight_per_vm"`
	RetryAfterSeconds    json.RawMessage `json:"retry_after_seconds"`
	RetryAfterMaxSeconds json.RawMessage `json:"retry_after_max_seconds"`
	MaxRequestBodyBytes  json.RawMessage `json:"max_request_body_bytes"`
	PerAuthority         json.RawMessage `json:"per_authority"`
	TickPeriodMS         json.RawMessage `json:"tick_period_ms"`
	StaleAfterMS         json.RawMessage `json:"stale_after_ms"`
	CASRetries           json.RawMessage `json:"cas_retries"`
	OnCASExhausted       json.RawMessage `json:"on_cas_exhausted"`
	SharedDataKey        json.RawMessage `json:"shared_data_key"`
	RejectBody           json.RawMessage `json:"reject_body"`
	RejectContentType    json.RawMessage `json:"reject_content_type"`
	RejectHeaders        json.RawMessage `json:"reject_headers"`
}

const rawConfigKeys = "max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers"

type rawAuthority struct {
	MaxInflight json.RawMessage `json:"max_inflight"`
}

// ParseConfig decodes and validates the plugin configuration's admission
// object. A nil or empty raw gives the defaults (admission off).
func ParseConfig(raw json.RawMessage) (Config, error) {
	c := Config{
		MaxInflight:          DefaultMaxInflight,
		RetryAfterSeconds:    DefaultRetryAfterSeconds,
		RetryAfterMaxSeconds: DefaultRetryAfterMaxSeconds,
		TickPeriodMS:         DefaultTickPeriodMS,
		CASRetries:           DefaultCASRetries,
		SharedDataKey:        DefaultSharedDataKey,
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		c.StaleAfterMS = DefaultStaleAfterTicks * c.TickPeriodMS
		return c, nil
	}
	var r rawConfig
	if err := jsonstrict.Decode(raw, &r); err != nil {
		return Config{}, objectError("admission", raw, rawConfigKeys, err)
	}

	var err error
	if c.MaxInflight, err = intField("admission.max_inflight", r.MaxInflight, c.MaxInflight, 0, maxInflightLimit,
		"0 (off) or a positive integer"); err != nil {
		return Config{}, err
	}
	if c.RetryAfterSeconds, err = intField("admission.retry_after_seconds", r.RetryAfterSeconds, c.RetryAfterSeconds, 1, maxRetryAfter,
		"a positive integer (seconds)"); err != nil {
		return Config{}, err
	}
	if r.RetryAfterMaxSeconds == nil && c.RetryAfterMaxSeconds < c.RetryAfterSeconds {
		c.RetryAfterMaxSeconds = c.RetryAfterSeconds
	}
	if c.RetryAfterMaxSeconds, err = intField("admission.retry_after_max_seconds", r.RetryAfterMaxSeconds, c.RetryAfterMaxSeconds,
		c.RetryAfterSeconds, maxRetryAfter,
		fmt.Sprintf("an integer (seconds) from retry_after_seconds (%d) to %d", c.RetryAfterSeconds, maxRetryAfter)); err != nil {
		return Config{}, err
	}
	if c.MaxInflightPerVM, err = intField("admission.max_inflight_per_vm", r.MaxInflightPerVM, 0, 0, maxInflightLimit,
		"0 (off) or a positive integer (streams in flight in one VM)"); err != nil {
		return Config{}, err
	}
	body, err := intField("admission.max_request_body_bytes", r.MaxRequestBodyBytes, 0, 0, maxBodyBytesLimit,
		"0 (off) or a positive integer (bytes)")
	if err != nil {
		return Config{}, err
	}
	c.MaxRequestBodyBytes = int64(body)
	if c.TickPeriodMS, err = intField("admission.tick_period_ms", r.TickPeriodMS, c.TickPeriodMS, minTickPeriodMS, maxTickPeriodMS,
		fmt.Sprintf("an integer (milliseconds) from %d to %d", minTickPeriodMS, maxTickPeriodMS)); err != nil {
		return Config{}, err
	}
	minStale := 2 * c.TickPeriodMS
	if c.StaleAfterMS, err = intField("admission.stale_after_ms", r.StaleAfterMS, DefaultStaleAfterTicks*c.TickPeriodMS, minStale, maxStaleAfterMS,
		fmt.Sprintf("an integer (milliseconds) from %d (2 × tick_period_ms) to %d", minStale, maxStaleAfterMS)); err != nil {
		return Config{}, err
	}
	if c.CASRetries, err = intField("admission.cas_retries", r.CASRetries, c.CASRetries, 0, maxCASRetries,
		fmt.Sprintf("an integer from 0 to %d", maxCASRetries)); err != nil {
		return Config{}, err
	}
	mode, err := stringField("admission.on_cas_exhausted", r.OnCASExhausted, DefaultOnCASExhausted)
	if err == nil && mode != "reject" && mode != "admit" {
		err = fmt.Errorf("admission.on_cas_exhausted: got %q, want \"reject\" or \"admit\"", mode)
	}
	if err != nil {
		return Config{}, err
	}
	c.FailOpen = mode == "admit"
	if c.SharedDataKey, err = stringField("admission.shared_data_key", r.SharedDataKey, c.SharedDataKey); err != nil {
		return Config{}, err
	}
	if c.SharedDataKey == "" {
		return Config{}, errors.New(`admission.shared_data_key: got "", want a non-empty string`)
	}
	if c.PerAuthority, err = parsePerAuthority(r.PerAuthority); err != nil {
		return Config{}, err
	}
	if err := parseReject(&c, &r); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseReject reads the keys that shape the 429.
func parseReject(c *Config, r *rawConfig) error {
	if r.RejectBody != nil {
		body, err := stringField("admission.reject_body", r.RejectBody, "")
		if err != nil {
			return err
		}
		if len(body) > maxRejectBody {
			return fmt.Errorf("admission.reject_body: got %d bytes, want at most %d", len(body), maxRejectBody)
		}
		c.RejectBody = []byte(body)
	}
	ct, err := stringField("admission.reject_content_type", r.RejectContentType, "")
	if err != nil {
		return err
	}
	if r.RejectContentType != nil && (ct == "" || !httpsyntax.FieldValue(ct)) {
		return fmt.Errorf("admission.reject_content_type: got %q, want a media type such as \"application/json\"", ct)
	}
	c.RejectContentType = ct
	if r.RejectHeaders == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := jsonstrict.Decode(r.RejectHeaders, &m); err != nil || m == nil {
		return fmt.Errorf("admission.reject_headers: got %s, want an object of header names to string values", short(r.RejectHeaders))
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		path := fmt.Sprintf("admission.reject_headers[%q]", k)
		v, err := stringField(path, m[k], "")
		if err != nil {
			return err
		}
		lk := strings.ToLower(k)
		switch {
		case !httpsyntax.Token(lk):
			return fmt.Errorf("admission.reject_headers: name %q: want a header name of letters, digits and !#$%%&'*+-.^_`|~", k)
		case lk == "retry-after" || lk == "content-type":
			return fmt.Errorf("%s: the guard sets this header (use reject_content_type for the type); remove it", path)
		case lk == "content-length" || lk == "transfer-encoding" || lk == "connection":
			return fmt.Errorf("%s: Envoy sets this header; remove it", path)
		case !httpsyntax.FieldValue(v):
			return fmt.Errorf("%s: value %q: want printable characters without CR or LF", path, v)
		}
		c.RejectHeaders = append(c.RejectHeaders, [2]string{lk, v})
	}
	return nil
}

func parsePerAuthority(raw json.RawMessage) (map[string]AuthorityConfig, error) {
	if raw == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := jsonstrict.Decode(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("admission.per_authority: got %s, want an object mapping an authority to {\"max_inflight\": N}", short(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]AuthorityConfig, len(m))
	for _, k := range keys {
		path := fmt.Sprintf("admission.per_authority[%q]", k)
		// The same reading of :authority as the rule-set choice
		// (httpsyntax.AuthorityHost), with the port kept.
		name := httpsyntax.AuthorityWithPort(k)
		if name == "" {
			return nil, errors.New(`admission.per_authority: got key "", want an authority such as "example.com" or "example.com:8080"`)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: got a second entry for %q (authorities are compared in lower case), want one entry per authority", path, name)
		}
		var ra rawAuthority
		if err := jsonstrict.Decode(m[k], &ra); err != nil {
			return nil, objectError(path, m[k], "max_inflight", err)
		}
		if ra.MaxInflight == nil {
			return nil, fmt.Errorf("%s.max_inflight: missing, want a positive integer", path)
		}
		n, err := intField(path+".max_inflight", ra.MaxInflight, 0, 1, maxInflightLimit, "a positive integer")
		if err != nil {
			return nil, err
		}
		out[name] = AuthorityConfig{MaxInflight: n}
	}
	return out, nil
}

// objectError turns a decoding error of an object into a message that names
// the path, with the list of valid keys for an unknown one.
func objectError(path string, raw []byte, keys string, err error) error {
	if name, ok := jsonstrict.UnknownKey(err); ok {
		return fmt.Errorf("%s: unknown key %s, want one of %s", path, name, keys)
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) && ute.Field == "" {
		return fmt.Errorf("%s: got %s, want an object", path, short(raw))
	}
	return fmt.Errorf("%s: invalid JSON: %w", path, err)
}

// intField parses an integer-valued key. A missing key gives def.
func intField(path string, raw json.RawMessage, def, lo, hi int, want string) (int, error) {
	if raw == nil {
		return def, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, fmt.Errorf("%s: got %s, want %s", path, short(raw), want)
	}
	return int(n), nil
}

// stringField parses a string-valued key. A missing key gives def.
func stringField(path string, raw json.RawMessage, def string) (string, error) {
	if raw == nil {
		return def, nil
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s: got %s, want a string", path, short(raw))
	}
	return s, nil
}

// short returns the JSON text of a value for an error message, cut to a
// readable length.
func short(raw []byte) string {
	const max = 40
	if len(raw) > max {
		return string(raw[:max]) + "..."
	}
	return string(raw)
}
