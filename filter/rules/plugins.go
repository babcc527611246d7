package rules

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// CRS plugins, the way CRS v4 loads them: a plugin is a set of files named
// <name>-config.conf (its settings), <name>-before.conf (rules that run
// before the CRS's, exclusions at run time) and <name>-after.conf (rules
// after them, exclusions at configure time), with any data files they
// read. A build embeds the plugins of one folder
// (CRS_PLUGINS=<dir> go run mage.go build copies it to plugins/ here and
// sets the build tag crsplugins); without one it embeds none.
//
// "Include @owasp_crs/*.conf" then reads them in CRS's documented order:
// every *-config.conf, every *-before.conf, the CRS's rules, every
// *-after.conf, each group in name order. A single file is also
// readable as @crs-plugins/<file>, which is where their data files and
// relative includes resolve.

// PluginsDir is the folder name of the embedded plugin files.
const PluginsDir = "@crs-plugins"

// Plugin file suffixes, in the order CRS includes them around its rules.
const (
	pluginConfig = "-config.conf"
	pluginBefore = "-before.conf"
	pluginAfter  = "-after.conf"
)

// CheckPlugins reports the first file of a plugin folder that does not
// belong there: a .conf file whose name does not end in -config.conf,
// -before.conf or -after.conf, a file of another kind than .conf and
// .data, or a subfolder. A folder with no .conf file is refused too.
func CheckPlugins(fsys fs.FS) error {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return err
	}
	confs := 0
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir():
			return fmt.Errorf("CRS plugins: %s is a folder; put each plugin's files (its plugins/ folder) side by side in one folder", name)
		case strings.HasSuffix(name, ".conf"):
			if !strings.HasSuffix(name, pluginConfig) && !strings.HasSuffix(name, pluginBefore) && !strings.HasSuffix(name, pluginAfter) {
				return fmt.Errorf("CRS plugins: %s: a plugin's rule files are named <plugin>%s, <plugin>%s or <plugin>%s; rename it", name, pluginConfig, pluginBefore, pluginAfter)
			}
			confs++
		case strings.HasSuffix(name, ".data"):
		default:
			return fmt.Errorf("CRS plugins: %s: only a plugin's .conf and .data files go in the folder; remove it", name)
		}
	}
	if confs == 0 {
		return fmt.Errorf("CRS plugins: no .conf file; the folder holds a plugin's files (<plugin>%s, %s, %s)", pluginConfig, pluginBefore, pluginAfter)
	}
	return nil
}

// pluginNames returns the plugin files whose names end in suffix, in name
// order, as FS names them (@crs-plugins/<file>).
func pluginNames(plugins fs.FS, suffix string) []string {
	if plugins == nil {
		return nil
	}
	entries, _ := fs.ReadDir(plugins, ".")
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), suffix) {
			out = append(out, PluginsDir+"/"+e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// Plugins lists the plugin files the build embeds, in the order
// "Include @owasp_crs/*.conf" reads them (the CRS's rules go between the
// before and the after files).
func Plugins() []string {
	return FS.pluginFiles()
}

func (f rootFS) pluginFiles() []string {
	var out []string
	for _, s := range []string{pluginConfig, pluginBefore, pluginAfter} {
		out = append(out, pluginNames(f.plugins, s)...)
	}
	return out
}

// crsGlob is what "Include @owasp_crs/*.conf" reads: the plugins' config
// and before files, the rules, the plugins' after files.
func (f rootFS) crsGlob(rules []string) []string {
	if f.plugins == nil {
		return rules
	}
	out := append(pluginNames(f.plugins, pluginConfig), pluginNames(f.plugins, pluginBefore)...)
	out = append(out, rules...)
	return append(out, pluginNames(f.plugins, pluginAfter)...)
}

// WithPlugins is FS with the plugin files of plugins (a folder that
// CheckPlugins accepts) in place of the embedded ones.
func WithPlugins(plugins fs.FS) (fs.FS, error) {
	if err := CheckPlugins(plugins); err != nil {
		return nil, err
	}
	return rootFS{plugins: plugins}, nil
}

// pluginFile returns the plugin folder's path of a name under
// PluginsDir, and whether it is one.
func pluginFile(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, PluginsDir+"/")
	if !ok || !fs.ValidPath(rest) || strings.Contains(rest, "/") {
		return "", false
	}
	return path.Clean(rest), true
}
