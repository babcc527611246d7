// Command upstream is the upstream of the docker-compose e2e setup. It serves
// the wasmhost package's built-in upstream (wasmhost.EchoUpstream: /anything,
// /status/N, /delay/N, /reflect, ...) over plain HTTP, so that the e2e tests
// get the same answers behind Envoy as behind the in-process test host.
//
// Usage: upstream [-addr :8000]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wafguard/wafguard/wasmhost"
)

// maxBody bounds the request body the server reads.
const maxBody = 16 << 20

func main() {
	addr := flag.String("addr", ":8000", "listen address")
	flag.Parse()
	srv := &http.Server{
		Addr:              *addr,
		Handler:           handler{up: wasmhost.EchoUpstream{}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("upstream: listening on %s", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

// handler adapts a wasmhost.Upstream to net/http.
type handler struct {
	up wasmhost.Upstream
}

// ServeHTTP implements http.Handler.
func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
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
	resp, err := h.up.RoundTrip(r.Context(), &wasmhost.UpstreamRequest{Headers: headers, Body: body})
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
