package fastpath

import (
	"strings"

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
	return isXSS(value)
}

// matches is the verdict without captures.
func (detectXSS) matches(value string) bool {
	return isXSS(value)
}

// isXSS is libinjection.IsXSS, which answers false without tokenizing a
// value that holds neither '<' nor '='. libinjection tokenizes the value
// as HTML5 in five states and reports an injection only on one of these
// tokens: a doctype, an opening tag with a blacklisted name, or a comment,
// each of which starts at a '<' (the data state, which libinjection runs
// only when the value holds one; from the attribute states a '>' leads to
// the data state, and a tag or comment there opens with '<'); or an
// attribute value that directly follows an attribute name it judges
// (black, a URL or a style). An attribute value follows a name only
// through '=' (the before-attribute-value state is reached from the
// attribute name states on '=' alone); the only other attribute value,
// the start of a value in a quoted state, follows no name. Without either
// byte none of these tokens can occur; TestIsXSS_prefilter checks the
// claim on libinjection itself. Most values of a JSON body or a query
// hold neither, and each call of IsXSS makes four tokenizer passes.
func isXSS(value string) bool {
	if strings.IndexByte(value, '<') < 0 && strings.IndexByte(value, '=') < 0 {
		return false
	}
	return libinjection.IsXSS(value)
}
