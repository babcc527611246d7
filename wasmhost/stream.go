package wasmhost

import (
	"strconv"
	"strings"
	"time"
)

// Action is what a stream callback returned (the raw proxy-wasm value:
// 0 Continue, 1 Pause for Go), or NotCalled when the event did not reach the
// plugin (held back, after a local reply, bypassed or on a failed VM).
type Action int32

// Actions.
const (
	NotCalled      Action = -1
	ActionContinue Action = 0
	ActionPause    Action = 1
)

// StreamInfo is the connection-level data behind the source.*,
// destination.*, connection.* and request.protocol properties.
type StreamInfo struct {
	SourceAddress      string // "ip:port"
	DestinationAddress string // "ip:port"
	Protocol           string // "HTTP/1.1" when empty
	ConnectionID       uint64
	// RouteName is the name of the route Envoy chose for the stream
	// (xds.route_name); empty for none.
	RouteName string
}

// LocalReply is a reply the plugin sent with proxy_send_local_response, or
// one the host sent on the plugin's behalf (413, 503 wasm_fail_stream).
type LocalReply struct {
	Status     int
	Details    string
	Body       []byte
	Headers    [][2]string // extra headers from the plugin
	GRPCStatus int32
}

// Result is what the client received on one stream.
type Result struct {
	// Status is the response status; 0 when the stream was reset or the
	// client went away before a response.
	Status int
	// Headers are the response headers without ":status".
	Headers  [][2]string
	Body     []byte
	Trailers [][2]string
	// LocalReply is true when the response is a local reply (from the
	// plugin or from the host on its behalf).
	LocalReply bool
	// Details is the response code details of a local reply or reset.
	Details string
	// Upstream is true when the whole request (headers and every body
	// byte) was released to the upstream.
	Upstream bool
	// UpstreamBody is the request body the filter released towards the
	// upstream, whole or not (shared with the stream: do not modify).
	UpstreamBody []byte
	// UpstreamHeaders is true when the request headers were released to
	// the upstream, which Envoy's router sends them to at once, even if
	// the request was answered locally later (the upstream then sees the
	// request reset).
	UpstreamHeaders bool
	// Reset is true when the stream was reset instead of answered.
	Reset bool
	// Complete is true when the response reached end of stream.
	Complete bool
	// FilterState holds what the plugin stored with proxy_set_property on
	// this stream, by property path (tokens joined with "."). Envoy keeps
	// each as filter state "wasm.<path>", which access logs read with
	// %FILTER_STATE(wasm.<path>:PLAIN)%.
	FilterState map[string]string
}

type streamMode int

const (
	modeNormal streamMode = iota
	modeFailClosed
	modeBypass
)

type bufMode int

const (
	bufNone bufMode = iota
	bufBuffer
	bufWatermark
)

// dirState is one direction of a stream as the filter manager sees it
// around this filter.
type dirState struct {
	seen         bool // headers reached the filter
	hdrsHeld     bool // the headers callback stopped iteration
	hdrsOut      bool // headers released past the filter
	held         []byte
	buf          []byte // seen by the plugin, not yet released
	mode         bufMode
	eosIn        bool // end of stream arrived
	eosDelivered bool // the plugin saw end of stream
	trlIn        bool
	trlPending   bool
	trlHeld      bool
	out          []byte
	trlOut       [][2]string
	complete     bool
	aborted      bool
}

// Stream is one HTTP stream context on a VM.
//
// # Notes
//
// Each event method runs the callbacks Envoy's filter manager would run for
// that event (possibly none, for example while the headers are paused),
// then the after-call actions the plugin queued (continue, close, local
// reply). Methods lock the VM.
type Stream struct {
	vm    *VM
	gen   uint32
	id    uint32
	info  StreamInfo
	start time.Time
	mode  streamMode

	created, ended, deleted bool
	logPhase                bool
	props                   map[string][]byte

	reqHdrs, reqTrl, respHdrs, respTrl [][2]string
	avail                              [4]bool

	req, resp dirState
	// clientDone is set once the client's request ended (end of stream
	// on its headers, a body chunk or its trailers), whether or not the
	// filter got that end: Envoy's HCM tracks it apart from the filters
	// (remoteDecodeComplete).
	clientDone bool
	// reqBodyCleared: proxy_continue_stream dropped the request body
	// pointer until the next request body callback (notes 2.4).
	reqBodyCleared bool
	replying       bool
	pendingReply   *LocalReply
	failReplied    bool
	details        string
	reset          bool
	down           Result
	wake           chan struct{}

	// up is the request towards a StreamingUpstream (nil otherwise); dn
	// gets the response as it is released, dnHeaders and dnSent say what
	// it got.
	up        *upFeed
	dn        Downstream
	dnHeaders bool
	dnSent    int

	// viaUpstream is set once the upstream's response headers reached the
	// stream: response.code_details is then "via_upstream" until a local
	// reply sets details.
	viaUpstream bool

	// ContinueWithoutPause counts proxy_continue_stream calls on a
	// direction that was not paused, which Envoy treats as a programming
	// error (notes 2.4).
	ContinueWithoutPause int
}

