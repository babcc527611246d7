package wasmhost

import (
	"context"
	"errors"
	"io"
	"sync"
)

// StreamingUpstream is an Upstream that takes the request the way Envoy's
// router does: Open is called as soon as the filter lets the request
// headers continue, and the body arrives on body as the filter releases
// it. When the filter answers locally later, or the stream is reset, body
// fails with ErrUpstreamReset and ctx is cancelled: the upstream sees the
// request aborted. Exchange uses Open instead of RoundTrip.
type StreamingUpstream interface {
	Upstream
	// Open sends r.Headers at once (r.Body is nil) and the body as it is
	// read from body; the response may carry a BodyReader, read as the
	// client side takes it.
	Open(ctx context.Context, r *UpstreamRequest, body *UpstreamBody) (*Response, error)
}

// ErrUpstreamReset is what an UpstreamBody returns once the stream was
// answered locally or reset before the request completed.
var ErrUpstreamReset = errors.New("wasmhost: the request was reset towards the upstream")

// UpstreamBody is the request body as the filter releases it. Each Read
// returns at most one released chunk, so a reader that writes what it
// reads passes the chunks on as they come. Writes come from the stream
// under the VM lock and never block.
type UpstreamBody struct {
	mu       sync.Mutex
	chunks   [][]byte
	queued   int
	eof      bool
	err      error
	trailers [][2]string
	ready    chan struct{}
}

func newUpstreamBody() *UpstreamBody { return &UpstreamBody{ready: make(chan struct{}, 1)} }

// Read implements io.Reader: released bytes, then io.EOF once the request
// completed, or ErrUpstreamReset once it was aborted (data not read yet is
// dropped, as a reset drops it).
func (b *UpstreamBody) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		if b.err != nil {
			err := b.err
			b.mu.Unlock()
			return 0, err
		}
		if len(b.chunks) > 0 {
			n := copy(p, b.chunks[0])
			if n == len(b.chunks[0]) {
				b.chunks[0] = nil
				b.chunks = b.chunks[1:]
			} else {
				b.chunks[0] = b.chunks[0][n:]
			}
			b.queued -= n
			b.mu.Unlock()
			return n, nil
		}
		if b.eof {
			b.mu.Unlock()
			return 0, io.EOF
		}
		b.mu.Unlock()
		<-b.ready
	}
}

// Complete reports whether the whole body is already known, and its
// length (what is still to read): true for a request that ended on its
// headers, or whose body was released whole before Open looked.
func (b *UpstreamBody) Complete() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued, b.eof && b.err == nil
}

// Trailers returns the request trailers released with the end of the
// body; valid once Read returned io.EOF.
func (b *UpstreamBody) Trailers() [][2]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.trailers
}

func (b *UpstreamBody) wake() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

func (b *UpstreamBody) push(c []byte) {
	b.mu.Lock()
	b.chunks = append(b.chunks, c)
	b.queued += len(c)
	b.mu.Unlock()
	b.wake()
}

func (b *UpstreamBody) end(trailers [][2]string) {
	b.mu.Lock()
	b.eof, b.trailers = true, trailers
	b.mu.Unlock()
	b.wake()
}

func (b *UpstreamBody) abort() {
	b.mu.Lock()
	if !b.eof && b.err == nil {
		b.err = ErrUpstreamReset
		b.chunks, b.queued = nil, 0
	}
	b.mu.Unlock()
	b.wake()
}

// upFeed is a stream's request towards a StreamingUpstream.
type upFeed struct {
	up      StreamingUpstream
	ctx     context.Context
	cancel  context.CancelFunc
	body    *UpstreamBody
	started bool // Open was called
	closed  bool // the request completed or was aborted
	aborted bool
	sent    int // bytes of req.out pushed
	done    chan struct{}
	resp    *Response
	err     error
}

// syncUpstream passes on to the upstream what the filter has released
// since the last call: it opens the request when the headers went out,
// pushes new body bytes, ends the body when the request completed, and
// aborts the request after a local reply or a reset, or when the response
// ended before the request did (the router resets it then:
// Router::Filter::onUpstreamComplete, with
// allow_multiplexed_upstream_half_close off by default). Called under the
// VM lock wherever either side can change.
func (s *Stream) syncUpstream() {
	f := s.up
	if f == nil || f.closed {
		return
	}
	if s.req.aborted || s.reset || s.ended || s.responseEnded() && !s.req.complete {
		f.closed, f.aborted = true, true
		if f.started {
			f.body.abort()
			f.cancel()
		}
		return
	}
	if !s.req.hdrsOut {
		return
	}
	if len(s.req.out) > f.sent {
		// req.out only grows: the pushed slice is not written again.
		f.body.push(s.req.out[f.sent:len(s.req.out):len(s.req.out)])
		f.sent = len(s.req.out)
	}
	if s.req.complete {
		f.closed = true
		f.body.end(copyHeaders(s.req.trlOut))
	}
	if !f.started {
		f.started = true
		r := &UpstreamRequest{Headers: copyHeaders(s.reqHdrs)}
		go func() {
			f.resp, f.err = f.up.Open(f.ctx, r, f.body)
			close(f.done)
			s.signal()
		}()
	}
}

// upstreamDone reports whether the upstream answered (or failed).
func (f *upFeed) upstreamDone() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// finish ends the upstream side when the exchange returns: a request not
// completed is aborted, and the response body is closed.
func (s *Stream) finishUpstream() {
	f := s.up
	s.locked(func() bool {
		if !f.closed {
			f.closed, f.aborted = true, true
			f.body.abort()
		}
		return true
	})
	f.cancel()
	if f.started {
		<-f.done
		if f.resp != nil && f.resp.BodyReader != nil {
			f.resp.BodyReader.Close()
		}
	}
}
