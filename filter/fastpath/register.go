package fastpath

import (
	"github.com/corazawaf/coraza/v3/experimental/plugins"
)

// Register replaces Coraza's @rx with this package's operator for every
// WAF compiled afterwards.
func Register() {
	plugins.RegisterOperator("rx", newRx)
}
