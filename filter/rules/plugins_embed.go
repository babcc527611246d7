//go:build crsplugins

package rules

import (
	"embed"
	"io/fs"
)

// pluginsFiles are the CRS plugin files the build copied to plugins/
// (CRS_PLUGINS=<dir> go run mage.go build).
//
//go:embed plugins
var pluginsFiles embed.FS

// embeddedPlugins is the folder of the embedded plugin files.
func embeddedPlugins() fs.FS {
	sub, err := fs.Sub(pluginsFiles, "plugins")
	if err != nil {
		panic(err) // "plugins" is the embedded folder
	}
	return sub
}
