package wasmhost

import (
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// ServeUpstream serves an Upstream over HTTP: each request, its body read
// whole (up to maxBody bytes), goes to up as the host would send it, and
// its response back. The e2e upstream and the tests that put a real Envoy
// in front of the built-in upstream use it.
func ServeUpstream(up Upstream, maxBody int64) http.Handler {
	return upstreamServer{up: up, maxBody: maxBody}
}

type upstreamServer struct {
	up      Upstream
	maxBody int64
}

func (h upstreamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, h.maxBody))
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	headers := [][2]string{{":method", r.Method}, {":path", r.RequestURI}, {":authority", r.Host}, {":scheme", "http"}}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			headers = append(headers, [2]string{strings.ToLower(k), v})
		}
	}
	resp, err := h.up.RoundTrip(r.Context(), &UpstreamRequest{Headers: headers, Body: body})
	if err != nil {
		if r.Context().Err() == nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
		}
		return
	}
	size := 0
	for _, c := range resp.Body {
		size += len(c)
	}
	for _, p := range resp.Headers {
		if p[0] == "content-length" || p[0] == "transfer-encoding" || strings.HasPrefix(p[0], ":") {
			continue
		}
		w.Header().Add(p[0], p[1])
	}
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(resp.Status)
	for _, c := range resp.Body {
		w.Write(c)
	}
}
