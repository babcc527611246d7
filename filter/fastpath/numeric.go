package fastpath

import (
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/macro"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// numeric is @eq, @ge, @gt, @le and @lt: the value and the argument (a
// macro, expanded per transaction) are read as decimal integers, 0 for
// anything that is not one, and compared. The CRS compares TX variables
// with them (the paranoia-level gates), which is why they are this
// package's: the rule preselection learns from them where a skipAfter
// did not jump.
type numeric struct {
	arg     macro.Macro
	fixed   int  // the argument as a number when it has no macro
	isFixed bool // the argument has no macro
	cmp     func(value, arg int) bool
}

func numericFactory(cmp func(value, arg int) bool) plugintypes.OperatorFactory {
	return func(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
		m, err := macro.NewMacro(opts.Arguments)
		if err != nil {
			return nil, err
		}
		o := &numeric{arg: m, cmp: cmp}
		if !strings.Contains(opts.Arguments, "%{") {
			o.isFixed = true
			o.fixed, _ = strconv.Atoi(m.String())
		}
		return o, nil
	}
}

var (
	newEq = numericFactory(func(v, a int) bool { return v == a })
	newGe = numericFactory(func(v, a int) bool { return v >= a })
	newGt = numericFactory(func(v, a int) bool { return v > a })
	newLe = numericFactory(func(v, a int) bool { return v <= a })
	newLt = numericFactory(func(v, a int) bool { return v < a })
)

func (o *numeric) Evaluate(tx plugintypes.TransactionState, value string) bool {
	a, _ := strconv.Atoi(o.arg.Expand(tx))
	v, _ := strconv.Atoi(value)
	return o.cmp(v, a)
}

// matches is the verdict for an argument without a macro.
func (o *numeric) matches(value string) bool {
	v, _ := strconv.Atoi(value)
	return o.cmp(v, o.fixed)
}
