package wasmhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Handler serves HTTP through a Pool: each request is one Exchange on the
// next VM, with the upstream behind it.
type Handler struct {
	Pool     *Pool
	Upstream Upstream
	// ChunkSize is the size of the request body chunks given to the
	// plugin; 0 means 64 KiB.
	ChunkSize int
	conns     atomic.Uint64
}

type connIDKey struct{}

// ConnContext gives every accepted connection an id for the
// connection_id property; set it as http.Server.ConnContext.
func (h *Handler) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connIDKey{}, h.conns.Add(1))
}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true, "upgrade": true, "te": true}

// ServeHTTP implements http.Handler. Request headers reach the plugin the
// way Envoy's HCM hands them over: pseudo-headers first, keys lower-cased,
// with x-forwarded-proto and x-request-id added when missing. Go's net/http
// does not keep header order, so the other headers come sorted by name.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	hdrs := [][2]string{{":authority", r.Host}, {":path", r.RequestURI}, {":method", r.Method}, {":scheme", scheme}}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if hopHeaders[lk] {
			continue
		}
		for _, v := range r.Header[k] {
			hdrs = append(hdrs, [2]string{lk, v})
		}
	}
	if len(r.TransferEncoding) > 0 {
		hdrs = append(hdrs, [2]string{"transfer-encoding", strings.Join(r.TransferEncoding, ",")})
	}
	if r.Header.Get("X-Forwarded-Proto") == "" {
		hdrs = append(hdrs, [2]string{"x-forwarded-proto", scheme})
	}
	if r.Header.Get("X-Request-Id") == "" {
		hdrs = append(hdrs, [2]string{"x-request-id", newRequestID()})
	}
	req := &Request{Headers: hdrs, ChunkSize: h.ChunkSize, Info: StreamInfo{SourceAddress: r.RemoteAddr, Protocol: protocolName(r)}}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		req.Info.DestinationAddress = a.String()
	}
	if id, ok := r.Context().Value(connIDKey{}).(uint64); ok {
		req.Info.ConnectionID = id
	}
	rc := http.NewResponseController(w)
	stopped := false
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		req.BodyReader, req.Live, req.ContentLength = r.Body, true, r.ContentLength
		// The response may go out while the body still arrives, as
		// Envoy streams both ways: Go's server would otherwise read the
		// rest of the body before it writes the response headers.
		_ = rc.EnableFullDuplex()
		req.StopBody = func() {
			stopped = true
			_ = rc.SetReadDeadline(time.Now())
		}
	}
	dn := &httpDownstream{w: w}
	req.Downstream = dn
	res := h.Pool.Exchange(r.Context(), req, h.Upstream)
	if stopped {
		// The stream ended while the client was still sending. Envoy
		// closes such an HTTP/1 connection after its delayed close
		// timeout (1 s), reading meanwhile what the client still sends,
		// so that the client reads the response rather than a reset: Go's
		// server reads on after the handler for as long as this deadline
		// allows.
		_ = rc.SetReadDeadline(time.Now().Add(time.Second))
	}
	if res.Reset || res.Status == 0 {
		// A reset: the client sees the connection close, after whatever
		// part of the response already went out.
		panic(http.ErrAbortHandler)
	}
	if !dn.started {
		dn.Headers(res.Status, res.Headers, res.Body, true)
	}
}

// httpDownstream writes the response to the client as the filter releases
// it: a response released whole gets its exact Content-Length; one that
// streams keeps the upstream's Content-Length, or goes out chunked.
type httpDownstream struct {
	w       http.ResponseWriter
	started bool
}

func (d *httpDownstream) Headers(status int, headers [][2]string, body []byte, complete bool) {
	d.started = true
	wh := d.w.Header()
	for _, p := range headers {
		if p[0] == "connection" && p[1] == "close" {
			// The request had not ended (Downstream.Headers): the
			// connection closes after this response.
			wh.Set("Connection", "close")
			continue
		}
		if hopHeaders[p[0]] || p[0] == "transfer-encoding" || p[0] == "content-length" || strings.HasPrefix(p[0], ":") {
			continue
		}
		wh.Add(p[0], p[1])
	}
	if complete {
		wh.Set("Content-Length", strconv.Itoa(len(body)))
	} else if v, ok := headerGet(headers, "content-length"); ok {
		wh.Set("Content-Length", v)
	}
	d.w.WriteHeader(status)
	if len(body) > 0 {
		_, _ = d.w.Write(body)
	}
	if !complete {
		_ = http.NewResponseController(d.w).Flush()
	}
}

