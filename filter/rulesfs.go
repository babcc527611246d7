package filter

import (
	"io/fs"

	coreruleset "github.com/corazawaf/coraza-coreruleset/v4"
)

// demoConf is the file behind "Include @demo-conf": the engine in blocking
// mode with request and response bodies inspected, for trying the filter out.
const demoConf = `# @demo-conf: blocking mode, request and response bodies inspected.
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 1048576
SecRequestBodyLimitAction Reject
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecResponseBodyLimit 524288
SecResponseBodyLimitAction ProcessPartial
`

// fileAliases maps the names coraza-proxy-wasm configurations use to the
// files the coraza-coreruleset module ships.
var fileAliases = map[string]string{
	"@recommended-conf": "@coraza.conf-recommended",
	"@crs-setup-conf":   "@crs-setup.conf.example",
}

// rulesFS is the root file system of every WAF: the coraza-coreruleset files
// (@coraza.conf-recommended, @crs-setup.conf.example, @owasp_crs/...), their
// aliases, and @demo-conf. Nothing is read from the host's disk, so Include
// and @pmFromFile only see these embedded files.
type rulesFS struct{}

var crsFS = coreruleset.FS.(interface {
	fs.ReadFileFS
	fs.ReadDirFS
	fs.GlobFS
})

func resolveAlias(name string) string {
	if target, ok := fileAliases[name]; ok {
		return target
	}
	return name
}

// Open implements fs.FS.
func (rulesFS) Open(name string) (fs.File, error) {
	return crsFS.Open(resolveAlias(name))
}

// ReadFile implements fs.ReadFileFS; Coraza reads every file through it.
func (rulesFS) ReadFile(name string) ([]byte, error) {
	if name == "@demo-conf" {
		return []byte(demoConf), nil
	}
	return crsFS.ReadFile(resolveAlias(name))
}

// ReadDir implements fs.ReadDirFS.
func (rulesFS) ReadDir(name string) ([]fs.DirEntry, error) {
	return crsFS.ReadDir(name)
}

// Glob implements fs.GlobFS, for "Include @owasp_crs/*.conf".
func (rulesFS) Glob(pattern string) ([]string, error) {
	return crsFS.Glob(pattern)
}
