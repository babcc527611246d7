package wasmhost

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wafguard/wafguard/internal/statstags"
)

// MetricType is a proxy-wasm metric type.
type MetricType uint32

// Metric types of proxy_define_metric.
const (
	MetricCounter MetricType = iota
	MetricGauge
	MetricHistogram
)

// histogramBounds are Envoy's default histogram bucket bounds
// (Stats::HistogramSettingsImpl::defaultBuckets).
var histogramBounds = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}

type metric struct {
	name  string
	typ   MetricType
	id    uint32
	value atomic.Uint64 // counter value, or gauge value as int64 bits

	histMu  sync.Mutex
	count   uint64
	sum     float64
	buckets []uint64
}

type metricStore struct {
	mu     sync.RWMutex
	byName map[string]*metric // key: type digit + name
	byID   []*metric          // index: id >> 2
}

func (s *metricStore) init() {
	s.byName = map[string]*metric{}
	s.byID = []*metric{nil}
}

// define returns the id of the metric, creating it on first use. Ids carry
// the type in the low 2 bits and grow by 4 (Envoy Context::defineMetric);
// the same name and type always get the same id, process-wide, because
// Envoy keeps one stat per name for all workers.
func (s *metricStore) define(t MetricType, name string) uint32 {
	key := string(rune('0'+t)) + name
	s.mu.RLock()
	m, ok := s.byName[key]
	s.mu.RUnlock()
	if ok {
		return m.id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.byName[key]; ok {
		return m.id
	}
	m = &metric{name: name, typ: t, id: uint32(len(s.byID))<<2 | uint32(t)}
	if t == MetricHistogram {
		m.buckets = make([]uint64, len(histogramBounds))
	}
	s.byName[key] = m
	s.byID = append(s.byID, m)
	return m.id
}

func (s *metricStore) get(id uint32) *metric {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := int(id >> 2)
	if i <= 0 || i >= len(s.byID) || s.byID[i].id != id {
		return nil
	}
	return s.byID[i]
}

// increment follows Envoy Context::incrementMetric: counters take only a
// positive delta (0 or negative is BadArgument, which the Go SDK turns into
// a panic), gauges add or subtract, histograms are BadArgument.
func (s *metricStore) increment(id uint32, delta int64) Status {
	m := s.get(id)
	if m == nil {
		return StatusNotFound
	}
	switch m.typ {
	case MetricCounter:
		if delta <= 0 {
			return StatusBadArgument
		}
		m.value.Add(uint64(delta))
	case MetricGauge:
		m.value.Add(uint64(delta))
	default:
		return StatusBadArgument
	}
	return StatusOK
}

// record follows Envoy Context::recordMetric: a counter adds the value, a
// gauge is set to it, a histogram records a sample.
func (s *metricStore) record(id uint32, v uint64) Status {
	m := s.get(id)
	if m == nil {
		return StatusNotFound
	}
	switch m.typ {
	case MetricCounter:
		m.value.Add(v)
	case MetricGauge:
		m.value.Store(v)
	case MetricHistogram:
		m.histMu.Lock()
		m.count++
		m.sum += float64(v)
		for i, b := range histogramBounds {
			if float64(v) <= b {
				m.buckets[i]++
			}
		}
		m.histMu.Unlock()
	}
	return StatusOK
}

// value follows Envoy Context::getMetric: histograms give BadArgument.
func (s *metricStore) value(id uint32) (uint64, Status) {
	m := s.get(id)
	if m == nil {
		return 0, StatusNotFound
	}
	if m.typ == MetricHistogram {
		return 0, StatusBadArgument
	}
	return m.value.Load(), StatusOK
}

// Metric returns the value of the counter or gauge with that name, as the
// plugin defined it (without Envoy's "wasmcustom." prefix), summed over all
// VMs, and whether it exists. Gauges are returned as their uint64 bits.
func (h *Host) Metric(name string) (uint64, bool) {
	for _, t := range []MetricType{MetricCounter, MetricGauge} {
		h.metrics.mu.RLock()
		m, ok := h.metrics.byName[string(rune('0'+t))+name]
		h.metrics.mu.RUnlock()
		if ok {
			return m.value.Load(), true
		}
	}
	return 0, false
}

// MetricNames returns the names of all defined metrics, sorted.
func (h *Host) MetricNames() []string {
	h.metrics.mu.RLock()
	defer h.metrics.mu.RUnlock()
	var out []string
	for _, m := range h.metrics.byID[1:] {
		out = append(out, m.name)
	}
	sort.Strings(out)
	return out
}

// StatsTag is one tag extractor, like an entry of Envoy's
// stats_config.stats_tags: Regex runs against the full stat name
// ("wasmcustom.<name>"); the text of its first capture group is cut from
// the name and the second group (or the first, if there is no second) is
// the tag value.
type StatsTag = statstags.Tag

// ParseStatsTags parses "name=regex" items, one per element.
func ParseStatsTags(items []string) ([]StatsTag, error) {
	var out []StatsTag
	for i, it := range items {
		name, expr, ok := strings.Cut(it, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("stats tag %d %q: want tag_name=regex", i, it)
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("stats tag %q: %w", name, err)
		}
		if re.NumSubexp() < 1 {
			return nil, fmt.Errorf("stats tag %q: regex %q has no capture group; want (cut(value))", name, expr)
		}
		out = append(out, StatsTag{Name: name, Regex: re})
	}
	return out, nil
}

// DefaultStatsTags returns the stats_tags of envoy/envoy.yaml, for the
// filter's metric names (for example
// "waf_filter.tx.interruptions_env=prod_ruleid=949110_phase=http_request_headers"):
// env, rule_id, and phase (last in the name, so anchored at the end); and
// the admission guard's reason (for example
// "wafguard_admission_rejected_reason=cap").
func DefaultStatsTags() []StatsTag {
	return []StatsTag{
		{Name: "env", Regex: regexp.MustCompile(`(_env=([^_]+))`)},
		{Name: "rule_id", Regex: regexp.MustCompile(`(_ruleid=([0-9]+|other))`)},
		{Name: "phase", Regex: regexp.MustCompile(`(_phase=([a-z_]+))$`)},
		{Name: "reason", Regex: regexp.MustCompile(`(_reason=([a-z_]+))$`)},
		{Name: "crs_version", Regex: regexp.MustCompile(`(_crs=([^_]+))$`)},
		{Name: "config", Regex: regexp.MustCompile(`(_config=([0-9a-f]+))$`)},
	}
}

type promSample struct {
	labels string
	m      *metric
}

// WritePrometheus writes every custom metric in Envoy's /stats/prometheus
// shape: tags extracted, the "wasmcustom." namespace stripped, no "envoy_"
// prefix, invalid characters replaced by "_", untagged series as "{}".
func (h *Host) WritePrometheus(w io.Writer) error {
	h.metrics.mu.RLock()
	ms := append([]*metric(nil), h.metrics.byID[1:]...)
	h.metrics.mu.RUnlock()
	type family struct {
		typ     MetricType
		samples []promSample
	}
	fams := map[string]*family{}
	for _, m := range ms {
		name, labels := h.extractTags("wasmcustom." + m.name)
		name = statstags.Sanitize(strings.TrimPrefix(name, "wasmcustom."))
		f := fams[name]
		if f == nil {
			f = &family{typ: m.typ}
			fams[name] = f
		}
		f.samples = append(f.samples, promSample{labels: labels, m: m})
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f := fams[n]
		sort.Slice(f.samples, func(i, j int) bool { return f.samples[i].labels < f.samples[j].labels })
		typ := [...]string{"counter", "gauge", "histogram"}[f.typ]
		fmt.Fprintf(&b, "# TYPE %s %s\n", n, typ)
		for _, s := range f.samples {
			switch f.typ {
			case MetricCounter:
				fmt.Fprintf(&b, "%s{%s} %d\n", n, s.labels, s.m.value.Load())
			case MetricGauge:
				fmt.Fprintf(&b, "%s{%s} %d\n", n, s.labels, int64(s.m.value.Load()))
			case MetricHistogram:
				s.m.histMu.Lock()
				sep := ""
				if s.labels != "" {
					sep = ","
				}
				for i, bound := range histogramBounds {
					fmt.Fprintf(&b, "%s_bucket{%s%sle=\"%g\"} %d\n", n, s.labels, sep, bound, s.m.buckets[i])
				}
				fmt.Fprintf(&b, "%s_bucket{%s%sle=\"+Inf\"} %d\n", n, s.labels, sep, s.m.count)
				fmt.Fprintf(&b, "%s_sum{%s} %g\n", n, s.labels, s.m.sum)
				fmt.Fprintf(&b, "%s_count{%s} %d\n", n, s.labels, s.m.count)
				s.m.histMu.Unlock()
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// extractTags applies the tag extractors as Envoy's tag producer does
// (statstags.Extract) and formats the labels for the Prometheus text.
func (h *Host) extractTags(name string) (string, string) {
	name, labels := statstags.Extract(h.tags, name)
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s=%q", l.Name, l.Value)
	}
	return name, strings.Join(parts, ",")
}
