package wasmhost

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"
)

// dispatcher drives one exchange the way Envoy's dispatcher drives a
// stream: one loop takes the next event from either side (a read of the
// client's body, the upstream's answer, a read of the response body, or
// a change the filter made from a tick or a deferred action) and hands it
// to the Stream, whose methods take the VM lock. Reads of a BodyReader and
// of a response's BodyReader run in goroutines of their own, one read at a
// time; scripted bodies are handed over in order without waiting. So an
// upstream that answers while the client is still sending has its response
// reach the filter then, between request chunks (notes 2.6).
type dispatcher struct {
	s       *Stream
	ctx     context.Context
	req     *Request
	up      Upstream
	lastEOS bool // the request's last body chunk ends it (no trailers, no reset)

	// The client's side.
	events  []bodyEvent // req.Body as the stream gets it
	next    int         // next of events
	fed     int         // body chunks or reads handed to the stream
	reqDone bool        // nothing more comes from the client (or the request stopped)
	rd      *reads      // reads of req.BodyReader

	// The upstream's side.
	asked    bool // the upstream's answer was taken (or dropped)
	resp     *Response
	hasBody  bool // resp.Body has a non-empty chunk
	hdrsDone bool
	chunk    int  // next of resp.Body
	bodyOver bool // every body chunk was handed over
	ended    bool // the response's end was handed over, or the response stopped
	rr       *reads

	timer *time.Timer
	idle  bool // the idle timeout fired once since the last event
}

type bodyEvent struct {
	chunk []byte
	eos   bool
}

func (d *dispatcher) run() Result {
	s, req := d.s, d.req
	hasBody := req.Body != nil || req.BodyReader != nil
	s.RequestHeaders(req.Headers, !hasBody && len(req.Trailers) == 0 && !req.Reset)
	switch {
	case req.BodyReader != nil && req.Live:
		d.rd = startReads(liveReads(req))
	case req.BodyReader != nil:
		d.rd = startReads(chunkReads(req))
	case req.Body != nil:
		if len(req.Body) == 0 && d.lastEOS {
			d.events = []bodyEvent{{nil, true}}
		}
		for i, c := range req.Body {
			d.events = append(d.events, bodyEvent{c, d.lastEOS && i == len(req.Body)-1})
		}
	}
	d.timer = time.NewTimer(s.vm.m.opts.StreamIdleTimeout)
	defer d.timer.Stop()
	defer d.stop()
	for {
		s.drainDownstream()
		if d.finished() {
			break
		}
		if d.step() {
			d.touch()
			continue
		}
		if !d.await() {
			break
		}
	}
	if req.Reset {
		// The client went away: the stream ends without a response.
		s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
		r := s.Result()
		r.Status = 0
		return r
	}
	s.drainDownstream()
	return s.Result()
}

// finished reports whether the stream is over for the exchange: the
// response is complete (whether or not the request is: Envoy's HCM then
// resets the stream, ConnectionManagerImpl::doEndStream), the stream was
// reset, or the client that goes away has sent all it sends.
func (d *dispatcher) finished() bool {
	if d.req.Reset && d.reqDone {
		return true
	}
	return d.s.locked(func() bool { return d.s.resp.complete || d.s.reset })
}

// step makes one step that needs no waiting: the upstream's answer once it
// is due, then the response's next event, then the client's next scripted
// event. It reports whether it did anything.
func (d *dispatcher) step() bool {
	return d.upstreamStep() || d.respStep() || d.reqStep()
}

// await waits for the next event from a goroutine, a tick, the client
// going away or the idle timeout. It returns false when the stream ended
// there.
func (d *dispatcher) await() bool {
	s := d.s
	if !d.reqDone {
		d.rd.request()
	}
	if !d.bodyOver && !d.ended {
		d.rr.request()
	}
	select {
	case <-s.wake:
	case x := <-d.rd.ch():
		d.requestRead(x)
		d.touch()
	case x := <-d.rr.ch():
		d.responseRead(x)
		d.touch()
	case <-d.ctx.Done():
		s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
		return false
	case <-d.timer.C:
		return d.idleTimeout()
	}
	return true
}

// idleTimeout is Envoy's stream idle timeout: the HCM answers 408 while
// the response has not started, else resets; a second expiry resets.
func (d *dispatcher) idleTimeout() bool {
	s := d.s
	if d.idle {
		s.locked(func() bool { s.resetStream("stream_idle_timeout"); return true })
		return false
	}
	d.idle = true
	s.locked(func() bool {
		if s.resp.hdrsOut {
			s.resetStream("stream_idle_timeout")
		} else {
			s.sendLocalReply(&LocalReply{Status: 408, Details: "stream_idle_timeout", Body: []byte("stream timeout")})
			s.vm.flush()
		}
		return true
	})
	d.timer.Reset(s.vm.m.opts.StreamIdleTimeout)
	return true
}

