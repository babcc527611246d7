package v8host

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"
)

// Handler is an HTTP reverse proxy through one VM: the bench's V8 server.
// Each request is read whole (up to the buffer limit), run through the
// plugin's request side, sent to the upstream when the plugin lets it
// through, and the answer run through the response side. Streams
// interleave between those steps as in one Envoy worker; each step runs
// alone on the VM.
type Handler struct {
	VM *VM
	// Upstream is the base URL every request is proxied to.
	Upstream string
	// BufferLimit bounds the request body read (default 1 MiB + 1: a
	// larger body reaches the plugin as over the limit).
	BufferLimit int64
	Client      *http.Client
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limit := h.BufferLimit
	if limit <= 0 {
		limit = 1<<20 + 1
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	ex := Exchange{
		Headers:     [][2]string{{":method", r.Method}, {":path", r.URL.RequestURI()}, {":authority", r.Host}, {":scheme", "http"}},
		Source:      r.RemoteAddr,
		Destination: "127.0.0.1:8080",
		Protocol:    r.Proto,
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			ex.Headers = append(ex.Headers, [2]string{strings.ToLower(k), v})
		}
	}
	if len(body) > 0 {
		ex.Body = [][]byte{body}
	}
	p, res, err := h.VM.Begin(ex)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if p != nil {
		res, err = p.Finish(h.forward(r, body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	if res.Reset || res.Status == 0 {
		panic(http.ErrAbortHandler) // the client sees a reset
	}
	for _, kv := range res.Headers {
		if kv[0] == "content-length" {
			continue
		}
		w.Header().Add(kv[0], kv[1])
	}
	w.WriteHeader(res.Status)
	w.Write(res.Body)
}

// forward asks the upstream; nil when it failed.
func (h *Handler) forward(r *http.Request, body []byte) *Response {
	c := h.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(h.Upstream, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host
	resp, err := c.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	out := &Response{Status: resp.StatusCode}
	for k, vs := range resp.Header {
		for _, v := range vs {
			out.Headers = append(out.Headers, [2]string{strings.ToLower(k), v})
		}
	}
	if len(b) > 0 {
		out.Body = [][]byte{b}
	}
	return out
}
