package filter

import "fmt"

// CheckRuleSet compiles one directives_map entry natively, without a VM and
// without host calls, and returns the error the plugin would refuse to
// start with for it (nil when it compiles). Config checkers call it for
// every rule set to report all the broken ones, where NewPlugin stops at the
// first. The rule set is compiled as the plugin compiles it by default,
// with the rule preselection.
func CheckRuleSet(name string, directives []string) error {
	if _, err := compileWAF(directives, true); err != nil {
		return fmt.Errorf("directives_map[%q]: invalid SecLang, fix or remove the directive: %w", name, err)
	}
	return nil
}