// NewStream allocates a stream context id (the context is created at the
// first request headers, as in Envoy). On a failed VM the stream follows
// the failure policy: FailReload first tries a reload; FailOpen bypasses
// the plugin; FailClosed (and a reload inside the backoff) answers 503.
func (vm *VM) NewStream(info StreamInfo) *Stream {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.newStream(info)
}

func (vm *VM) newStream(info StreamInfo) *Stream {
	vm.reloadIfDue()
	s := &Stream{vm: vm, gen: vm.gen, info: info, start: time.Now(), wake: make(chan struct{}, 1)}
	if vm.failed || vm.closed {
		s.mode = modeFailClosed
		if vm.cfg.FailurePolicy == FailOpen {
			s.mode = modeBypass
		}
		return s
	}
	s.id = vm.nextID
	vm.nextID++
	return s
}

// ID returns the stream's context id (0 when the VM had failed).
func (s *Stream) ID() uint32 { return s.id }

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (s *Stream) dir(isResp bool) *dirState {
	if isResp {
		return &s.resp
	}
	return &s.req
}

func (s *Stream) vmDead() bool { return s.vm.failed || s.gen != s.vm.gen || s.vm.inst == nil }

func (s *Stream) create() {
	if s.created {
		return
	}
	s.created = true
	if s.mode != modeNormal || s.vmDead() {
		return
	}
	s.vm.streams[s.id] = s
	s.vm.call(fnContextCreate, s.id, uint64(s.id), uint64(s.vm.rootID))
}

// invoke runs a stream callback. On a failed VM it gives Envoy's CHECK_FAIL
// result instead (notes 1.5): Continue when failing open, else a 503 local
// reply once per stream and a stop.
func (s *Stream) invoke(fi int, args ...uint64) Action {
	if s.mode == modeBypass {
		return ActionContinue
	}
	if s.mode == modeFailClosed || s.vmDead() {
		return s.failedCallback()
	}
	r, ok := s.vm.call(fi, s.id, args...)
	if !ok {
		return s.failedCallback()
	}
	return Action(int32(uint32(r)))
}

func (s *Stream) failedCallback() Action {
	if s.vm.cfg.FailurePolicy == FailOpen {
		return ActionContinue
	}
	if !s.failReplied {
		s.failReplied = true
		s.directReply(&LocalReply{Status: 503, Details: "wasm_fail_stream"})
	}
	return ActionPause
}

func (s *Stream) stopped(d *dirState) bool {
	return s.ended || s.reset || d.aborted || s.pendingReply != nil
}

// RequestHeaders delivers the request headers (pseudo-headers included;
// they are put first and keys lower-cased).
func (s *Stream) RequestHeaders(h [][2]string, eos bool) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.headers(false, h, eos)
}

// ResponseHeaders delivers the upstream response headers (with ":status").
func (s *Stream) ResponseHeaders(h [][2]string, eos bool) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.replying || s.req.aborted && !s.reset {
		return NotCalled // a local reply replaced the upstream response
	}
	s.viaUpstream = true
	return s.headers(true, h, eos)
}

// RequestBody delivers one request body chunk as it arrives from the client.
func (s *Stream) RequestBody(chunk []byte, eos bool) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.body(false, chunk, eos)
}

// ResponseBody delivers one upstream response body chunk.
func (s *Stream) ResponseBody(chunk []byte, eos bool) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.replying {
		return NotCalled
	}
	return s.body(true, chunk, eos)
}

// RequestTrailers delivers the request trailers (end of stream).
func (s *Stream) RequestTrailers(t [][2]string) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.trailers(false, t)
}

