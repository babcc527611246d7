package fastpath

import (
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/libinjection-go"
)

// detectSQLi is @detectSQLi: libinjection's SQL injection test. When the
// rule captures, TX.0 is set to the fingerprint of a detected injection.
// Its argument, if any, is ignored, as with the built-in.
type detectSQLi struct{}

func newDetectSQLi(plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	return detectSQLi{}, nil
}

func (detectSQLi) Evaluate(tx plugintypes.TransactionState, value string) bool {
	found, fingerprint := libinjection.IsSQLi(value)
	// The built-in calls CaptureField even when the rule does not
	// capture; Coraza's transaction ignores such calls.
	if found && tx.Capturing() {
		tx.CaptureField(0, fingerprint)
	}
	return found
}

// matches is the verdict without captures.
func (detectSQLi) matches(value string) bool {
	found, _ := libinjection.IsSQLi(value)
	return found
}

// detectXSS is @detectXSS: libinjection's cross-site scripting test. It
// never captures; its argument, if any, is ignored.
type detectXSS struct{}

func newDetectXSS(plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	return detectXSS{}, nil
}

func (detectXSS) Evaluate(_ plugintypes.TransactionState, value string) bool {
	return libinjection.IsXSS(value)
}

// matches is the verdict without captures.
func (detectXSS) matches(value string) bool {
	return libinjection.IsXSS(value)
}
