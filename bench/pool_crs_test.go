package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corazahttp "github.com/corazawaf/coraza/v3/http"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/internal/benchreq"
)

// TestPool_crs sends every request of a pool through CRS in process: benign
// requests must pass and attacks must be blocked, the same check the bench
// makes against the native Coraza server before it measures anything.
func TestPool_crs(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles CRS; skipped in -short")
	}
	var matched []string
	waf, err := NewCRSWAF(func(m types.MatchedRule) {
		matched = append(matched, fmt.Sprintf("%d", m.Rule().ID()))
	})
	if err != nil {
		t.Fatal(err)
	}
	h := corazahttp.WrapHandler(waf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(UpstreamBody))
	}))
	pool, err := benchreq.NewPool(1, 400, benchreq.DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pool.Requests {
		r := &pool.Requests[i]
		req := httptest.NewRequest(r.Method, "http://"+benchreq.Host+r.Path, bytes.NewReader(r.Body))
		req.Header = r.HTTPHeader()
		req.Host = benchreq.Host
		req.RemoteAddr = "127.0.0.1:40000"
		matched = matched[:0]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		blocked := rec.Code == http.StatusForbidden
		if blocked == r.Class.Benign() || (rec.Code != 200 && rec.Code != 403) {
			body := ""
			if len(r.Body) > 0 {
				body = string(r.Body[:min(len(r.Body), 200)])
			}
			t.Errorf("request %d (%s) %s: got status %d, rules %s; body %s", i, r.Kind, r.Key(), rec.Code, strings.Join(matched, ","), body)
		}
	}
}
