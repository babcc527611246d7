package filter

import (
	"strconv"
	"strings"
)

// corazaDefaultRequestBodyLimit is Coraza v3.8.1's SecRequestBodyLimit when
// no directive sets it (internal/corazawaf/waf.go, NewWAF).
const corazaDefaultRequestBodyLimit = 134217728

// inMemoryLimitDirective returns the directive to append to a rule set so
// that SecRequestBodyInMemoryLimit is not below SecRequestBodyLimit, or ""
// when it already is not.
//
// The plugin is built with no_fs_access: Coraza cannot spill a body past the
// in-memory limit to a file, and WriteRequestBody then fails with
// "memoryLimit reached while writing" (internal/corazawaf/body_buffer.go:
// "TinyGo MemoryLimit should be equal to Limit"), so the filter would answer
// 500 to every body between the two limits. @recommended-conf sets 131072
// bytes in memory and 13107200 in total. Raising the in-memory limit keeps
// the total limit, and its action, in charge; Envoy's buffer limit bounds
// the memory anyway. coraza-proxy-wasm sets both limits equal in its
// default configuration for the same reason (its PR #243).
//
// The values are found the way Coraza reads them: the last occurrence wins,
// and an Include of one embedded file is read in place. Globs are skipped:
// they only include the CRS rule files, which set neither directive.
func inMemoryLimitDirective(directives string) string {
	limit, inMemory := scanBodyLimits(directives, 0)
	if limit == 0 {
		limit = corazaDefaultRequestBodyLimit
	}
	if inMemory == 0 || inMemory >= limit {
		return ""
	}
	return "SecRequestBodyInMemoryLimit " + strconv.FormatInt(limit, 10)
}

// scanBodyLimits returns the last SecRequestBodyLimit and
// SecRequestBodyInMemoryLimit values in text, 0 for those absent.
func scanBodyLimits(text string, depth int) (limit, inMemory int64) {
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		value := strings.Trim(fields[1], `"'`)
		switch strings.ToLower(fields[0]) {
		case "secrequestbodylimit":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				limit = n
			}
		case "secrequestbodyinmemorylimit":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				inMemory = n
			}
		case "include":
			if depth >= 4 || strings.ContainsAny(value, "*?[") {
				continue
			}
			b, err := rulesFS{}.ReadFile(value)
			if err != nil {
				continue // Coraza reports it when it compiles the set
			}
			l, m := scanBodyLimits(string(b), depth+1)
			if l != 0 {
				limit = l
			}
			if m != 0 {
				inMemory = m
			}
		}
	}
	return limit, inMemory
}
