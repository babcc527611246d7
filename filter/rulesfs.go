package filter

import (
	"io/fs"

	"github.com/wafguard/wafguard/filter/rules"
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

// demoName is demoConf's name.
const demoName = "@demo-conf"

// rulesFS is the root file system of every WAF: the files of package
// rules (the embedded CRS release as @owasp_crs/..., @crs-setup-conf,
// @crs-setup.conf.example, @recommended-conf, @coraza.conf-recommended)
// and @demo-conf. Nothing is read from the host's disk, so Include and
// @pmFromFile only see these embedded files.
type rulesFS struct{}

// Open implements fs.FS.
func (rulesFS) Open(name string) (fs.File, error) {
	return rules.FS.Open(name)
}

// ReadFile implements fs.ReadFileFS; Coraza reads every file through it.
func (rulesFS) ReadFile(name string) ([]byte, error) {
	if name == demoName {
		return []byte(demoConf), nil
	}
	return rules.FS.ReadFile(name)
}

// ReadDir implements fs.ReadDirFS.
func (rulesFS) ReadDir(name string) ([]fs.DirEntry, error) {
	return rules.FS.ReadDir(name)
}

// Glob implements fs.GlobFS, for "Include @owasp_crs/*.conf".
func (rulesFS) Glob(pattern string) ([]string, error) {
	return rules.FS.Glob(pattern)
}
