package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Request is one downstream request for Exchange.
type Request struct {
	// Headers are the request headers, pseudo-headers (":method", ":path",
	// ":authority", ":scheme") included.
	Headers [][2]string
	// Body is the body in the chunks it arrives in. Nil (and a nil
	// BodyReader) means the headers end the stream; an empty non-nil
	// slice gives one empty end-of-stream data frame.
	Body [][]byte
	// BodyReader, when set, is read in chunks of ChunkSize instead of Body.
	BodyReader io.Reader
	// ChunkSize is the read size for BodyReader; 0 means 64 KiB.
	ChunkSize int
	Trailers  [][2]string
	// Reset makes the client go away after sending the headers and body
	// without end of stream: the stream ends with no response.
	Reset bool
	Info  StreamInfo
}

// UpstreamRequest is what the filter released towards the upstream.
type UpstreamRequest struct {
	Headers  [][2]string
	Body     []byte
	Trailers [][2]string
}

// Response is an upstream response.
type Response struct {
	Status int
	// Headers without ":status".
	Headers [][2]string
	// Body chunks; nil or empty means no body (end of stream on headers).
	Body     [][]byte
	Trailers [][2]string
}

// Upstream answers requests that passed the filter.
type Upstream interface {
	RoundTrip(ctx context.Context, r *UpstreamRequest) (*Response, error)
}

// UpstreamFunc adapts a function to Upstream.
type UpstreamFunc func(ctx context.Context, r *UpstreamRequest) (*Response, error)

// RoundTrip implements Upstream.
func (f UpstreamFunc) RoundTrip(ctx context.Context, r *UpstreamRequest) (*Response, error) {
	return f(ctx, r)
}

// Exchange drives one request and its upstream response through a new
// stream with Envoy's semantics and ends the stream (on_log, on_done,
// on_delete). The upstream is called only once the whole request has passed
// the filter, and is not called at all after a request-phase local reply.
// A stream left paused longer than Options.StreamIdleTimeout gets Envoy's
// stream-idle-timeout answer (408, or a reset once the response started).
func (vm *VM) Exchange(ctx context.Context, req *Request, up Upstream) Result {
	s := vm.NewStream(req.Info)
	defer s.End()
	return s.exchange(ctx, req, up)
}

func (s *Stream) locked(f func() bool) bool {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return f()
}

func (s *Stream) requestStopped() bool {
	return s.locked(func() bool { return s.reset || s.req.aborted || s.down.LocalReply })
}

func (s *Stream) exchange(ctx context.Context, req *Request, up Upstream) Result {
	hasBody := req.Body != nil || req.BodyReader != nil
	s.RequestHeaders(req.Headers, !hasBody && len(req.Trailers) == 0 && !req.Reset)
	lastEOS := len(req.Trailers) == 0 && !req.Reset
	switch {
	case req.BodyReader != nil:
		if err := s.feedReader(req, lastEOS); err != nil {
			s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
		}
	case req.Body != nil:
		if len(req.Body) == 0 && lastEOS {
			s.RequestBody(nil, true)
		}
		for i, c := range req.Body {
			if s.requestStopped() {
				break
			}
			s.RequestBody(c, lastEOS && i == len(req.Body)-1)
		}
	}
	if len(req.Trailers) > 0 && !req.Reset && !s.requestStopped() {
		s.RequestTrailers(req.Trailers)
	}
	if req.Reset {
		// The client went away: the stream ends without a response.
		s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
		r := s.Result()
		r.Status = 0
		return r
	}
	reqDone := func() bool { return s.req.complete || s.reset || s.req.aborted || s.resp.complete }
	if !s.wait(ctx, reqDone) {
		return s.Result()
	}
	var ureq *UpstreamRequest
	s.locked(func() bool {
		if s.req.complete && !s.req.aborted && !s.reset && !s.replying {
			ureq = &UpstreamRequest{Headers: copyHeaders(s.reqHdrs), Body: append([]byte(nil), s.req.out...), Trailers: copyHeaders(s.req.trlOut)}
		}
		return true
	})
	if ureq != nil {
		resp, err := up.RoundTrip(ctx, ureq)
		if err != nil {
			// The router's own local reply goes through the encoder chain.
			s.locked(func() bool {
				s.sendLocalReply(&LocalReply{Status: 503, Details: "upstream_reset_before_response_started{connection_failure}",
					Body: []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure")})
				s.vm.flush()
				return true
			})
		} else {
			s.feedResponse(resp)
		}
	}
	s.wait(ctx, func() bool { return s.resp.complete || s.reset })
	return s.Result()
}

func (s *Stream) feedReader(req *Request, lastEOS bool) error {
	size := req.ChunkSize
	if size <= 0 {
		size = 64 << 10
	}
	var cur []byte
	sent := false
	for {
		buf := make([]byte, size)
		n, err := io.ReadFull(req.BodyReader, buf)
		if n > 0 {
			if cur != nil {
				if s.requestStopped() {
					return nil
				}
				s.RequestBody(cur, false)
				sent = true
			}
			cur = buf[:n]
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if s.requestStopped() {
		return nil
	}
	if cur != nil || !sent {
		if lastEOS || cur != nil {
			s.RequestBody(cur, lastEOS)
		}
	} else if lastEOS {
		s.RequestBody(nil, true)
	}
	return nil
}

func (s *Stream) feedResponse(resp *Response) {
	h := make([][2]string, 0, len(resp.Headers)+1)
	h = append(h, [2]string{":status", fmt.Sprint(resp.Status)})
	h = append(h, resp.Headers...)
	hasBody := false
	for _, c := range resp.Body {
		if len(c) > 0 {
			hasBody = true
		}
	}
	s.ResponseHeaders(h, !hasBody && len(resp.Trailers) == 0)
	if hasBody {
		for i, c := range resp.Body {
			if s.locked(func() bool { return s.reset || s.resp.aborted }) {
				return
			}
			s.ResponseBody(c, i == len(resp.Body)-1 && len(resp.Trailers) == 0)
		}
	}
	if len(resp.Trailers) > 0 {
		s.ResponseTrailers(resp.Trailers)
	}
}

// wait blocks until cond holds (checked under the VM lock) or the stream
// idle timeout passes; then Envoy's HCM answers 408 if the response has not
// started, else resets, and wait returns false.
func (s *Stream) wait(ctx context.Context, cond func() bool) bool {
	timer := time.NewTimer(s.vm.m.opts.StreamIdleTimeout)
	defer timer.Stop()
	timedOut := false
	for {
		if s.locked(cond) {
			return !timedOut
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
			return false
		case <-timer.C:
			if timedOut {
				s.locked(func() bool { s.resetStream("stream_idle_timeout"); return true })
				return false
			}
			timedOut = true
			s.locked(func() bool {
				if s.resp.hdrsOut {
					s.resetStream("stream_idle_timeout")
				} else {
					s.sendLocalReply(&LocalReply{Status: 408, Details: "stream_idle_timeout", Body: []byte("stream timeout")})
					s.vm.flush()
				}
				return true
			})
			timer.Reset(s.vm.m.opts.StreamIdleTimeout)
		}
	}
}
