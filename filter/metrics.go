package filter

import (
	"strconv"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/wafguard/wafguard/filter/rules"
)

// Metric names. Labels are encoded in the name (Envoy's stats_tags
// extraction turns them into tags, see docs/configuration.md):
//
//	waf_filter.tx.total<labels>
//	waf_filter.tx.active<labels>
//	waf_filter.tx.interruptions<labels>_ruleid=<id>_phase=<phase>
//
// where <labels> is "_key=value" for each metric_labels entry in key order.
// Keys are [a-z][a-z0-9]* and values hold no '_', so a "_key=([^_]+)" regex
// cannot swallow the next label, and the phase (whose values contain '_')
// always comes last.
const (
	metricTotal         = "waf_filter.tx.total"
	metricActive        = "waf_filter.tx.active"
	metricInterruptions = "waf_filter.tx.interruptions"
	// metricWouldBlock counts, by rule and phase, the transactions that
	// blocking mode would have interrupted (DetectionOnly).
	metricWouldBlock = "waf_filter.tx.would_block"
	// metricRuleMatches counts logged rule matches by rule id, for the
	// first rule_metrics_top_n ids seen; the rest count as ruleid=other.
	metricRuleMatches = "waf_filter.rule.matches"
	// metricWAFTime is a histogram of the time spent in Coraza per
	// transaction, in microseconds.
	metricWAFTime = "waf_filter.tx.waf_time_us"
	// metricPreselectKept is a histogram of the screened rules the rule
	// preselection kept per transaction (the rest of the rule set is
	// always evaluated); metricPreselectRemoved counts the rules it
	// removed.
	metricPreselectKept    = "waf_filter.tx.preselect_kept"
	metricPreselectRemoved = "waf_filter.preselect.removed"
	metricHoldTimeouts     = "waf_filter.hold.timeouts"
	// metricEarlyResponses counts the upstream responses that arrived
	// before their request ended and waited for phase 2 (early.go).
	metricEarlyResponses = "waf_filter.tx.early_responses"
	// metricArgsLimit counts the transactions whose arguments went past
	// SecArgumentsLimit: Coraza dropped the rest (ARGUMENTS_LIMIT_REACHED),
	// which rules 200004 and 200005 of @recommended-conf answer 400.
	metricArgsLimit = "waf_filter.tx.args_limit_reached"
	// metricCRSInfo is a gauge set to 1 whose name says which CRS release
	// the plugin embeds: waf_filter.crs_info<labels>_crs=<version>.
	metricCRSInfo = "waf_filter.crs_info"
	// metricConfigInfo is a gauge, 1 while the plugin with that
	// configuration runs and 0 once it is gone:
	// waf_filter.config_info<labels>_config=<digest>.
	metricConfigInfo = "waf_filter.config_info"
)

type interruptionKey struct {
	ruleID int
	phase  phase
}

// metrics holds one plugin's metric handles.
//
// # Notes
//
// The interruption counters are defined the first time a (rule, phase) pair
// interrupts a stream and cached, so each name is defined once per plugin.
// Their number is bounded by the disruptive rules of the rule sets times the
// four phases; with the CRS in anomaly-scoring mode only the blocking rules
// (949110, 959100, 920xxx body limits and a few others) ever interrupt.
type metrics struct {
	total         proxywasm.MetricCounter
	active        proxywasm.MetricGauge
	labels        string
	interruptions map[interruptionKey]proxywasm.MetricCounter
	wouldBlock    map[interruptionKey]proxywasm.MetricCounter
	wafTime       proxywasm.MetricHistogram

	preselectKept    proxywasm.MetricHistogram
	preselectRemoved proxywasm.MetricCounter

	// holdTimeouts counts the streams answered 500 because their held
	// headers got no body callback in time (hold.go).
	holdTimeouts proxywasm.MetricCounter
	// configInfo is the waf_filter.config_info gauge of the plugin's
	// configuration (0 when it has no digest); recording sets it.
	configInfo proxywasm.MetricHistogram
	// earlyResponses counts the responses held until their request
	// ended (early.go).
	earlyResponses proxywasm.MetricCounter
	// argsLimit counts the transactions with arguments past
	// SecArgumentsLimit.
	argsLimit proxywasm.MetricCounter

	// ruleTopN bounds ruleMatches; ruleOther takes every other rule id.
	ruleTopN    int
	ruleMatches map[int]proxywasm.MetricCounter
	ruleOther   proxywasm.MetricCounter
}

