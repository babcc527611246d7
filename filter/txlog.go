package filter

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	ctypes "github.com/corazawaf/coraza/v3/types"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/wafguard/wafguard/internal/scratch"
)

// txAction is what the filter did with a transaction.
type txAction uint8

const (
	actionPass txAction = iota
	actionBlock
	actionRedirect
	actionWouldBlock
	actionBodyLimit
	actionJSONTooDeep
	actionFailClosed
)

// String returns the action as the JSON log and the filter state name it.
func (a txAction) String() string {
	switch a {
	case actionBlock:
		return "block"
	case actionRedirect:
		return "redirect"
	case actionWouldBlock:
		return "would_block"
	case actionBodyLimit:
		return "body_limit"
	case actionJSONTooDeep:
		return "json_too_deep"
	case actionFailClosed:
		return "fail_closed"
	}
	return "pass"
}

// Filter state written with proxy_set_property when a transaction is
// blocked or would be. Envoy stores set_property(X) as the filter state
// "wasm.X", which an access log reads with %FILTER_STATE(wasm.X:PLAIN)%.
var (
	propWAFAction       = []string{"waf_action"}
	propWAFRuleID       = []string{"waf_rule_id"}
	propWAFPhase        = []string{"waf_phase"}
	propWAFStatus       = []string{"waf_status"}
	propWAFAnomalyScore = []string{"waf_anomaly_score"}
	propWAFTxID         = []string{"waf_tx_id"}
	propResponseCode    = []string{"response", "code"}
)

// detectionOnlyTx is implemented by Coraza's transaction (v3.8.1): in
// DetectionOnly it keeps the first interruption that blocking mode would
// have made, instead of interrupting.
type detectionOnlyTx interface {
	DetectionOnlyInterruption() *ctypes.Interruption
}

// loggedRule is implemented by Coraza's matched rules: Log reports whether
// the rule has the log action (CRS setup rules are nolog).
type loggedRule interface {
	Log() bool
}

// addTime adds the time since start to the transaction's WAF time. It runs
// deferred in every callback that works on the transaction.
func (s *stream) addTime(start time.Time) {
	s.wafTime += time.Since(start)
}

// record keeps the outcome of a transaction that was stopped or would have
// been, and publishes it as filter state for the access log.
func (s *stream) record(a txAction, ruleID int, p phase, status int) {
	s.action, s.ruleID, s.blockPhase, s.finalStatus = a, ruleID, p, status
	setState(propWAFAction, a.String())
	setState(propWAFRuleID, strconv.Itoa(ruleID))
	setState(propWAFPhase, p.String())
	setState(propWAFStatus, strconv.Itoa(status))
	if s.tx != nil {
		setState(propWAFTxID, s.tx.ID())
		setState(propWAFAnomalyScore, s.anomalyScore(p))
	}
}

// setState sets one filter state value; an empty value is left unset (the
// SDK refuses empty values) and a host error only costs the access log
// field.
func setState(path []string, value string) {
	if value == "" {
		return
	}
	if err := proxywasm.SetProperty(path, []byte(value)); err != nil {
		proxywasm.LogDebug("waf: setting filter state " + path[0] + ": " + err.Error())
	}
}

// anomalyScore returns the CRS blocking anomaly score of the direction of p
// ("" without the CRS).
func (s *stream) anomalyScore(p phase) string {
	ts, ok := s.tx.(plugintypes.TransactionState)
	if !ok {
		return ""
	}
	key := "blocking_inbound_anomaly_score"
	if p >= phaseResponseHeaders {
		key = "blocking_outbound_anomaly_score"
	}
	if v := ts.Variables().TX().Get(key); len(v) != 0 {
		return v[0]
	}
	return ""
}

