package admission

import (
	"reflect"
	"testing"
)

func TestParseConfig_defaults(t *testing.T) {
	for _, raw := range []string{"", "null", "{}", " { } "} {
		c, err := ParseConfig([]byte(raw))
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", raw, err)
		}
		want := Config{
			MaxInflight: 0, RetryAfterSeconds: 1, RetryAfterMaxSeconds: 30, TickPeriodMS: 1000, StaleAfterMS: 5000,
			CASRetries: 8, SharedDataKey: "wafguard.admission.v1",
		}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("ParseConfig(%q) = %+v, want %+v", raw, c, want)
		}
	}
}

func TestParseConfig_valid(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Config
	}{
		{
			name: "all keys",
			raw: `{"max_inflight": 256, "retry_after_seconds": 2, "retry_after_max_seconds": 20,
				"max_request_body_bytes": 1048576, "per_authority": {"API.example.com": {"max_inflight": 10}},
				"tick_period_ms": 500, "stale_after_ms": 1000, "cas_retries": 0, "on_cas_exhausted": "admit",
				"shared_data_key": "k"}`,
			want: Config{
				MaxInflight: 256, RetryAfterSeconds: 2, RetryAfterMaxSeconds: 20, MaxRequestBodyBytes: 1 << 20,
				PerAuthority: map[string]AuthorityConfig{"api.example.com": {MaxInflight: 10}},
				TickPeriodMS: 500, StaleAfterMS: 1000, CASRetries: 0, FailOpen: true, SharedDataKey: "k",
			},
		},
		{
			name: "stale default follows the tick",
			raw:  `{"tick_period_ms": 2000}`,
			want: Config{RetryAfterSeconds: 1, RetryAfterMaxSeconds: 30, TickPeriodMS: 2000, StaleAfterMS: 10000,
				CASRetries: 8, SharedDataKey: "wafguard.admission.v1"},
		},
		{
			name: "max follows a large base",
			raw:  `{"retry_after_seconds": 60}`,
			want: Config{RetryAfterSeconds: 60, RetryAfterMaxSeconds: 60, TickPeriodMS: 1000, StaleAfterMS: 5000,
				CASRetries: 8, SharedDataKey: "wafguard.admission.v1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, tc.want) {
				t.Errorf("got %+v\nwant %+v", c, tc.want)
			}
		})
	}
}

func TestNew_badConfig(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"negative cap", `{"max_inflight": -1}`,
			`admission.max_inflight: got -1, want 0 (off) or a positive integer`},
		{"cap as string", `{"max_inflight": "10"}`,
			`admission.max_inflight: got "10", want 0 (off) or a positive integer`},
		{"fractional cap", `{"max_inflight": 1.5}`,
			`admission.max_inflight: got 1.5, want 0 (off) or a positive integer`},
		{"null cap", `{"max_inflight": null}`,
			`admission.max_inflight: got null, want 0 (off) or a positive integer`},
		{"huge cap", `{"max_inflight": 99999999999}`,
			`admission.max_inflight: got 99999999999, want 0 (off) or a positive integer`},
		{"unknown key", `{"max_in_flight": 10}`,
			`admission: unknown key "max_in_flight", want one of max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers`},
		{"not an object", `[1]`,
			`admission: got [1], want an object`},
		{"number", `5`,
			`admission: got 5, want an object`},
		{"per authority entry not an object", `{"per_authority": {"a.example": 5}}`,
			`admission.per_authority["a.example"]: got 5, want an object`},
		{"bad JSON", `{"max_inflight": }`,
			`admission: invalid JSON: invalid character '}' looking for beginning of value`},
		{"trailing data", `{} {}`,
			`admission: invalid JSON: trailing data after the object`},
		{"zero retry after", `{"retry_after_seconds": 0}`,
			`admission.retry_after_seconds: got 0, want a positive integer (seconds)`},
		{"max below base", `{"retry_after_seconds": 5, "retry_after_max_seconds": 4}`,
			`admission.retry_after_max_seconds: got 4, want an integer (seconds) from retry_after_seconds (5) to 3600`},
		{"negative body limit", `{"max_request_body_bytes": -5}`,
			`admission.max_request_body_bytes: got -5, want 0 (off) or a positive integer (bytes)`},
		{"tick too short", `{"tick_period_ms": 5}`,
			`admission.tick_period_ms: got 5, want an integer (milliseconds) from 10 to 60000`},
		{"stale too short", `{"tick_period_ms": 1000, "stale_after_ms": 1500}`,
			`admission.stale_after_ms: got 1500, want an integer (milliseconds) from 2000 (2 × tick_period_ms) to 3600000`},
		{"negative retries", `{"cas_retries": -1}`,
			`admission.cas_retries: got -1, want an integer from 0 to 1000`},
		{"bad fail mode", `{"on_cas_exhausted": "maybe"}`,
			`admission.on_cas_exhausted: got "maybe", want "reject" or "admit"`},
		{"fail mode not a string", `{"on_cas_exhausted": true}`,
			`admission.on_cas_exhausted: got true, want a string`},
		{"empty key", `{"shared_data_key": ""}`,
			`admission.shared_data_key: got "", want a non-empty string`},
		{"per authority not an object", `{"per_authority": [1]}`,
			`admission.per_authority: got [1], want an object mapping an authority to {"max_inflight": N}`},
		{"per authority zero", `{"per_authority": {"a.example": {"max_inflight": 0}}}`,
			`admission.per_authority["a.example"].max_inflight: got 0, want a positive integer`},
		{"per authority missing cap", `{"per_authority": {"a.example": {}}}`,
			`admission.per_authority["a.example"].max_inflight: missing, want a positive integer`},
		{"per authority unknown key", `{"per_authority": {"a.example": {"max": 1}}}`,
			`admission.per_authority["a.example"]: unknown key "max", want one of max_inflight`},
		{"per authority duplicate", `{"per_authority": {"a.example": {"max_inflight": 1}, "A.example": {"max_inflight": 2}}}`,
			`admission.per_authority["a.example"]: got a second entry for "a.example" (authorities are compared in lower case), want one entry per authority`},
		{"per authority empty name", `{"per_authority": {"": {"max_inflight": 1}}}`,
			`admission.per_authority: got key "", want an authority such as "example.com" or "example.com:8080"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.raw))
			if err == nil {
				t.Fatalf("ParseConfig(%s) = %+v, want error %q", tc.raw, cfg, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("ParseConfig(%s) error\n got: %s\nwant: %s", tc.raw, err, tc.wantErr)
			}
		})
	}
}