// ResponseTrailers delivers the response trailers (end of stream).
func (s *Stream) ResponseTrailers(t [][2]string) Action {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if s.replying {
		return NotCalled
	}
	return s.trailers(true, t)
}

func (s *Stream) headers(isResp bool, h [][2]string, eos bool) Action {
	d := s.dir(isResp)
	if !isResp && eos {
		s.clientDone = true
	}
	if s.ended || s.reset || d.aborted || d.seen {
		return NotCalled
	}
	d.seen = true
	d.eosIn, d.eosDelivered = eos, eos
	fn, mi := fnRequestHeaders, 0
	if isResp {
		s.respHdrs = normalizeHeaders(h)
		fn, mi = fnResponseHeaders, 2
	} else {
		s.reqHdrs = normalizeHeaders(h)
		s.create()
	}
	n := len(s.reqHdrs)
	if isResp {
		n = len(s.respHdrs)
	}
	s.avail[mi] = true
	a := s.invoke(fn, uint64(s.id), uint64(n), b2u(eos))
	if !s.stopped(d) {
		// Headers: 0 and 2 continue; 1 and ≥3 stop all iteration
		// (cpp-host convertVmCallResultToFilterHeadersStatus).
		if a == 0 || a == 2 {
			s.releaseHeaders(d, isResp, true)
		} else {
			d.hdrsHeld = true
		}
	}
	s.pump(isResp)
	s.vm.flush()
	return a
}

func (s *Stream) body(isResp bool, chunk []byte, eos bool) Action {
	d := s.dir(isResp)
	if !isResp && eos {
		s.clientDone = true
	}
	if s.ended || s.reset || d.aborted || !d.seen || d.eosIn || !isResp && s.responseEnded() {
		return NotCalled
	}
	d.eosIn = eos
	d.held = append(d.held, chunk...)
	if len(chunk) == 0 && !eos {
		return NotCalled
	}
	a := s.pump(isResp)
	s.vm.flush()
	return a
}

func (s *Stream) trailers(isResp bool, t [][2]string) Action {
	d := s.dir(isResp)
	if !isResp {
		s.clientDone = true
	}
	if s.ended || s.reset || d.aborted || !d.seen || d.eosIn || !isResp && s.responseEnded() {
		return NotCalled
	}
	d.eosIn, d.trlIn, d.trlPending = true, true, true
	if isResp {
		s.respTrl = normalizeHeaders(t)
	} else {
		s.reqTrl = normalizeHeaders(t)
	}
	a := s.pump(isResp)
	s.vm.flush()
	return a
}

// pump delivers what the filter manager would deliver next in one
// direction: held body data (in one callback, with the total buffered so
// far), then trailers, and marks the direction complete once end of stream
// has passed the filter. It returns the last callback's action.
func (s *Stream) pump(isResp bool) Action {
	d := s.dir(isResp)
	last := NotCalled
	for !s.stopped(d) {
		// A pause on headers holds the body back (StopAllIteration),
		// unless allow_on_headers_stop_iteration turns it into StopIteration.
		blocked := d.hdrsHeld && !s.vm.cfg.AllowOnHeadersStopIteration
		if !blocked && (len(d.held) > 0 || (d.eosIn && !d.trlIn && !d.eosDelivered)) {
			d.buf = append(d.buf, d.held...)
			d.held = nil
			if d.mode == bufBuffer && len(d.buf) > s.vm.m.opts.BufferLimit {
				s.overflow(isResp)
				return last
			}
			last = s.deliverBody(isResp)
			continue
		}
		if !blocked && d.trlPending {
			last = s.deliverTrailers(isResp)
			continue
		}
		paused := d.hdrsHeld || d.mode != bufNone || d.trlHeld
		if !paused && d.eosIn && d.eosDelivered && !d.complete {
			d.complete = true
			s.signal()
		}
		break
	}
	s.syncUpstream()
	return last
}

// responseEnded reports whether the response has reached its end at the
// filter manager (Envoy's local_complete_, set when the router, or a
// local reply, hands over end of stream), even while this filter holds it.
// From then on Envoy gives no request data or trailers to any filter
// (FilterManager::decodeData, decodeTrailers) and cannot continue the
// request (ActiveStreamDecoderFilter::canContinue); the router resets an
// upstream request that has not ended (Router::Filter::onUpstreamComplete).
func (s *Stream) responseEnded() bool { return s.resp.eosIn }

