package bench

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wafguard/wafguard/filter/rules"
)

// Paths of Debian's nginx and ModSecurity v3 connector packages.
const (
	ModSecurityModule  = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
	debianUnicodeMap   = "/etc/nginx/unicode.mapping"
	nginxPackage       = "nginx"
	modSecurityPackage = "libnginx-mod-http-modsecurity"
)

// EnsureNginx installs Debian's nginx and, when modsec is set, its
// ModSecurity v3 module with apt-get, unless they are present. It runs
// `apt-get update` once before installing. log gets one line per step.
func EnsureNginx(modsec bool, log func(string)) (string, error) {
	bin := nginxBinary()
	_, binErr := os.Stat(bin)
	_, modErr := os.Stat(ModSecurityModule)
	if binErr == nil && (!modsec || modErr == nil) {
		return bin, nil
	}
	pkgs := []string{nginxPackage}
	if modsec {
		pkgs = append(pkgs, modSecurityPackage)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("nginx or its ModSecurity module is missing and installing them needs root: run `apt-get install %s`", strings.Join(pkgs, " "))
	}
	log("installing " + strings.Join(pkgs, " ") + " with apt-get")
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", args[0], err, tail(out, 2000))
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("nginx still missing at %s after apt-get install", bin)
	}
	return bin, nil
}

// nginxBinary is nginx on the PATH, else Debian's /usr/sbin/nginx (not
// on a user's PATH), which may not exist.
func nginxBinary() string {
	if bin, err := exec.LookPath("nginx"); err == nil {
		return bin
	}
	return "/usr/sbin/nginx"
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// chainedWithoutActions matches a chained SecRule on one line with a
// variable and an operator only, as the CRS writes rules 949111 and
// 959111. ModSecurity v3.0.9's parser then reads the next
// line as the action list and fails ("Expecting an action").
var chainedWithoutActions = regexp.MustCompile(`(?m)^(\s*SecRule\s+\S+\s+"[^"]*")[ \t]*$`)

// ctlXMLAttributes matches a ctl removal of the XML attribute targets
// (`ctl:ruleRemoveTargetByTag=attack-xss;XML://@*`), which ModSecurity
// v3.0.9's parser refuses ("Expecting an action, got: @*"). The CRS's rule
// 901181 makes these removals only while tx.crs_xml_attr_inspect is 0, and
// the setup WriteCRS writes sets it to 1, so the rule never acts: its
// removals are written with the target XML:/*, which the parser reads, and
// ModSecurity evaluates the same rules the plugin does.
var ctlXMLAttributes = regexp.MustCompile(`(ctl:ruleRemoveTargetBy(?:Id|Tag|Msg)=[^;,"\s]+);XML://@\*`)

// attrInspectOn is the setup's setting that keeps rule 901181 from acting.
const attrInspectOn = "setvar:'tx.crs_xml_attr_inspect=1'"

// WriteCRS writes the CRS release the plugin embeds (package rules) for
// ModSecurity into dir: crs-setup.conf (the plugin's setup: the release's
// template and XML attribute inspection on) and rules/ with every *.conf and
// *.data file. It returns how many rule files it rewrote for ModSecurity's
// parser (chainedWithoutActions, ctlXMLAttributes).
func WriteCRS(dir string) (int, error) {
	ruleDir := filepath.Join(dir, "rules")
	if err := os.MkdirAll(ruleDir, 0o755); err != nil {
		return 0, err
	}
	example, err := fs.ReadFile(rules.FS, rules.CRSSetupExample)
	if err != nil {
		return 0, err
	}
	own, err := fs.ReadFile(rules.FS, rules.CRSSetup)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(string(own), attrInspectOn) {
		return 0, fmt.Errorf("CRS: %s does not set %s, which writing the XML attribute removals for ModSecurity relies on", rules.CRSSetup, attrInspectOn)
	}
	include := "Include " + rules.CRSSetupExample + "\n"
	if !strings.Contains(string(own), "\n"+include) {
		return 0, fmt.Errorf("CRS: %s does not include %s", rules.CRSSetup, rules.CRSSetupExample)
	}
	setup := strings.Replace(string(own), include, string(example)+"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "crs-setup.conf"), []byte(setup), 0o644); err != nil {
		return 0, err
	}
	entries, err := fs.ReadDir(rules.FS, rules.CRSDir)
	if err != nil {
		return 0, err
	}
	rewritten, files := 0, 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".conf") || strings.HasSuffix(name, ".data")) {
			continue
		}
		b, err := fs.ReadFile(rules.FS, path.Join(rules.CRSDir, name))
		if err != nil {
			return 0, err
		}
		if strings.HasSuffix(name, ".conf") {
			fixed := chainedWithoutActions.ReplaceAll(b, []byte(`$1 "t:none"`))
			fixed = ctlXMLAttributes.ReplaceAll(fixed, []byte(`$1;XML:/*`))
			if string(fixed) != string(b) {
				rewritten++
			}
			b = fixed
		}
		if err := os.WriteFile(filepath.Join(ruleDir, name), b, 0o644); err != nil {
			return 0, err
		}
		files++
	}
	if files < 20 {
		return 0, fmt.Errorf("CRS: wrote %d rule files of CRS %s, want at least 20", files, rules.CRSVersion)
	}
	return rewritten, nil
}

