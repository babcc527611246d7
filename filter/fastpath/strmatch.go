package fastpath

import (
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/macro"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// strMatch is @contains, @beginsWith, @endsWith, @streq and @within: a
// byte-wise, case-sensitive comparison of the value with the argument,
// which may name variables (%{tx.x}) expanded per transaction with
// Coraza's macro package, as the built-ins do. They never capture.
type strMatch struct {
	// arg is the argument, used as is when it has no macro.
	arg string
	// expand is the argument's macro when it holds "%{", else nil; only
	// then does the operator read the transaction.
	expand macro.Macro
	test   func(value, arg string) bool
}

// newStrMatch returns the factory of the operator that tests values with
// test. Like the built-ins it compiles the argument as a macro, so an empty
// or malformed argument is refused with the macro package's error.
func newStrMatch(test func(value, arg string) bool) plugintypes.OperatorFactory {
	return func(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
		m, err := macro.NewMacro(opts.Arguments)
		if err != nil {
			return nil, err
		}
		o := &strMatch{arg: opts.Arguments, test: test}
		// Without "%{" the macro is one text token that expands to the
		// argument itself.
		if strings.Contains(opts.Arguments, "%{") {
			o.expand = m
		}
		return o, nil
	}
}

var (
	newContains   = newStrMatch(strings.Contains)
	newBeginsWith = newStrMatch(strings.HasPrefix)
	newEndsWith   = newStrMatch(strings.HasSuffix)
	newStreq      = newStrMatch(func(value, arg string) bool { return value == arg })
	// @within: the value is found in the argument.
	newWithin = newStrMatch(func(value, arg string) bool { return strings.Contains(arg, value) })
)

func (o *strMatch) Evaluate(tx plugintypes.TransactionState, value string) bool {
	if o.expand == nil {
		return o.test(value, o.arg)
	}
	return o.test(value, o.expand.Expand(tx))
}

// matches is the verdict for an argument without a macro, which needs no
// transaction.
func (o *strMatch) matches(value string) bool {
	return o.test(value, o.arg)
}
