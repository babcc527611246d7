package envoy

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"

	"github.com/wafguard/wafguard/internal/statstags"
)

// CustomStatPrefix is the prefix Envoy puts in front of every metric a wasm
// plugin defines (proxy-wasm-cpp-host stats_handler.h). /stats/prometheus
// strips it as a registered custom namespace.
const CustomStatPrefix = "wasmcustom."

// Series is one metric as /stats/prometheus shows it.
type Series struct {
	Name   string
	Labels map[string]string
}

// String formats the series like the exposition format, labels in
// tag-specifier order: name{a="x",b="y"}.
func (s Series) String() string { return s.str(nil) }

func (s Series) str(order []string) string {
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	n := 0
	known := map[string]bool{}
	for _, k := range order {
		known[k] = true
	}
	var rest []string
	for k := range s.Labels {
		if !known[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range append(order, rest...) {
		v, ok := s.Labels[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, v)
		n++
	}
	b.WriteByte('}')
	return b.String()
}

// TagExtractor applies a bootstrap's stats_tags the way Envoy does
// (source/common/stats/tag_extractor_impl.cc): every regex runs on the full
// stat name; capture group 1 is cut out of the name and group 2 (or group 1
// when there is no group 2) is the tag value. Envoy's built-in default tags
// (use_all_default_tags) are not applied; none of them matches a name that
// starts with "wasmcustom.".
type TagExtractor struct {
	names []string
	tags  []statstags.Tag
}

// NewTagExtractor compiles the regex tag specifiers of a stats_config.
// Specifiers with a fixed_value are skipped (they add a label to every
// stat and cut nothing). The regexes must also compile as Go RE2, which
// keeps them in the syntax subset that every Envoy regex engine reads the
// same way.
func NewTagExtractor(specs []*metricsv3.TagSpecifier) (*TagExtractor, error) {
	t := &TagExtractor{}
	for i, s := range specs {
		if s.GetFixedValue() != "" {
			continue
		}
		re, err := regexp.Compile(s.GetRegex())
		if err != nil {
			return nil, fmt.Errorf("stats_config.stats_tags[%d].regex: %q: %w", i, s.GetRegex(), err)
		}
		if re.NumSubexp() < 1 {
			return nil, fmt.Errorf("stats_config.stats_tags[%d].regex: %q has no capture group, want group 1 = the text to cut, group 2 = the value", i, s.GetRegex())
		}
		t.names = append(t.names, s.GetTagName())
		t.tags = append(t.tags, statstags.Tag{Name: s.GetTagName(), Regex: re})
	}
	return t, nil
}

// Prometheus returns the series that /stats/prometheus shows for the stat
// with this full name (as in /stats, e.g. "wasmcustom.waf_filter.tx.total").
func (t *TagExtractor) Prometheus(stat string) Series {
	name, labels := statstags.Extract(t.tags, stat)
	m := make(map[string]string, len(labels))
	for _, l := range labels {
		m[l.Name] = l.Value
	}
	return Series{Name: statstags.Sanitize(strings.TrimPrefix(name, CustomStatPrefix)), Labels: m}
}

// Format is Series.String with the labels in stats_tags order.
func (t *TagExtractor) Format(s Series) string { return s.str(t.names) }

// CheckPluginMetrics checks that the plugin's metric names come out of Envoy's
// tag extraction as the Prometheus series the dashboards expect: every
// metric_labels key becomes a label of the same name, and the rule ID and
// phase become rule_id and phase, and the admission guard's rejection
// reason becomes reason. The names follow filter/metrics.go (the
// metric_labels as "_key=value" in key order, then
// "_ruleid=<id>_phase=<phase>") and docs/admission.md.
func (t *TagExtractor) CheckPluginMetrics(labels map[string]string) error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var enc strings.Builder
	for _, k := range keys {
		enc.WriteString("_" + k + "=" + labels[k])
	}
	withRule := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range labels {
			m[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	cases := []struct {
		stat string
		want Series
	}{
		{CustomStatPrefix + "waf_filter.tx.total" + enc.String(),
			Series{Name: "waf_filter_tx_total", Labels: withRule()}},
		{CustomStatPrefix + "waf_filter.tx.active" + enc.String(),
			Series{Name: "waf_filter_tx_active", Labels: withRule()}},
		{CustomStatPrefix + "waf_filter.tx.interruptions" + enc.String() + "_ruleid=949110_phase=http_request_headers",
			Series{Name: "waf_filter_tx_interruptions", Labels: withRule("rule_id", "949110", "phase", "http_request_headers")}},
		{CustomStatPrefix + "waf_filter.tx.interruptions" + enc.String() + "_ruleid=200002_phase=http_request_body",
			Series{Name: "waf_filter_tx_interruptions", Labels: withRule("rule_id", "200002", "phase", "http_request_body")}},
		// The admission guard's names (docs/admission.md) carry no
		// metric_labels.
		{CustomStatPrefix + "wafguard_admission_admitted",
			Series{Name: "wafguard_admission_admitted", Labels: map[string]string{}}},
		{CustomStatPrefix + "wafguard_admission_rejected_reason=cap",
			Series{Name: "wafguard_admission_rejected", Labels: map[string]string{"reason": "cap"}}},
		{CustomStatPrefix + "wafguard_admission_rejected_reason=body_size",
			Series{Name: "wafguard_admission_rejected", Labels: map[string]string{"reason": "body_size"}}},
	}
	for _, c := range cases {
		got := t.Prometheus(c.stat)
		if got.Name != c.want.Name || !reflect.DeepEqual(got.Labels, c.want.Labels) {
			return fmt.Errorf("stat %q becomes %s, want %s; add or fix the tag regex of each label", c.stat, t.Format(got), t.Format(c.want))
		}
	}
	return nil
}
