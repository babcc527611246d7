package filter

import "github.com/wafguard/wafguard/filter/fastpath"

// init installs the faster operator implementations before any WAF is
// compiled. Registration only fills Coraza's registries (no host call).
func init() { fastpath.Register() }