func (s *Stream) deliverBody(isResp bool) Action {
	d := s.dir(isResp)
	eos := d.eosIn && !d.trlIn
	fn, ti := fnRequestBody, 1
	if isResp {
		fn, ti = fnResponseBody, 3
	}
	if eos {
		d.eosDelivered = true
		// Trailers may be added on the last chunk (notes 3.2).
		s.avail[ti] = true
	}
	if !isResp {
		s.reqBodyCleared = false
	}
	a := s.invoke(fn, uint64(s.id), uint64(len(d.buf)), b2u(eos))
	s.avail[ti] = false
	if s.stopped(d) {
		return a
	}
	// Body: 0 continue, 1 StopIterationAndBuffer, 2 StopIterationAndWatermark,
	// ≥3 StopIterationNoBuffer (cpp-host convertVmCallResultToFilterDataStatus).
	switch a {
	case ActionContinue:
		if d.hdrsHeld {
			s.releaseHeaders(d, isResp, true)
		}
		s.releaseBody(d, isResp)
		if eos {
			s.releaseAddedTrailers(isResp)
		}
	case ActionPause:
		d.mode = bufBuffer
		if len(d.buf) > s.vm.m.opts.BufferLimit {
			s.overflow(isResp)
		}
	case 2:
		d.mode = bufWatermark
	default:
		d.buf, d.mode = nil, bufNone
	}
	return a
}

func (s *Stream) deliverTrailers(isResp bool) Action {
	d := s.dir(isResp)
	d.trlPending = false
	d.eosDelivered = true
	fn, ti := fnRequestTrailers, 1
	t := s.reqTrl
	if isResp {
		fn, ti, t = fnResponseTrailers, 3, s.respTrl
	}
	s.avail[ti] = true
	a := s.invoke(fn, uint64(s.id), uint64(len(t)))
	if s.stopped(d) {
		return a
	}
	if a == ActionContinue {
		s.avail[ti] = false
		if d.hdrsHeld {
			s.releaseHeaders(d, isResp, true)
		}
		s.releaseBody(d, isResp)
		s.releaseTrailers(isResp)
	} else {
		d.trlHeld = true
	}
	return a
}

func (s *Stream) releaseHeaders(d *dirState, isResp, clearMap bool) {
	d.hdrsHeld, d.hdrsOut = false, true
	if !isResp {
		if clearMap {
			s.avail[0] = false
		}
		return
	}
	if clearMap {
		s.avail[2] = false
	}
	s.down.Headers = s.down.Headers[:0]
	for _, p := range s.respHdrs {
		if p[0] == ":status" {
			s.down.Status, _ = strconv.Atoi(p[1])
			continue
		}
		if !strings.HasPrefix(p[0], ":") {
			s.down.Headers = append(s.down.Headers, p)
		}
	}
}

func (s *Stream) releaseBody(d *dirState, isResp bool) {
	d.out = append(d.out, d.buf...)
	d.buf, d.mode = nil, bufNone
}

func (s *Stream) releaseTrailers(isResp bool) {
	d := s.dir(isResp)
	d.trlHeld = false
	if isResp {
		d.trlOut = copyHeaders(s.respTrl)
	} else {
		d.trlOut = copyHeaders(s.reqTrl)
	}
}

func (s *Stream) releaseAddedTrailers(isResp bool) {
	if isResp && len(s.respTrl) > 0 {
		s.releaseTrailers(true)
	} else if !isResp && len(s.reqTrl) > 0 {
		s.releaseTrailers(false)
	}
}

// resume is proxy_continue_stream's after-call action (Envoy
// continueDecoding/continueEncoding): release what the filter held and
// continue delivering.
func (s *Stream) resume(isResp bool) {
	d := s.dir(isResp)
	if s.ended || s.reset || d.aborted || !d.seen || !isResp && s.responseEnded() {
		return
	}
	paused := false
	if d.hdrsHeld {
		paused = true
		// continue_stream never clears the response-header pointer (notes 3.2).
		s.releaseHeaders(d, isResp, !isResp)
	}
	if d.mode != bufNone {
		paused = true
		s.releaseBody(d, isResp)
	}
	if d.trlHeld {
		paused = true
		s.releaseBody(d, isResp)
		s.releaseTrailers(isResp)
	}
	if !paused {
		s.ContinueWithoutPause++
		s.vm.logAt(LevelDebug, 0, "proxy_continue_stream on a stream that is not paused")
	}
	s.pump(isResp)
	s.signal()
}

