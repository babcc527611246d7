package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/corazawaf/coraza/v3"
	corazahttp "github.com/corazawaf/coraza/v3/http"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/filter/rules"
)

// CRSDirectives are the directives every WAF of the bench runs, in the file
// names of package rules: Coraza's recommended base config, blocking mode,
// no audit log (the wasm build has no file system to write one to), then
// the CRS setup and rules.
var CRSDirectives = []string{
	"Include @coraza.conf-recommended",
	"SecRuleEngine On",
	"SecAuditEngine Off",
	"Include @crs-setup-conf",
	"Include @owasp_crs/*.conf",
}

// PluginDirectives are CRSDirectives in the aliases of the plugin config
// (config/default.json).
var PluginDirectives = []string{
	"Include @recommended-conf",
	"SecRuleEngine On",
	"SecAuditEngine Off",
	"Include @crs-setup-conf",
	"Include @owasp_crs/*.conf",
}

// NewCRSWAF compiles CRSDirectives. onMatch, when not nil, gets every matched
// rule that logs.
func NewCRSWAF(onMatch func(types.MatchedRule)) (coraza.WAF, error) {
	cfg := coraza.NewWAFConfig().
		WithRootFS(rules.FS).
		WithDirectives(strings.Join(CRSDirectives, "\n"))
	if onMatch != nil {
		cfg = cfg.WithErrorCallback(onMatch)
	}
	return coraza.NewWAF(cfg)
}

// ServeCoraza runs the native Coraza server: the coraza/v3/http middleware
// around a reverse proxy to upstream, on listen, until ctx ends.
func ServeCoraza(ctx context.Context, listen, upstream string, onMatch func(types.MatchedRule)) error {
	up, err := url.Parse(upstream)
	if err != nil || up.Host == "" {
		return fmt.Errorf("upstream: got %q, want an absolute http URL", upstream)
	}
	waf, err := NewCRSWAF(onMatch)
	if err != nil {
		return fmt.Errorf("compiling CRS: %w", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: corazahttp.WrapHandler(waf, proxy), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
