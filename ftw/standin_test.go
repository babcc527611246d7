package ftw

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corazawaf/coraza/v3"
	txhttp "github.com/corazawaf/coraza/v3/http"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/filter/rules"
)

// The stand-in is the reference target: the same directives as the plugin
// (ftw-config.json), run by native Coraza behind its net/http middleware. A
// test that fails in the wasm run but passes here points at the filter or the
// host, not at Coraza or the CRS.

// pluginConfig is the part of the plugin configuration the stand-in reads.
type pluginConfig struct {
	DirectivesMap     map[string][]string `json:"directives_map"`
	DefaultDirectives string              `json:"default_directives"`
}

// loadDirectives returns the SecLang of the default directive set of a
// plugin configuration file.
func loadDirectives(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c pluginConfig
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	d, ok := c.DirectivesMap[c.DefaultDirectives]
	if !ok {
		t.Fatalf("%s: default_directives %q is not in directives_map", path, c.DefaultDirectives)
	}
	return strings.Join(d, "\n")
}

// startStandIn serves the directives of configPath with native Coraza and
// returns the target. Matched rules are written to the log file in Coraza's
// error-log shape, one line each, as the filter does.
func startStandIn(t testing.TB, configPath string) Target {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "ftw.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	w := bufio.NewWriter(f)
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().
		WithRootFS(rules.FS).
		WithDirectives(loadDirectives(t, configPath)).
		WithErrorCallback(func(r types.MatchedRule) {
			mu.Lock()
			defer mu.Unlock()
			w.WriteString(r.ErrorLog())
			w.WriteByte('\n')
			w.Flush()
		}))
	if err != nil {
		t.Fatalf("%s: %v", configPath, err)
	}
	s := httptest.NewServer(txhttp.WrapHandler(waf, upstream()))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	port, _ := strconv.Atoi(u.Port())
	return Target{Host: u.Hostname(), Port: port, LogFile: logPath}
}

// upstream answers like the host's built-in upstream: /reflect returns the
// response described by the JSON request body (the protocol of CRS's albedo
// backend), /status/N returns status N, anything else a short 200.
func upstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/reflect":
			var spec struct {
				Status      int               `json:"status"`
				Headers     map[string]string `json:"headers"`
				Body        string            `json:"body"`
				EncodedBody string            `json:"encodedBody"`
			}
			data, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(data, &spec); err != nil {
				http.Error(w, "reflect: "+err.Error(), http.StatusBadRequest)
				return
			}
			body := []byte(spec.Body)
			if spec.EncodedBody != "" {
				b, err := base64.StdEncoding.DecodeString(spec.EncodedBody)
				if err != nil {
					http.Error(w, "reflect: encodedBody: "+err.Error(), http.StatusBadRequest)
					return
				}
				body = b
			}
			w.Header().Set("Content-Type", "text/plain")
			for k, v := range spec.Headers {
				w.Header().Set(k, v)
			}
			if spec.Status == 0 {
				spec.Status = http.StatusOK
			}
			w.WriteHeader(spec.Status)
			w.Write(body)
		case strings.HasPrefix(r.URL.Path, "/status/"):
			code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			if err != nil || code < 100 || code > 599 {
				code = http.StatusBadRequest
			}
			w.WriteHeader(code)
		default:
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "ok\n")
		}
	})
}
