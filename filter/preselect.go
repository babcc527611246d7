package filter

import (
	"strconv"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/wafguard/wafguard/filter/preselect"
)

// activeStream is the stream whose callback is calling into Coraza. A VM
// runs one callback at a time, so the preselection's reports, which come
// from inside Coraza's rule loop, belong to it.
var activeStream *stream

// enter marks s as the stream calling into Coraza.
func (s *stream) enter() { activeStream = s }

// recordScreen adds one preselection report to the stream it belongs to.
func recordScreen(r preselect.Report) {
	s := activeStream
	if s == nil || s.tx == nil || s.tx.ID() != r.TxID {
		return
	}
	s.screened += r.Screened
	s.removed += r.Removed
}

// reportScreen publishes what the preselection did for the transaction:
// the metrics, and one debug line.
func (s *stream) reportScreen(txID string) {
	if s.screened == 0 {
		return
	}
	m := s.plugin.metrics
	m.preselectKept.Record(uint64(s.screened - s.removed))
	if s.removed > 0 {
		// proxy_increment_metric refuses 0 (the SDK then panics).
		m.preselectRemoved.Increment(uint64(s.removed))
	}
	proxywasm.LogDebug("waf: rule preselection removed " + strconv.Itoa(s.removed) + " of " +
		strconv.Itoa(s.screened) + " screened rules, unique_id " + txID)
}
