package filter

import (
	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/filter/preselect"
	"github.com/wafguard/wafguard/filter/transform"
)

// init installs this project's operators and transformations before any
// WAF is compiled, the operators wrapped by the rule preselection: the
// rules and the preselection then run the same code. Registration only fills Coraza's
// registries (no host call).
func init() {
	fastpath.Register()
	transform.Register()
	preselect.Register(fastpath.Factories())
	preselect.OnScreen = recordScreen
}