// clearRequestMaps: proxy_continue_stream clears the request header, body
// and trailer pointers whatever the stream type (Envoy Context::continueStream).
func (s *Stream) clearRequestMaps() {
	s.avail[0], s.avail[1] = false, false
	s.reqBodyCleared = true
}

// bodyBuffer is what proxy_get_buffer_bytes and proxy_get_buffer_status
// see of a body (Envoy Context::getBuffer): while the filter buffers it
// (its last body callback paused), everything buffered, from any callback
// of the stream, the other direction's included; else the chunk of the
// body callback running, or nothing. After proxy_continue_stream the
// request body is gone until the next request body callback, unless the
// filter buffers it.
func (s *Stream) bodyBuffer(isResp bool) []byte {
	if !isResp && s.reqBodyCleared && s.req.mode != bufBuffer {
		return nil
	}
	return s.dir(isResp).buf
}

func (s *Stream) headersModified(uint32) {}

// headerMap returns the map of type typ as Envoy's getMap/getConstMap
// would (notes 3.2): usable only in its phase or while held; read-only in
// on_log.
func (s *Stream) headerMap(typ uint32, write bool) (*[][2]string, Status) {
	if typ > 3 {
		return nil, StatusBadArgument
	}
	maps := [4]*[][2]string{&s.reqHdrs, &s.reqTrl, &s.respHdrs, &s.respTrl}
	if s.logPhase {
		if write {
			return nil, StatusBadArgument
		}
		switch typ {
		case 0:
			if s.req.seen {
				return maps[0], StatusOK
			}
		case 2, 3:
			if s.resp.seen {
				return maps[typ], StatusOK
			}
		}
		return nil, StatusNotFound
	}
	if !s.avail[typ] {
		return nil, StatusBadArgument
	}
	return maps[typ], StatusOK
}

// queueLocalReply records a proxy_send_local_response; the reply is sent
// after the callback, whose result is overridden to a stop.
func (s *Stream) queueLocalReply(lr *LocalReply) {
	s.pendingReply = lr
	s.vm.deferAction(func() { s.sendLocalReply(lr) })
}

// sendLocalReply follows Envoy's FilterManager::sendLocalReply (notes 2.5):
// before the response started, the decoder chain is aborted and the reply is
// encoded through the filter chain, this plugin included; once response
// headers exist but are not sent, a direct reply that bypasses the plugin;
// after they were sent, a reset.
func (s *Stream) sendLocalReply(lr *LocalReply) {
	if s.pendingReply == lr {
		s.pendingReply = nil
	}
	if s.ended || s.reset {
		return
	}
	s.details = lr.Details
	if !s.resp.seen && !s.replying {
		s.req.aborted = true
		s.req.held, s.req.buf = nil, nil
		s.syncUpstream()
		s.replying = true
		s.down.LocalReply = true
		h, body := localReplyHeaders(lr, s.isHead())
		s.headers(true, h, len(body) == 0)
		if len(body) > 0 {
			s.body(true, body, true)
		}
		s.signal()
		return
	}
	if !s.resp.hdrsOut {
		s.directReply(lr)
		return
	}
	s.resetStream("local_reply_after_response_started")
}

func (s *Stream) isHead() bool {
	v, _ := headerGet(s.reqHdrs, ":method")
	return v == "HEAD"
}

// localReplyHeaders builds the headers of a local reply the way Envoy's
// Utility::sendLocalReply does: :status, content-length, and content-type
// text/plain when there is a body, then the plugin's extra headers.
func localReplyHeaders(lr *LocalReply, head bool) ([][2]string, []byte) {
	h := [][2]string{{":status", strconv.Itoa(lr.Status)}}
	extraCT := false
	for _, p := range lr.Headers {
		if strings.EqualFold(p[0], "content-type") {
			extraCT = true
		}
	}
	if len(lr.Body) > 0 {
		h = append(h, [2]string{"content-length", strconv.Itoa(len(lr.Body))})
		if !extraCT {
			h = append(h, [2]string{"content-type", "text/plain"})
		}
	} else {
		h = append(h, [2]string{"content-length", "0"})
	}
	for _, p := range lr.Headers {
		h = headerAdd(h, strings.ToLower(p[0]), p[1])
	}
	body := lr.Body
	if head {
		body = nil
	}
	return h, body
}

