// Package statstags applies Envoy's stats_tags to a stat name, the way
// Envoy's tag producer does (source/common/stats/tag_producer_impl.cc,
// tag_extractor_impl.cc): every regex runs on the full stat name; the text
// of its capture group 1 is cut from the name, and group 2 (or group 1 when
// there is no group 2) is the tag's value. The envoy package (checking
// bootstrap files) and the wasmhost package (its /stats/prometheus) both use
// it, so the names the tests read are the names Envoy shows.
package statstags

import "regexp"

// Tag is one regex tag specifier of stats_config.stats_tags.
type Tag struct {
	Name  string
	Regex *regexp.Regexp
}

// Label is one extracted tag.
type Label struct {
	Name, Value string
}

// Extract returns the stat name with every matching tag's group 1 cut out,
// and the labels, in tag order.
func Extract(tags []Tag, stat string) (string, []Label) {
	var cut []bool
	var labels []Label
	for _, t := range tags {
		m := t.Regex.FindStringSubmatchIndex(stat)
		if m == nil || len(m) < 4 || m[2] < 0 {
			continue
		}
		vs, ve := m[2], m[3]
		if len(m) >= 6 && m[4] >= 0 {
			vs, ve = m[4], m[5]
		}
		labels = append(labels, Label{Name: t.Name, Value: stat[vs:ve]})
		if cut == nil {
			cut = make([]bool, len(stat))
		}
		for j := m[2]; j < m[3]; j++ {
			cut[j] = true
		}
	}
	if cut == nil {
		return stat, nil
	}
	b := make([]byte, 0, len(stat))
	for i := 0; i < len(stat); i++ {
		if !cut[i] {
			b = append(b, stat[i])
		}
	}
	return string(b), labels
}

// Sanitize replaces what Prometheus does not allow in a metric name with
// "_", and puts "_" before a leading digit, as Envoy's Prometheus formatter
// does.
func Sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == ':') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && '0' <= b[0] && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}
