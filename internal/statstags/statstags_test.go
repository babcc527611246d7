package statstags

import (
	"reflect"
	"regexp"
	"testing"
)

func TestExtract(t *testing.T) {
	tags := []Tag{
		{Name: "env", Regex: regexp.MustCompile(`(_env=([^_]+))`)},
		{Name: "rule_id", Regex: regexp.MustCompile(`(_ruleid=([0-9]+|other))`)},
		{Name: "phase", Regex: regexp.MustCompile(`(_phase=([a-z_]+))$`)},
		{Name: "whole", Regex: regexp.MustCompile(`(\.total)$`)}, // one group: it is the value too
	}
	for _, tc := range []struct {
		stat, name string
		labels     []Label
	}{
		{"wasmcustom.waf_filter.tx.interruptions_env=prod_ruleid=949110_phase=http_request_headers", "wasmcustom.waf_filter.tx.interruptions",
			[]Label{{"env", "prod"}, {"rule_id", "949110"}, {"phase", "http_request_headers"}}},
		{"wasmcustom.waf_filter.tx.total", "wasmcustom.waf_filter.tx", []Label{{"whole", ".total"}}},
		{"wasmcustom.other", "wasmcustom.other", nil},
		// Every regex reads the full name, as Envoy's: the phase regex,
		// anchored at the end, still matches after env was cut before it.
		{"x_env=a_phase=b", "x", []Label{{"env", "a"}, {"phase", "b"}}},
	} {
		name, labels := Extract(tags, tc.stat)
		if name != tc.name || !reflect.DeepEqual(labels, tc.labels) {
			t.Errorf("Extract(%q) = %q, %v; want %q, %v", tc.stat, name, labels, tc.name, tc.labels)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"waf_filter.tx.total": "waf_filter_tx_total", "a-b:c": "a_b:c", "9x": "_9x", "": ""} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
