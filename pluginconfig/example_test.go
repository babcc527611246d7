package pluginconfig_test

import (
	"fmt"

	"github.com/wafguard/wafguard/pluginconfig"
)

// Check a plugin configuration as the plugin would at start, every problem
// at once, each naming its key.
func ExampleCheck() {
	err := pluginconfig.Check([]byte(`{
	  "directives_map": {"app": ["SecRuleEngine On"]},
	  "default_directives": "app",
	  "admission": {"max_inflight": -1},
	  "memory": {"max_heap_bytes": 1}
	}`))
	for _, e := range pluginconfig.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// admission.max_inflight: got -1, want 0 (off) or a positive integer
	// memory.max_heap_bytes: got 1, want 0 (off) or at least 16777216 (16 MiB): the rule sets alone take more
}
