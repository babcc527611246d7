//go:build wafguard_poison

package scratch

// Poisoned: this build overwrites every region given up (the tag
// wafguard_poison).
const Poisoned = true