// encodeLabels returns the "_key=value" suffix for the labels, in key order.
func encodeLabels(labels map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(labels) {
		b.WriteByte('_')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	return b.String()
}

// interruptionMetricName returns the counter name for a rule and phase.
func interruptionMetricName(labels string, ruleID int, p phase) string {
	return metricInterruptions + labels + "_ruleid=" + strconv.Itoa(ruleID) + "_phase=" + p.String()
}

// newMetrics defines the fixed metrics. It makes host calls, so it runs in
// OnPluginStart, never in init().
func newMetrics(labels map[string]string, ruleTopN int, digest string) *metrics {
	l := encodeLabels(labels)
	// Every VM defines the same gauge and sets it to 1. The SDK's gauge
	// only adds; proxy_record_metric, which its histogram type calls,
	// sets a gauge (Envoy's Context::recordMetric).
	proxywasm.MetricHistogram(proxywasm.DefineGaugeMetric(crsInfoName(l))).Record(1)
	var configInfo proxywasm.MetricHistogram
	if digest != "" {
		configInfo = proxywasm.MetricHistogram(proxywasm.DefineGaugeMetric(metricConfigInfo + l + "_config=" + digest))
		configInfo.Record(1)
	}
	return &metrics{
		configInfo:       configInfo,
		total:            proxywasm.DefineCounterMetric(metricTotal + l),
		active:           proxywasm.DefineGaugeMetric(metricActive + l),
		labels:           l,
		interruptions:    map[interruptionKey]proxywasm.MetricCounter{},
		wouldBlock:       map[interruptionKey]proxywasm.MetricCounter{},
		wafTime:          proxywasm.DefineHistogramMetric(metricWAFTime + l),
		preselectKept:    proxywasm.DefineHistogramMetric(metricPreselectKept + l),
		preselectRemoved: proxywasm.DefineCounterMetric(metricPreselectRemoved + l),
		holdTimeouts:     proxywasm.DefineCounterMetric(metricHoldTimeouts + l),
		earlyResponses:   proxywasm.DefineCounterMetric(metricEarlyResponses + l),
		argsLimit:        proxywasm.DefineCounterMetric(metricArgsLimit + l),
		ruleTopN:         ruleTopN,
		ruleMatches:      make(map[int]proxywasm.MetricCounter, ruleTopN),
		ruleOther:        proxywasm.DefineCounterMetric(metricRuleMatches + l + "_ruleid=other"),
	}
}

// countWouldBlock counts a DetectionOnly transaction that blocking mode
// would have interrupted; the names are bounded like the interruptions'.
func (m *metrics) countWouldBlock(ruleID int, p phase) {
	key := interruptionKey{ruleID: ruleID, phase: p}
	c, ok := m.wouldBlock[key]
	if !ok {
		c = proxywasm.DefineCounterMetric(metricWouldBlock + m.labels + "_ruleid=" + strconv.Itoa(ruleID) + "_phase=" + p.String())
		m.wouldBlock[key] = c
	}
	c.Increment(1)
}

// countRuleMatch counts one logged match of a rule. The first ruleTopN
// distinct ids seen on this VM get their own counter, defined on first use;
// every later id counts as ruleid=other, so a rule set cannot create more
// than ruleTopN+1 series.
func (m *metrics) countRuleMatch(ruleID int) {
	c, ok := m.ruleMatches[ruleID]
	if !ok {
		if len(m.ruleMatches) >= m.ruleTopN {
			m.ruleOther.Increment(1)
			return
		}
		c = proxywasm.DefineCounterMetric(metricRuleMatches + m.labels + "_ruleid=" + strconv.Itoa(ruleID))
		m.ruleMatches[ruleID] = c
	}
	c.Increment(1)
}

func (m *metrics) countInterruption(ruleID int, p phase) {
	key := interruptionKey{ruleID: ruleID, phase: p}
	c, ok := m.interruptions[key]
	if !ok {
		c = proxywasm.DefineCounterMetric(interruptionMetricName(m.labels, ruleID, p))
		m.interruptions[key] = c
	}
	c.Increment(1)
}

// crsInfoName is the name of the gauge that says which CRS release the
// plugin embeds, for the encoded labels l.
func crsInfoName(l string) string {
	return metricCRSInfo + l + "_crs=" + rules.CRSVersion
}
