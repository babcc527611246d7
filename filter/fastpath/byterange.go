package fastpath

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// byteRange is @validateByteRange: it matches a value that holds a byte
// outside the allowed ranges ("1-255", "32-36,38-126", single bytes). An
// empty value never matches; an empty argument makes an operator that
// matches everything, as the built-in does.
type byteRange struct {
	all     bool // empty argument: every value matches
	allowed [256]bool
}

func newByteRange(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
	o := &byteRange{}
	if opts.Arguments == "" {
		o.all = true
		return o, nil
	}
	for _, part := range strings.Split(opts.Arguments, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err := byteArg(lo)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = byteArg(hi); err != nil {
				return nil, err
			}
		}
		for b := first; b <= last; b++ {
			o.allowed[b] = true
		}
	}
	return o, nil
}

// byteArg reads one bound: a decimal number from 0 to 255, nothing around
// it.
func byteArg(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > 255 {
		return 0, fmt.Errorf("invalid byte %d", n)
	}
	return n, nil
}

func (o *byteRange) Evaluate(_ plugintypes.TransactionState, value string) bool {
	return o.matches(value)
}

// matches is the verdict; the operator never captures.
func (o *byteRange) matches(value string) bool {
	if o.all {
		return true
	}
	for i := 0; i < len(value); i++ {
		if !o.allowed[value[i]] {
			return true
		}
	}
	return false
}
