package wasmhost

import (
	"context"
	"io"
	"strings"
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
	// ResponseAfter, when positive, makes a plain Upstream answer while
	// the request body is still arriving, as streaming and full-duplex
	// servers do: once the request headers went upstream and ResponseAfter
	// body chunks (reads of a BodyReader) have reached the stream, Exchange
	// calls RoundTrip with what the filter released by then and hands the
	// filter the response's headers and body chunks before the next
	// request chunk. The response's end (end of stream, or its trailers)
	// waits until the whole request has passed to the upstream, as a
	// server that answers as it reads ends once it has read the request;
	// with ResponseEndsEarly it comes with the rest, as from a server that
	// answers without reading the body. A StreamingUpstream answers when
	// it answers, whatever ResponseAfter says.
	ResponseAfter     int
	ResponseEndsEarly bool
	// StopBody, when set, is called when the stream needs no more of
	// BodyReader while a Read may be blocked in it (the stream ended
	// first); it must make that Read return, and Exchange waits for it.
	// Without it, a Read left blocked ends on its own and its data is
	// dropped. Handler sets the connection's read deadline.
	StopBody func()
}

// Downstream receives what the client gets, as it passes the filter.
// Exchange calls it from its own goroutine; a reset after Headers shows in
// the Result (Reset).
type Downstream interface {
	// Headers is called once, when the response headers pass the filter,
	// with the body released with them; complete says that the response
	// ended with that body. On HTTP/1 the headers end with "connection:
	// close" when the client had not finished its request then: Envoy's
	// HCM closes such a connection after the stream
	// (ConnectionManagerImpl::ActiveStream::encodeHeaders).
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
// on_delete). Events from the client and from the upstream reach the
// filter as they come, as Envoy's dispatcher delivers them: an upstream
// that answers while the request body is still arriving has its response
// handed to the filter then, between request chunks (see
// Request.ResponseAfter for a plain Upstream). A StreamingUpstream is
// opened as soon as the filter lets the request headers continue and gets
// the body as it is released, as Envoy's router streams it; a later local
// reply or reset aborts that request. Any other Upstream is called once
// the whole request has passed the filter, and not at all after a
// request-phase local reply. A stream left without an event longer than
// Options.StreamIdleTimeout gets Envoy's stream-idle-timeout answer (408,
// or a reset once the response started).
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
	d := &dispatcher{s: s, ctx: ctx, req: req, up: up, lastEOS: len(req.Trailers) == 0 && !req.Reset}
	if su, ok := up.(StreamingUpstream); ok {
		uctx, cancel := context.WithCancel(ctx)
		s.locked(func() bool {
			s.up = &upFeed{up: su, ctx: uctx, cancel: cancel, body: newUpstreamBody(), done: make(chan struct{})}
			return true
		})
		defer s.finishUpstream()
	}
	return d.run()
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
			if !s.clientDone && s.http1() {
				hdrs = append(hdrs, [2]string{"connection", "close"})
			}
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

// http1 reports whether the stream's protocol is HTTP/1.x.
func (s *Stream) http1() bool {
	return s.info.Protocol == "" || strings.HasPrefix(s.info.Protocol, "HTTP/1")
}