// touch restarts the idle timeout: an event came (Envoy resets the stream
// idle timer on each headers, data and trailers event).
func (d *dispatcher) touch() {
	d.timer.Reset(d.s.vm.m.opts.StreamIdleTimeout)
	d.idle = false
}

// reqStep hands the stream the client's next scripted body chunk, or its
// trailers once the body is over.
func (d *dispatcher) reqStep() bool {
	if d.reqDone {
		return false
	}
	s, req := d.s, d.req
	if s.requestStopped() {
		d.reqDone = true
		return false
	}
	if d.rd == nil && d.next < len(d.events) {
		e := d.events[d.next]
		d.next++
		s.RequestBody(e.chunk, e.eos)
		d.fed++
		return true
	}
	if d.rd != nil && !d.rd.finished {
		return false
	}
	if len(req.Trailers) > 0 && !req.Reset {
		s.RequestTrailers(req.Trailers)
	}
	d.reqDone = true
	return true
}

// requestRead hands the stream one read of the client's body: each read
// of a live body is a chunk; end of stream comes with the last one, or as
// an empty chunk at the end.
func (d *dispatcher) requestRead(x read) {
	d.rd.got(x)
	s := d.s
	if s.requestStopped() {
		d.reqDone = true
		return
	}
	if len(x.data) > 0 || x.last && d.lastEOS {
		s.RequestBody(x.data, x.last && d.lastEOS)
		d.fed++
	}
	if x.err != nil {
		d.reqDone = true
		s.locked(func() bool { s.resetStream("downstream_remote_disconnect"); return true })
	}
}

// upstreamStep takes the upstream's answer once it is due: a
// StreamingUpstream's when Open returns; a plain Upstream is called once
// the whole request has passed the filter, or earlier as
// Request.ResponseAfter says.
func (d *dispatcher) upstreamStep() bool {
	if d.asked {
		return false
	}
	s := d.s
	if f := s.up; f != nil {
		if !f.upstreamDone() {
			return false
		}
		d.asked = true
		if !s.locked(func() bool { return f.aborted }) {
			// An aborted request's answer is dropped with it.
			d.answer(f.resp, f.err)
		}
		return true
	}
	var ureq *UpstreamRequest
	s.locked(func() bool {
		if s.reset || s.req.aborted || s.replying {
			return false
		}
		early := d.req.ResponseAfter > 0 && d.fed >= d.req.ResponseAfter && s.req.hdrsOut
		if s.req.complete || early {
			ureq = &UpstreamRequest{Headers: copyHeaders(s.reqHdrs), Body: append([]byte(nil), s.req.out...), Trailers: copyHeaders(s.req.trlOut)}
		}
		return true
	})
	if ureq == nil {
		return false
	}
	d.asked = true
	resp, err := d.up.RoundTrip(d.ctx, ureq)
	if err == nil && resp == nil {
		err = errors.New("wasmhost: the upstream returned no response")
	}
	d.answer(resp, err)
	return true
}