// checkWouldBlock records, once per transaction, the interruption that
// blocking mode would have made in DetectionOnly.
func (s *stream) checkWouldBlock(p phase) {
	if s.action != actionPass {
		return
	}
	d, ok := s.tx.(detectionOnlyTx)
	if !ok {
		return
	}
	it := d.DetectionOnlyInterruption()
	if it == nil {
		return
	}
	status := it.Status
	if status < 200 || status > 599 {
		status = 403
	}
	s.plugin.metrics.countWouldBlock(it.RuleID, p)
	// The client gets the upstream's answer, not the status blocking mode
	// would have sent; that one only goes to the filter state.
	got := s.finalStatus
	s.record(actionWouldBlock, it.RuleID, p, status)
	s.finalStatus = got
}

// report runs once per transaction, before it is closed: it counts the
// logged rule matches and the WAF time, and writes the JSON log line.
func (s *stream) report(tx ctypes.Transaction) {
	m := s.plugin.metrics
	m.wafTime.Record(uint64(s.wafTime / time.Microsecond))
	if ts, ok := tx.(plugintypes.TransactionState); ok && ts.Variables().ArgumentsLimitReached().Get() == "1" {
		m.argsLimit.Increment(1)
	}
	matched := tx.MatchedRules()
	for _, mr := range matched {
		if l, ok := mr.(loggedRule); ok && !l.Log() {
			continue
		}
		m.countRuleMatch(mr.Rule().ID())
	}
	if !s.plugin.ops.jsonLog {
		return
	}
	if s.finalStatus == 0 && s.action == actionPass {
		// The response was not inspected (engine off, or no response
		// headers callback): Envoy has the code in on_log.
		if b, err := proxywasm.GetProperty(propResponseCode); err == nil && len(b) == 8 {
			s.finalStatus = int(le64(b))
		}
	}
	b := scratch.Truncate(s.plugin.logBuf, 0)
	b = append(b, `{"transaction_id":`...)
	b = appendJSONString(b, tx.ID())
	b = append(b, `,"rule_set":`...)
	b = appendJSONString(b, s.rules.name)
	b = append(b, `,"authority":`...)
	b = appendJSONString(b, s.authority)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, s.method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, s.path)
	b = append(b, `,"client_ip":`...)
	b = appendJSONString(b, s.clientIP)
	b = append(b, `,"client_port":`...)
	b = strconv.AppendInt(b, int64(s.clientPort), 10)
	b = append(b, `,"action":"`...)
	b = append(b, s.action.String()...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(s.finalStatus), 10)
	if s.action != actionPass {
		b = append(b, `,"rule_id":`...)
		b = strconv.AppendInt(b, int64(s.ruleID), 10)
		b = append(b, `,"phase":"`...)
		b = append(b, s.blockPhase.String()...)
		b = append(b, '"')
	}
	b = append(b, `,"waf_time_us":`...)
	b = strconv.AppendInt(b, int64(s.wafTime/time.Microsecond), 10)
	b = append(b, `,"matched_rules":[`...)
	n := 0
	for _, mr := range matched {
		if l, ok := mr.(loggedRule); ok && !l.Log() {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		r := mr.Rule()
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(r.ID()), 10)
		b = append(b, `,"phase":`...)
		b = strconv.AppendInt(b, int64(r.Phase()), 10)
		b = append(b, `,"severity":"`...)
		b = append(b, r.Severity().String()...)
		b = append(b, `","msg":`...)
		b = appendJSONString(b, mr.Message())
		b = append(b, `,"data":`...)
		b = appendJSONString(b, mr.Data())
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	s.plugin.logBuf = b
	proxywasm.LogInfo(lentLine(b))
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the line always parses.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// traceID returns the trace-id of a W3C traceparent header
// (https://www.w3.org/TR/trace-context/#traceparent-header), or "" when the
// header is absent or malformed. It does not allocate.
func traceID(tp string) string {
	// version "-" trace-id(32) "-" parent-id(16) "-" flags(2)
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || tp[:2] == "ff" {
		return ""
	}
	id := tp[3:35]
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
		if c != '0' {
			zero = false
		}
	}
	if zero {
		return ""
	}
	return id
}
