package wasmhost

import (
	"context"
	"errors"
	"io"
	"strconv"
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
	// Live makes each Read of BodyReader one chunk, delivered at once, as
	// Envoy's codec hands data over as it arrives (a client's socket).
	// End of stream then comes with the ContentLength-th byte, or, when
	// ContentLength is not positive, as an empty frame at io.EOF.
	Live          bool
	ContentLength int64
	Trailers      [][2]string
	// Reset makes the client go away after sending the headers and body
	// without end of stream: the stream ends with no response.
	Reset bool
	Info  StreamInfo
	// Downstream, when set, receives the response as the filter releases
	// it, before the host waits for more input.
	Downstream Downstream
}

// Downstream receives what the client gets, as it passes the filter.
// Exchange calls it from its own goroutine; a reset after Headers shows in
// the Result (Reset).
type Downstream interface {
	// Headers is called once, when the response headers pass the filter,
	// with the body released with them; complete says that the response
	// ended with that body.
	Headers(status int, headers [][2]string, body []byte, complete bool)
	// Data is body released after the headers.
	Data(b []byte)
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
	Body [][]byte
	// BodyReader, when set, is the body instead of Body, read as it
	// comes (an HTTP upstream's response body); Exchange closes it.
	BodyReader io.ReadCloser
	Trailers   [][2]string
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
// on_delete). A StreamingUpstream is opened as soon as the filter lets the
// request headers continue and gets the body as it is released, as Envoy's
// router streams it; a later local reply or reset aborts that request. Any
// other Upstream is called once the whole request has passed the filter,
// and not at all after a request-phase local reply. A stream left paused
// longer than Options.StreamIdleTimeout gets Envoy's stream-idle-timeout
// answer (408, or a reset once the response started).
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
	s.dn = req.Downstream
	if su, ok := up.(StreamingUpstream); ok {
		uctx, cancel := context.WithCancel(ctx)
		s.locked(func() bool {
			s.up = &upFeed{up: su, ctx: uctx, cancel: cancel, body: newUpstreamBody(), done: make(chan struct{})}
			return true
		})
		defer s.finishUpstream()
	}
	hasBody := req.Body != nil || req.BodyReader != nil
	s.RequestHeaders(req.Headers, !hasBody && len(req.Trailers) == 0 && !req.Reset)
	lastEOS := len(req.Trailers) == 0 && !req.Reset
	switch {
	case req.BodyReader != nil && req.Live:
		if err := s.feedLive(req, lastEOS); err != nil {
			s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
		}
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
	var resp *Response
	var upErr error
	if s.up != nil {
		// The upstream answers while or after the request streams to it.
		f := s.up
		if !s.wait(ctx, func() bool { return f.upstreamDone() || s.reset || s.resp.complete || f.closed && !f.started }) {
			return s.Result()
		}
		if f.upstreamDone() && s.locked(func() bool { return !f.aborted }) {
			resp, upErr = f.resp, f.err
		}
	} else {
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
			resp, upErr = up.RoundTrip(ctx, ureq)
			if upErr == nil && resp == nil {
				upErr = errors.New("wasmhost: the upstream returned no response")
			}
		}
	}
	switch {
	case upErr != nil:
		// The router's own local reply goes through the encoder chain.
		s.locked(func() bool {
			s.sendLocalReply(&LocalReply{Status: 503, Details: "upstream_reset_before_response_started{connection_failure}",
				Body: []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure")})
			s.vm.flush()
			return true
		})
	case resp != nil:
		s.feedResponse(resp)
	}
	s.wait(ctx, func() bool { return s.resp.complete || s.reset })
	s.drainDownstream()
	return s.Result()
}

// drainDownstream hands the Downstream what the filter released towards
// the client since the last call. It runs on the exchange's goroutine
// before it waits for more input, so the client gets each part at the
// moment the host would otherwise block.
func (s *Stream) drainDownstream() {
	if s.dn == nil {
		return
	}
	var status int
	var hdrs [][2]string
	var data []byte
	first, complete := false, false
	s.vm.mu.Lock()
	if !s.reset && s.resp.hdrsOut {
		if !s.dnHeaders {
			s.dnHeaders, first = true, true
			status, hdrs = s.down.Status, copyHeaders(s.down.Headers)
		}
		if len(s.resp.out) > s.dnSent {
			// resp.out only grows: this part is not written again.
			data = s.resp.out[s.dnSent:len(s.resp.out):len(s.resp.out)]
			s.dnSent = len(s.resp.out)
		}
		complete = s.resp.complete
	}
	s.vm.mu.Unlock()
	switch {
	case first:
		s.dn.Headers(status, hdrs, data, complete)
	case len(data) > 0:
		s.dn.Data(data)
	}
}

// feedLive delivers each read of a live body as one chunk (the read
// buffer is reused: the stream copies what it holds).
func (s *Stream) feedLive(req *Request, lastEOS bool) error {
	size := req.ChunkSize
	if size <= 0 {
		size = 64 << 10
	}
	buf := make([]byte, size)
	var total int64
	for {
		s.drainDownstream()
		if s.requestStopped() {
			return nil
		}
		n, err := req.BodyReader.Read(buf)
		total += int64(n)
		last := errors.Is(err, io.EOF) || req.ContentLength > 0 && total >= req.ContentLength
		if n > 0 || last && lastEOS {
			s.RequestBody(buf[:n], last && lastEOS)
		}
		if last {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (s *Stream) feedReader(req *Request, lastEOS bool) error {
	size := req.ChunkSize
	if size <= 0 {
		size = 64 << 10
	}
	var cur []byte
	sent := false
	for {
		s.drainDownstream()
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
	h = append(h, [2]string{":status", strconv.Itoa(resp.Status)})
	h = append(h, resp.Headers...)
	stopped := func() bool { return s.locked(func() bool { return s.reset || s.resp.aborted }) }
	if resp.BodyReader != nil {
		s.ResponseHeaders(h, false)
		buf := make([]byte, 32<<10)
		for !stopped() {
			s.drainDownstream()
			n, err := resp.BodyReader.Read(buf)
			if n > 0 {
				s.ResponseBody(buf[:n], false)
			}
			if errors.Is(err, io.EOF) {
				if len(resp.Trailers) > 0 {
					s.ResponseTrailers(resp.Trailers)
				} else {
					s.ResponseBody(nil, true)
				}
				return
			}
			if err != nil {
				// The upstream went away mid-response.
				s.locked(func() bool { s.resetStream("upstream_reset_after_response_started"); return true })
				return
			}
		}
		return
	}
	hasBody := false
	for _, c := range resp.Body {
		if len(c) > 0 {
			hasBody = true
		}
	}
	s.ResponseHeaders(h, !hasBody && len(resp.Trailers) == 0)
	if hasBody {
		for i, c := range resp.Body {
			if stopped() {
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
		s.drainDownstream()
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
