//go:build !crsplugins

package rules

import "io/fs"

// embeddedPlugins is nil: this build embeds no CRS plugins (see
// plugins.go).
func embeddedPlugins() fs.FS { return nil }
