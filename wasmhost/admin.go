package wasmhost

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// AdminHandler serves the parts of Envoy's admin interface the tests use:
//
//   - /stats/prometheus: custom metrics in Envoy's Prometheus shape.
//   - /stats: "wasmcustom.<name>: <value>" lines.
//   - /ready: 200 "LIVE" once ready() is true, else 503 "PRE_INITIALIZING".
func AdminHandler(h *Host, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/stats/prometheus", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = h.WritePrometheus(w)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		names := h.MetricNames()
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			if v, ok := h.Metric(n); ok {
				fmt.Fprintf(&b, "wasmcustom.%s: %d\n", n, v)
			}
		}
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("PRE_INITIALIZING\n"))
			return
		}
		_, _ = w.Write([]byte("LIVE\n"))
	})
	return mux
}
