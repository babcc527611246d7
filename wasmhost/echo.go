package wasmhost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// EchoUpstream is the built-in upstream, a small httpbin/albedo stand-in:
//
//   - /anything[/...], /get, /post, /put, /patch, /delete, /headers:
//     200 with the request as JSON: method, path, args, headers, body.
//   - /status/N: status N, no body.
//   - /delay/N: waits N seconds (at most MaxDelay), then echoes.
//   - POST /reflect: answers with what the JSON body asks for, the albedo
//     protocol go-ftw uses: {"status":200,"headers":{"k":"v"},"body":"..."}
//     or "encodedBody"/"encoded_body" (base64); "logMessage" is ignored.
//   - anything else: 200 with no body (albedo's default).
type EchoUpstream struct {
	// MaxDelay bounds /delay/N; 0 means 10 s.
	MaxDelay time.Duration
}

type echoReply struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Args    map[string]any    `json:"args"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

type reflectSpec struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	EncodedBody  string            `json:"encodedBody"`
	EncodedBody2 string            `json:"encoded_body"`
	LogMessage   string            `json:"logMessage"`
}

// Open implements StreamingUpstream: the echo takes the request as soon
// as its headers continue, as Envoy's upstream does, reads the body as the
// filter releases it and answers once it has all of it, as RoundTrip
// would. A request reset before its end (a later local reply) gets no
// answer: Open returns ErrUpstreamReset.
func (e EchoUpstream) Open(ctx context.Context, r *UpstreamRequest, body *UpstreamBody) (*Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	req := *r
	req.Body, req.Trailers = data, body.Trailers()
	return e.RoundTrip(ctx, &req)
}

// RoundTrip implements Upstream.
func (e EchoUpstream) RoundTrip(ctx context.Context, r *UpstreamRequest) (*Response, error) {
	full, _ := headerGet(r.Headers, ":path")
	path, query, _ := strings.Cut(full, "?")
	switch {
	case strings.HasPrefix(path, "/status/"):
		n, err := strconv.Atoi(strings.TrimPrefix(path, "/status/"))
		if err != nil || n < 100 || n > 999 {
			return textResponse(400, "status: want /status/N with N in 100..999\n"), nil
		}
		return &Response{Status: n}, nil
	case strings.HasPrefix(path, "/delay/"):
		n, err := strconv.ParseFloat(strings.TrimPrefix(path, "/delay/"), 64)
		if err != nil || n < 0 {
			return textResponse(400, "delay: want /delay/N with N ≥ 0 seconds\n"), nil
		}
		max := e.MaxDelay
		if max <= 0 {
			max = 10 * time.Second
		}
		d := time.Duration(n * float64(time.Second))
		if d > max {
			d = max
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return echoResponse(r, path, query), nil
	case path == "/reflect":
		var spec reflectSpec
		if err := json.Unmarshal(r.Body, &spec); err != nil {
			return textResponse(400, "reflect: the body must be JSON like {\"status\":200,\"headers\":{},\"body\":\"\"}: "+err.Error()+"\n"), nil
		}
		if spec.Status == 0 {
			spec.Status = 200
		}
		body := []byte(spec.Body)
		for _, enc := range []string{spec.EncodedBody, spec.EncodedBody2} {
			if enc != "" {
				b, err := base64.StdEncoding.DecodeString(enc)
				if err != nil {
					return textResponse(400, "reflect: encodedBody is not base64: "+err.Error()+"\n"), nil
				}
				body = b
			}
		}
		resp := &Response{Status: spec.Status}
		for k, v := range spec.Headers {
			resp.Headers = append(resp.Headers, [2]string{strings.ToLower(k), v})
		}
		if len(body) > 0 {
			resp.Body = [][]byte{body}
			// Like a net/http server (CRS's own test backend is one), a
			// reflected body without a content-type gets the sniffed one:
			// Coraza inspects only response bodies whose type is in
			// SecResponseBodyMimeType, and the RESPONSE-95x tests rely on it.
			if _, ok := headerGet(resp.Headers, "content-type"); !ok {
				resp.Headers = append(resp.Headers, [2]string{"content-type", http.DetectContentType(body)})
			}
		}
		sortPairs(resp.Headers)
		return resp, nil
	case path == "/anything" || strings.HasPrefix(path, "/anything/") || path == "/get" || path == "/post" ||
		path == "/put" || path == "/patch" || path == "/delete" || path == "/headers":
		return echoResponse(r, path, query), nil
	}
	return &Response{Status: 200}, nil
}

func echoResponse(r *UpstreamRequest, path, query string) *Response {
	method, _ := headerGet(r.Headers, ":method")
	rep := echoReply{Method: method, Path: path, Args: map[string]any{}, Headers: map[string]string{}, Body: string(r.Body)}
	vals, _ := url.ParseQuery(query)
	for k, v := range vals {
		if len(v) == 1 {
			rep.Args[k] = v[0]
		} else {
			rep.Args[k] = v
		}
	}
	for _, p := range r.Headers {
		if strings.HasPrefix(p[0], ":") {
			if p[0] == ":authority" {
				rep.Headers["host"] = p[1]
			}
			continue
		}
		if old, ok := rep.Headers[p[0]]; ok {
			rep.Headers[p[0]] = old + "," + p[1]
		} else {
			rep.Headers[p[0]] = p[1]
		}
	}
	b, _ := json.Marshal(rep)
	b = append(b, '\n')
	return &Response{Status: 200, Headers: [][2]string{{"content-type", "application/json"}, {"content-length", strconv.Itoa(len(b))}}, Body: [][]byte{b}}
}

func textResponse(status int, s string) *Response {
	return &Response{Status: status, Headers: [][2]string{{"content-type", "text/plain"}, {"content-length", strconv.Itoa(len(s))}}, Body: [][]byte{[]byte(s)}}
}

func sortPairs(h [][2]string) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && h[j][0] < h[j-1][0]; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}