// directReply answers without running the plugin: the response phase of
// sendLocalReply, and the 503 of a failed VM.
func (s *Stream) directReply(lr *LocalReply) {
	s.req.aborted = true
	s.syncUpstream()
	if s.resp.hdrsOut {
		s.resetStream(lr.Details)
		return
	}
	s.resp.aborted = true
	s.details = lr.Details
	h, body := localReplyHeaders(lr, s.isHead())
	s.respHdrs = h
	s.releaseHeaders(&s.resp, true, true)
	s.resp.out = append([]byte(nil), body...)
	s.resp.trlOut = nil
	s.resp.complete = true
	s.down.LocalReply = true
	s.signal()
}

// overflow is the buffer limit (Envoy per_connection_buffer_limit_bytes,
// notes 2.3): 413 on the request side; 500 on the response side when its
// headers were not sent yet, else a reset.
func (s *Stream) overflow(isResp bool) {
	if !isResp {
		s.req.aborted = true
		s.sendLocalReply(&LocalReply{Status: 413, Details: "request_payload_too_large", Body: []byte("Payload Too Large")})
		return
	}
	if !s.resp.hdrsOut {
		s.directReply(&LocalReply{Status: 500, Details: "response_payload_too_large", Body: []byte("Internal Server Error")})
		return
	}
	s.resetStream("response_payload_too_large")
}

func (s *Stream) resetStream(details string) {
	if s.reset || s.ended {
		return
	}
	s.reset = true
	s.details = details
	s.req.aborted, s.resp.aborted = true, true
	s.syncUpstream()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// End ends the stream: proxy_on_log, proxy_on_done, proxy_on_delete, in
// Envoy's order for HTTP streams (notes 1.3). A stream that never saw
// request headers is created first, as Envoy's Context::log does. Nothing
// is called on a failed VM.
func (s *Stream) End() {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	s.end()
}

func (s *Stream) end() {
	if s.ended {
		return
	}
	s.create()
	s.ended = true
	s.syncUpstream()
	s.signal()
	if s.mode != modeNormal || s.vmDead() {
		return
	}
	s.logPhase = true
	id := uint64(s.id)
	if _, ok := s.vm.call(fnLog, s.id, id); ok {
		if _, ok := s.vm.call(fnDone, s.id, id); ok {
			s.vm.call(fnDelete, s.id, id)
		}
	}
	s.deleted = true
	delete(s.vm.streams, s.id)
	s.vm.pending = nil
}

// LocalReply returns the response when it is a local reply, else nil.
func (s *Stream) LocalReply() *LocalReply {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if !s.down.LocalReply {
		return nil
	}
	return &LocalReply{Status: s.down.Status, Details: s.details, Body: append([]byte(nil), s.resp.out...), Headers: copyHeaders(s.down.Headers)}
}

// Result returns what the client has received so far.
func (s *Stream) Result() Result {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.result()
}

func (s *Stream) result() Result {
	r := s.down
	r.Headers = copyHeaders(r.Headers)
	r.Body = append([]byte(nil), s.resp.out...)
	r.Trailers = copyHeaders(s.resp.trlOut)
	r.Complete = s.resp.complete
	r.Upstream = s.req.complete && !s.replying
	r.UpstreamBody = s.req.out[:len(s.req.out):len(s.req.out)]
	r.UpstreamHeaders = s.req.hdrsOut
	r.Details = s.details
	if s.reset {
		r = Result{Reset: true, Details: s.details, Upstream: r.Upstream, UpstreamHeaders: r.UpstreamHeaders, UpstreamBody: r.UpstreamBody}
	}
	if len(s.props) > 0 {
		r.FilterState = make(map[string]string, len(s.props))
		for k, v := range s.props {
			r.FilterState[strings.ReplaceAll(k, "\x00", ".")] = string(v)
		}
	}
	return r
}

// UpstreamRequest returns what passed the filter towards the upstream: the
// request headers (when released), body, trailers, and whether the request
// is complete.
func (s *Stream) UpstreamRequest() (headers [][2]string, body []byte, trailers [][2]string, complete bool) {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	if !s.req.hdrsOut {
		return nil, nil, nil, false
	}
	return copyHeaders(s.reqHdrs), append([]byte(nil), s.req.out...), copyHeaders(s.req.trlOut), s.req.complete && !s.req.aborted
}

// Reset reports whether the stream was reset.
func (s *Stream) Reset() bool {
	s.vm.mu.Lock()
	defer s.vm.mu.Unlock()
	return s.reset
}
