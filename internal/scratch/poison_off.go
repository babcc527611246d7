//go:build !wafguard_poison

package scratch

// Poisoned: this build leaves regions given up as they are.
const Poisoned = false