// modSecurityBase is ModSecurity's own recommended configuration
// (modsecurity.conf-recommended of ModSecurity v3, as Debian ships it in
// /etc/nginx/modsecurity.conf) with the engine on, no audit log (the same as
// the Coraza servers), no status engine (it phones home), and the temporary
// and data directories in the bench's work directory.
const modSecurityBase = `SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" \
     "id:'200000',phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" \
     "id:'200001',phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRequestBodyLimitAction Reject
SecRequestBodyJsonDepthLimit 512
SecArgumentsLimit 1000
SecRule &ARGS "@ge 1000" \
    "id:'200007', phase:2,t:none,log,deny,status:400,msg:'Failed to fully parse request body due to large argument count',severity:2"
SecRule REQBODY_ERROR "!@eq 0" \
    "id:'200002', phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}',severity:2"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:'200003',phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation'"
SecRule MULTIPART_UNMATCHED_BOUNDARY "@eq 1" \
    "id:'200004',phase:2,t:none,log,deny,msg:'Multipart parser detected a possible unmatched boundary.'"
SecPcreMatchLimit 1000
SecPcreMatchLimitRecursion 1000
SecRule TX:/^MSC_/ "!@streq 0" \
    "id:'200005',phase:2,t:none,deny,msg:'ModSecurity internal error flagged: %{MATCHED_VAR_NAME}'"
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml
SecResponseBodyLimit 524288
SecResponseBodyLimitAction ProcessPartial
SecTmpDir {{dir}}
SecDataDir {{dir}}
SecAuditEngine Off
SecArgumentSeparator &
SecCookieFormat 0
SecStatusEngine Off
`

// WriteModSecurity writes ModSecurity's base config and the CRS into dir and
// returns the path of the file to give to modsecurity_rules_file.
func WriteModSecurity(dir string) (string, int, error) {
	rewritten, err := WriteCRS(dir)
	if err != nil {
		return "", 0, err
	}
	base := strings.ReplaceAll(modSecurityBase, "{{dir}}", dir)
	if _, err := os.Stat(debianUnicodeMap); err == nil {
		base += "SecUnicodeMapFile " + debianUnicodeMap + " 20127\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "modsecurity.conf"), []byte(base), 0o644); err != nil {
		return "", 0, err
	}
	main := fmt.Sprintf("Include %s\nInclude %s\nInclude %s\n",
		filepath.Join(dir, "modsecurity.conf"), filepath.Join(dir, "crs-setup.conf"), filepath.Join(dir, "rules", "*.conf"))
	mainPath := filepath.Join(dir, "main.conf")
	return mainPath, rewritten, os.WriteFile(mainPath, []byte(main), 0o644)
}

// NginxConfig returns an nginx.conf for workers worker processes that proxies everything
// to upstream (host:port) over kept-alive connections, with ModSecurity when
// modsecRules is not empty. Bodies up to 64 KB stay in memory, so no server
// writes a request body to disk.
func NginxConfig(dir, listen, upstream, modsecRules string, workers int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "daemon off;\nmaster_process on;\nworker_processes %d;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\n", max(workers, 1), dir, dir)
	if os.Geteuid() == 0 {
		// The worker reads and writes the work directory that root created.
		b.WriteString("user root;\n")
	}
	if modsecRules != "" {
		fmt.Fprintf(&b, "load_module %s;\n", ModSecurityModule)
	}
	b.WriteString("events { worker_connections 4096; }\nhttp {\n")
	b.WriteString("  access_log off;\n  default_type text/plain;\n  client_body_buffer_size 64k;\n  client_max_body_size 1m;\n")
	b.WriteString("  keepalive_requests 1000000;\n  keepalive_timeout 75s;\n")
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "  %s_temp_path %s/%s_temp;\n", t, dir, t)
	}
	fmt.Fprintf(&b, "  upstream backend {\n    server %s;\n    keepalive 64;\n  }\n", upstream)
	fmt.Fprintf(&b, "  server {\n    listen %s;\n", listen)
	if modsecRules != "" {
		fmt.Fprintf(&b, "    modsecurity on;\n    modsecurity_rules_file %s;\n", modsecRules)
	}
	b.WriteString("    location / {\n      proxy_pass http://backend;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n    }\n  }\n}\n")
	return b.String()
}