// answer takes the upstream's response, or answers 503 for a failed
// upstream: the router's own local reply, which goes through the encoder
// chain.
func (d *dispatcher) answer(resp *Response, err error) {
	s := d.s
	if err != nil {
		s.locked(func() bool {
			s.sendLocalReply(&LocalReply{Status: 503, Details: "upstream_reset_before_response_started{connection_failure}",
				Body: []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure")})
			s.vm.flush()
			return true
		})
		return
	}
	d.resp = resp
	for _, c := range resp.Body {
		if len(c) > 0 {
			d.hasBody = true
		}
	}
}

// endDue reports whether the response may end now: a scripted early
// answer from a full-duplex server ends once the whole request has passed
// to it (or the request stopped).
func (d *dispatcher) endDue() bool {
	if d.req.ResponseAfter <= 0 || d.req.ResponseEndsEarly || d.s.up != nil {
		return true
	}
	s := d.s
	return s.locked(func() bool { return s.req.complete || s.req.aborted || s.reset })
}

// respStep hands the stream the response's next event: its headers, a
// scripted body chunk, or its end (trailers, or an empty chunk with end of
// stream) once the body is over and the end is due.
func (d *dispatcher) respStep() bool {
	r, s := d.resp, d.s
	if r == nil || d.ended {
		return false
	}
	if s.locked(func() bool { return s.reset || s.resp.aborted }) {
		d.ended = true
		return false
	}
	if !d.hdrsDone {
		d.hdrsDone = true
		h := make([][2]string, 0, len(r.Headers)+1)
		h = append(h, [2]string{":status", strconv.Itoa(r.Status)})
		h = append(h, r.Headers...)
		if r.BodyReader != nil {
			s.ResponseHeaders(h, false)
			d.rr = startReads(responseReads(r.BodyReader))
			return true
		}
		end := !d.hasBody && len(r.Trailers) == 0 && d.endDue()
		s.ResponseHeaders(h, end)
		d.ended = end
		d.bodyOver = !d.hasBody
		return true
	}
	if !d.bodyOver {
		if r.BodyReader != nil {
			return false // reads come from d.rr
		}
		i := d.chunk
		d.chunk++
		last := i == len(r.Body)-1
		eos := last && len(r.Trailers) == 0 && d.endDue()
		s.ResponseBody(r.Body[i], eos)
		d.ended, d.bodyOver = eos, last
		return true
	}
	if !d.endDue() {
		return false
	}
	d.ended = true
	if len(r.Trailers) > 0 {
		s.ResponseTrailers(r.Trailers)
	} else {
		s.ResponseBody(nil, true)
	}
	return true
}

// responseRead hands the stream one read of the response body; an error
// other than the end means the upstream went away mid-response.
func (d *dispatcher) responseRead(x read) {
	d.rr.got(x)
	s := d.s
	if s.locked(func() bool { return s.reset || s.resp.aborted }) {
		d.ended = true
		return
	}
	if len(x.data) > 0 {
		s.ResponseBody(x.data, false)
	}
	if x.err != nil {
		d.ended = true
		s.locked(func() bool { s.resetStream("upstream_reset_after_response_started"); return true })
		return
	}
	d.bodyOver = x.last
}

// stop ends the goroutines: a read of the client's body still blocked is
// stopped with Request.StopBody and waited for; a plain upstream's
// response body is closed (a StreamingUpstream's is closed by
// finishUpstream).
func (d *dispatcher) stop() {
	if d.rd != nil {
		blocked := d.rd.inflight
		d.rd.stop()
		if blocked && d.req.StopBody != nil {
			d.req.StopBody()
			<-d.rd.done
		}
	}
	d.rr.stop()
	if d.s.up == nil && d.resp != nil && d.resp.BodyReader != nil {
		d.resp.BodyReader.Close()
	}
}

// reads runs a reader in a goroutine of its own, one read per request, so
// that the dispatcher can wait for it beside other events. The goroutine
// owns the read buffer during a read; the dispatcher uses the data before
// it asks for the next read.
type reads struct {
	pull     chan struct{}
	out      chan read
	quit     chan struct{}
	done     chan struct{}
	inflight bool // a read was asked for and has not come back
	finished bool // the last read came back (the end, or an error)
}

type read struct {
	data []byte
	last bool // the end of the body
	err  error
}

func startReads(next func() read) *reads {
	r := &reads{pull: make(chan struct{}, 1), out: make(chan read), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.pull:
			case <-r.quit:
				return
			}
			x := next()
			select {
			case r.out <- x:
			case <-r.quit:
				return
			}
			if x.last || x.err != nil {
				return
			}
		}
	}()
	return r
}

// request asks for the next read unless one is under way or the reader
// is over.
func (r *reads) request() {
	if r != nil && !r.inflight && !r.finished {
		r.inflight = true
		r.pull <- struct{}{}
	}
}

// ch is the channel the next read comes on while one is under way; nil
// (never ready) otherwise.
func (r *reads) ch() <-chan read {
	if r == nil || !r.inflight {
		return nil
	}
	return r.out
}

func (r *reads) got(x read) {
	r.inflight = false
	r.finished = x.last || x.err != nil
}

func (r *reads) stop() {
	if r != nil {
		close(r.quit)
	}
}

func chunkSize(req *Request) int {
	if req.ChunkSize > 0 {
		return req.ChunkSize
	}
	return 64 << 10
}

// liveReads makes each Read of a live body one chunk (the buffer is
// reused: the stream copies what it keeps). The body ends at io.EOF or
// with the ContentLength-th byte.
func liveReads(req *Request) func() read {
	buf := make([]byte, chunkSize(req))
	var total int64
	return func() read {
		n, err := req.BodyReader.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) || req.ContentLength > 0 && total >= req.ContentLength {
			return read{data: buf[:n], last: true}
		}
		return read{data: buf[:n], err: err}
	}
}

// chunkReads reads a body in chunks of ChunkSize, one ahead, so that the
// last chunk carries the end of the body. A read error drops the partial
// chunk it came with.
func chunkReads(req *Request) func() read {
	size := chunkSize(req)
	var cur []byte
	var queue []read
	return func() read {
		for len(queue) == 0 {
			buf := make([]byte, size)
			n, err := io.ReadFull(req.BodyReader, buf)
			if n > 0 {
				if cur != nil {
					queue = append(queue, read{data: cur})
				}
				cur = buf[:n]
			}
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				queue = append(queue, read{data: cur, last: true})
			case err != nil:
				queue = append(queue, read{err: err})
			}
		}
		x := queue[0]
		queue = queue[1:]
		return x
	}
}

// responseReads reads a response body as it comes.
func responseReads(body io.Reader) func() read {
	buf := make([]byte, 32<<10)
	return func() read {
		n, err := body.Read(buf)
		if errors.Is(err, io.EOF) {
			return read{data: buf[:n], last: true}
		}
		return read{data: buf[:n], err: err}
	}
}