func (d *httpDownstream) Data(b []byte) {
	_, _ = d.w.Write(b)
	_ = http.NewResponseController(d.w).Flush()
}

func protocolName(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "HTTP/2"
	case 3:
		return "HTTP/3"
	}
	return r.Proto
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// HTTPUpstream forwards requests to a base URL, like an Envoy cluster with
// one host: the path and :authority come from the request.
type HTTPUpstream struct {
	Base   *url.URL
	Client *http.Client
}

// NewHTTPUpstream returns an upstream for base, for example
// "http://127.0.0.1:9000". Redirects are returned, not followed.
func NewHTTPUpstream(base string) (*HTTPUpstream, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream %q: want an absolute http:// or https:// URL", base)
	}
	return &HTTPUpstream{Base: u, Client: &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 64},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: 60 * time.Second,
	}}, nil
}

// RoundTrip implements Upstream: the whole request, the whole response.
func (u *HTTPUpstream) RoundTrip(ctx context.Context, r *UpstreamRequest) (*Response, error) {
	req, err := u.request(ctx, r.Headers, bytes.NewReader(r.Body), int64(len(r.Body)))
	if err != nil {
		return nil, err
	}
	resp, err := u.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := responseOf(resp)
	if len(body) > 0 {
		out.Body = [][]byte{body}
	}
	return out, nil
}

// Open implements StreamingUpstream: the request goes out as soon as its
// headers are released, with the request's Content-Length (chunked when
// it has none and the body is not whole yet), and each released chunk is
// written as it comes; a reset cuts the request off. The response body is
// handed over as it arrives.
func (u *HTTPUpstream) Open(ctx context.Context, r *UpstreamRequest, body *UpstreamBody) (*Response, error) {
	var rd io.Reader = body
	size := int64(-1)
	if n, whole := body.Complete(); whole {
		size = int64(n)
		if n == 0 {
			rd = http.NoBody
		}
	} else if v, ok := headerGet(r.Headers, "content-length"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			size = n
		}
	}
	req, err := u.request(ctx, r.Headers, rd, size)
	if err != nil {
		return nil, err
	}
	resp, err := u.Client.Do(req)
	if err != nil {
		return nil, err
	}
	out := responseOf(resp)
	if resp.ContentLength == 0 || req.Method == http.MethodHead {
		resp.Body.Close()
	} else {
		out.BodyReader = resp.Body
	}
	return out, nil
}

func (u *HTTPUpstream) request(ctx context.Context, headers [][2]string, body io.Reader, size int64) (*http.Request, error) {
	method, _ := headerGet(headers, ":method")
	path, _ := headerGet(headers, ":path")
	authority, _ := headerGet(headers, ":authority")
	// The path goes out verbatim (URL.Opaque), so malformed escapes that
	// WAF tests send reach the upstream unchanged.
	target := &url.URL{Scheme: u.Base.Scheme, Host: u.Base.Host, Opaque: strings.TrimSuffix(u.Base.Path, "/") + path}
	req, err := http.NewRequestWithContext(ctx, method, u.Base.String(), body)
	if err != nil {
		return nil, err
	}
	req.URL = target
	req.Host = authority
	for _, p := range headers {
		if strings.HasPrefix(p[0], ":") || hopHeaders[p[0]] || p[0] == "content-length" || p[0] == "transfer-encoding" {
			continue
		}
		req.Header.Add(p[0], p[1])
	}
	req.ContentLength = size
	return req, nil
}

func responseOf(resp *http.Response) *Response {
	out := &Response{Status: resp.StatusCode}
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if hopHeaders[lk] || lk == "transfer-encoding" {
			continue
		}
		for _, v := range resp.Header[k] {
			out.Headers = append(out.Headers, [2]string{lk, v})
		}
	}
	return out
}
