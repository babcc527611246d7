package filter

import (
	"runtime"
	"strconv"
	"time"

	ctypes "github.com/corazawaf/coraza/v3/types"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/localreply"
)

// Property paths, allocated once.
var (
	propRequestProtocol    = []string{"request", "protocol"}
	propSourceAddress      = []string{"source", "address"}
	propDestinationAddress = []string{"destination", "address"}
	propResponseDetails    = []string{"response", "code_details"}
	propRouteName          = []string{"xds", "route_name"}
)

// detailsViaUpstream is Envoy's response code details for a response that
// came from the upstream; any other value names a local reply (Envoy's
// own, such as a buffer limit's 413, or another filter's).
const detailsViaUpstream = "via_upstream"

// defaultProtocol is used when the request.protocol property is missing.
const defaultProtocol = "HTTP/1.1"

// statusFailClosed answers streams the filter could not inspect (a host call
// or Coraza failed), so that nothing passes uninspected.
const statusFailClosed = 500

// stream is the context of one HTTP stream: one Coraza transaction from the
// request headers to OnHttpStreamDone.
//
// # Notes
//
// Envoy drops the request header map once the request headers continue, and
// only lets a body be read in full while the previous body callback paused,
// so everything later phases need is copied into the transaction (Coraza keeps
// its own copies of headers) or into fields here while the maps exist.
//
// The transaction is closed and the active gauge decremented in
// OnHttpStreamDone, which the SDK runs from proxy_on_log: Envoy calls it for
// every stream that got a context, whether it completed, was answered locally
// or was reset.
type stream struct {
	types.DefaultHttpContext
	plugin *Plugin
	id     uint32 // the context id
	tx     ctypes.Transaction

	protocol string
	// reqBodySeen and respBodySeen count the body bytes already given to
	// Coraza; while the filter pauses, Envoy reports the whole buffered
	// body each time, so only bytes past these offsets are new.
	reqBodySeen, respBodySeen int
	// reqDone and respDone are set once phase 2 (request body) and
	// phase 4 (response body) have been evaluated, or skipped.
	reqDone, respDone bool
	// replied is set once the filter sent a local reply: the response
	// callbacks that follow then see that reply, which is not inspected.
	replied bool
	// reqHeld and respHeld are set while the filter holds the headers
	// until the body is inspected (hold.go), since heldSince.
	reqHeld, respHeld bool
	heldSince         time.Time
	// tunnel is set for CONNECT and Upgrade requests, whose bytes after
	// the headers belong to the tunnel (early.go).
	tunnel bool
	// early holds an upstream response that arrived before the request
	// ended, paused until phase 2 has passed the whole request body
	// (early.go); nil otherwise.
	early *earlyResponse
	// reqCut is set when the response ended before the request did: phase
	// 2 ran on the body received so far, and Envoy delivers no more of
	// it; nothing of the request body is released from then on (early.go).
	reqCut bool

	// rules is the rule set chosen by :authority.
	rules *hostRules
	// outcome of the transaction, for the JSON log, the filter state and
	// the metrics (see txlog.go).
	action      txAction
	ruleID      int
	blockPhase  phase
	finalStatus int
	wafTime     time.Duration
	// request line and client, kept only when json_log is on; they point
	// into strings the filter already holds.
	method, path, authority, clientIP string
	clientPort                        int

	// what the rule preselection did (preselect.go): rules screened and
	// removed over the phases.
	screened, removed int

	// body checks of the filter itself (operability.go).
	multipart bool
	scanJSON  bool
	json      jsonDepth
}

// OnHttpRequestHeaders implements types.HttpContext. It evaluates phase 1,
// and phase 2 too when no body follows or the rules do not read the body.
func (s *stream) OnHttpRequestHeaders(_ int, endOfStream bool) types.Action {
	headers, err := proxywasm.GetHttpRequestHeaders()
	if err != nil {
		proxywasm.LogError("waf: reading the request headers: " + err.Error())
		return s.failClosed()
	}
	var method, path, authority, requestID, traceparent, contentType, contentLength string
	upgrade := false
	for _, h := range headers {
		switch h[0] {
		case "upgrade":
			upgrade = true
		case ":method":
			method = h[1]
		case ":path":
			path = h[1]
		case ":authority":
			authority = h[1]
		case "x-request-id":
			requestID = h[1]
		case "traceparent":
			traceparent = h[1]
		case "content-type":
			contentType = h[1]
		case "content-length":
			contentLength = h[1]
		}
	}
	defer s.addTime(time.Now())
	s.rules = s.plugin.rulesFor(authority)
	waf := s.rules.waf
	if requestID == "" {
		requestID = traceID(traceparent)
	}
	if s.plugin.ops.jsonLog {
		s.method, s.path, s.authority = method, path, authority
	}
	if requestID != "" {
		s.tx = waf.NewTransactionWithID(requestID)
	} else {
		s.tx = waf.NewTransaction()
	}
	s.plugin.metrics.total.Increment(1)
	s.plugin.metrics.active.Add(1)
	s.enter()
	tx := s.tx
	if tx.IsRuleEngineOff() {
		s.reqDone, s.respDone = true, true
		return types.ActionContinue
	}

	srcIP, srcPort := splitAddress(getStringProperty(propSourceAddress))
	dstIP, dstPort := splitAddress(getStringProperty(propDestinationAddress))
	tx.ProcessConnection(srcIP, srcPort, dstIP, dstPort)
	s.clientIP, s.clientPort = srcIP, srcPort

	s.protocol = getStringProperty(propRequestProtocol)
	if s.protocol == "" {
		s.protocol = defaultProtocol
	}
	if path == "" && method == "CONNECT" {
		// CONNECT has no :path; its target is the authority.
		path = authority
	}
	tx.ProcessURI(path, method, s.protocol)
	for _, h := range headers {
		if len(h[0]) != 0 && h[0][0] != ':' {
			tx.AddRequestHeader(h[0], h[1])
		}
	}
	if authority != "" {
		// HTTP/1 Host arrives as :authority; rules read REQUEST_HEADERS:Host.
		tx.AddRequestHeader("Host", authority)
		tx.SetServerName(httpsyntax.AuthorityHost(authority))
	}
	if it := tx.ProcessRequestHeaders(); it != nil {
		return s.interrupt(it, phaseRequestHeaders)
	}
	s.checkWouldBlock(phaseRequestHeaders)
	if !endOfStream && tx.IsRequestBodyAccessible() {
		if a, stop := s.prepareRequestBody(contentType, contentLength); stop {
			return a
		}
	}
	if endOfStream || !tx.IsRequestBodyAccessible() {
		// Nothing to buffer: run phase 2 now, so that blocking needs no
		// body callback and the upstream gets nothing on a block.
		return s.finishRequestBody()
	}
	if method == "CONNECT" || upgrade {
		s.tunnel = true
		// A tunnel (CONNECT, or an Upgrade such as WebSocket): what
		// follows is the tunnel's bytes, which end only with it, and the
		// upstream must answer the headers first. Never held.
		return types.ActionContinue
	}
	// The body follows: the headers go on now, or with the body once
	// phase 2 passed it in hold mode (hold.go).
	return s.heldAction(false)
}

// OnHttpRequestBody implements types.HttpContext. It buffers the body (Pause)
// while feeding Coraza, and evaluates phase 2 at the end of the stream or
// when SecRequestBodyLimit is reached.
func (s *stream) OnHttpRequestBody(bodySize int, endOfStream bool) types.Action {
	if s.reqCut {
		return types.ActionPause
	}
	if s.tx == nil || s.reqDone || s.replied {
		return types.ActionContinue
	}
	if s.reqHeld {
		s.bodyWhileHeld()
	}
	s.enter()
	defer s.addTime(time.Now())
	if bodySize > s.reqBodySeen {
		if lim := s.plugin.ops.noFilesLimit; lim > 0 && !s.multipart && int64(bodySize) > lim {
			return s.rejectBody(statusBodyTooLarge, actionBodyLimit)
		}
		chunk, err := proxywasm.GetHttpRequestBody(s.reqBodySeen, bodySize-s.reqBodySeen)
		if err != nil {
			proxywasm.LogError("waf: reading the request body: " + err.Error())
			return s.failClosed()
		}
		s.reqBodySeen = bodySize
		if s.scanJSON && s.json.feed(chunk, s.plugin.ops.jsonMaxDepth) {
			return s.rejectBody(statusJSONTooDeep, actionJSONTooDeep)
		}
		it, n, err := s.tx.WriteRequestBody(chunk)
		if err != nil {
			proxywasm.LogError("waf: buffering the request body: " + err.Error())
			return s.failClosed()
		}
		if it != nil {
			// SecRequestBodyLimitAction Reject (413), or a phase 2
			// interruption run by Coraza at the limit.
			return s.interrupt(it, phaseRequestBody)
		}
		if n < len(chunk) {
			// SecRequestBodyLimitAction ProcessPartial: Coraza
			// evaluated phase 2 on the first part; the rest passes.
			return s.finishRequestBody()
		}
	}
	if endOfStream {
		return s.finishRequestBody()
	}
	return types.ActionPause
}

// OnHttpRequestTrailers implements types.HttpContext. Trailers end a body
// whose last chunk had no end of stream.
func (s *stream) OnHttpRequestTrailers(int) types.Action {
	if s.reqCut {
		return types.ActionPause
	}
	if s.tx == nil || s.reqDone || s.replied {
		return types.ActionContinue
	}
	if s.reqHeld {
		s.bodyWhileHeld()
	}
	s.enter()
	defer s.addTime(time.Now())
	return s.finishRequestBody()
}

// finishRequestBody evaluates phase 2, then lets a response that waited
// for it go on (early.go). Held request headers go on with the body when
// it returns Continue.
func (s *stream) finishRequestBody() types.Action {
	if a := s.requestBodyPhase(); s.replied {
		return a
	}
	if s.early != nil {
		if s.releaseEarlyResponse(); s.replied {
			return types.ActionPause
		}
	}
	return types.ActionContinue
}

// requestBodyPhase evaluates phase 2 and marks the request done.
func (s *stream) requestBodyPhase() types.Action {
	s.reqDone = true
	s.reqHeld = false
	s.unwatch()
	it, err := s.tx.ProcessRequestBody()
	if err != nil {
		proxywasm.LogError("waf: processing the request body: " + err.Error())
		return s.failClosed()
	}
	if it != nil {
		return s.interrupt(it, phaseRequestBody)
	}
	s.checkWouldBlock(phaseRequestBody)
	return types.ActionContinue
}

// OnHttpResponseHeaders implements types.HttpContext. It evaluates phase 3,
// and phase 4 too when no body follows or the rules do not read it. A
// response that arrives before the request ended waits, paused, until
// phase 2 has passed the whole request body (early.go).
func (s *stream) OnHttpResponseHeaders(_ int, endOfStream bool) types.Action {
	if s.tx == nil || s.replied || s.respDone {
		// Our own local reply, or a stream without a transaction.
		return types.ActionContinue
	}
	s.enter()
	defer s.addTime(time.Now())
	headers, err := proxywasm.GetHttpResponseHeaders()
	if err != nil {
		proxywasm.LogError("waf: reading the response headers: " + err.Error())
		return s.failClosed()
	}
	if !s.reqDone {
		if d := getStringProperty(propResponseDetails); d != "" && d != detailsViaUpstream {
			// A local reply of Envoy's (a buffer limit's 413, the
			// router's 503) or of another filter: it ended the request
			// before the upstream got its body, and is not inspected.
			s.reqCut = true
			s.reqDone, s.respDone = true, true
			return types.ActionContinue
		}
		if !s.tunnel {
			if endOfStream {
				// A response without a body: it ended already, and Envoy
				// gives the filters no more of the request.
				if s.cutRequest(); s.replied {
					return types.ActionPause
				}
				return s.responseHeaders(headers, true)
			}
			return s.holdEarlyResponse(headers)
		}
		// The upstream accepted a tunnel: what the client sent before
		// is the request's body, and what follows is the tunnel's.
		if a := s.finishRequestBody(); s.replied {
			return a
		}
	}
	return s.responseHeaders(headers, endOfStream)
}

// responseHeaders gives the response headers to Coraza and evaluates
// phase 3 (and phase 4 when no body will be read). It returns what the
// response headers callback returns.
func (s *stream) responseHeaders(headers [][2]string, endOfStream bool) types.Action {
	tx := s.tx
	code := 0
	for _, h := range headers {
		if len(h[0]) == 0 {
			continue
		}
		if h[0][0] == ':' {
			if h[0] == ":status" {
				code, _ = strconv.Atoi(h[1])
			}
			continue
		}
		tx.AddResponseHeader(h[0], h[1])
	}
	s.finalStatus = code
	if it := tx.ProcessResponseHeaders(code, s.protocol); it != nil {
		// The headers are still held here: Envoy answers with a local
		// reply and drops the upstream response.
		return s.interrupt(it, phaseResponseHeaders)
	}
	s.checkWouldBlock(phaseResponseHeaders)
	if endOfStream || !tx.IsResponseBodyAccessible() || !tx.IsResponseBodyProcessable() {
		return s.finishResponseBody()
	}
	// The body will be inspected: the headers go downstream now, or with
	// the body once phase 4 passed it in hold mode (hold.go).
	return s.heldAction(true)
}

// OnHttpResponseBody implements types.HttpContext, like OnHttpRequestBody
// for phase 4. Unless the filter holds them (hold.go), the response headers
// are already on their way to the client, so an interruption here can only
// end the stream: see interrupt.
func (s *stream) OnHttpResponseBody(bodySize int, endOfStream bool) types.Action {
	if s.tx == nil || s.respDone || s.replied {
		return types.ActionContinue
	}
	if s.early != nil {
		if !endOfStream {
			return s.early.body(bodySize)
		}
		// The response ended before the request did.
		if a, done := s.endEarlyResponse(); done {
			return a
		}
	}
	if s.respHeld {
		s.bodyWhileHeld()
	}
	defer s.addTime(time.Now())
	if a, done := s.feedResponseBody(bodySize); done {
		return a
	}
	if endOfStream {
		return s.finishResponseBody()
	}
	return types.ActionPause
}

// feedResponseBody gives Coraza the response body bytes past
// respBodySeen, up to bodySize (Envoy's total while the filter pauses).
// done reports that the callback answers a: an interruption, a failure,
// or phase 4 run at SecResponseBodyLimit.
func (s *stream) feedResponseBody(bodySize int) (a types.Action, done bool) {
	if bodySize <= s.respBodySeen {
		return types.ActionContinue, false
	}
	chunk, err := proxywasm.GetHttpResponseBody(s.respBodySeen, bodySize-s.respBodySeen)
	if err != nil {
		proxywasm.LogError("waf: reading the response body: " + err.Error())
		return s.failClosed(), true
	}
	s.respBodySeen = bodySize
	it, n, err := s.tx.WriteResponseBody(chunk)
	if err != nil {
		proxywasm.LogError("waf: buffering the response body: " + err.Error())
		return s.failClosed(), true
	}
	if it != nil {
		return s.interrupt(it, phaseResponseBody), true
	}
	if n < len(chunk) {
		return s.finishResponseBody(), true
	}
	return types.ActionContinue, false
}

// OnHttpResponseTrailers implements types.HttpContext.
func (s *stream) OnHttpResponseTrailers(int) types.Action {
	if s.tx == nil || s.respDone || s.replied {
		return types.ActionContinue
	}
	if s.early != nil {
		// The response ended before the request did.
		size := s.early.bodySize
		if a, done := s.endEarlyResponse(); done {
			return a
		}
		if a, done := s.feedResponseBody(size); done {
			return a
		}
	}
	if s.respHeld {
		s.bodyWhileHeld()
	}
	defer s.addTime(time.Now())
	return s.finishResponseBody()
}

// finishResponseBody evaluates phase 4. Held response headers go on with
// the body when it returns Continue.
func (s *stream) finishResponseBody() types.Action {
	s.respDone = true
	s.respHeld = false
	s.unwatch()
	it, err := s.tx.ProcessResponseBody()
	if err != nil {
		proxywasm.LogError("waf: processing the response body: " + err.Error())
		return s.failClosed()
	}
	if it != nil {
		return s.interrupt(it, phaseResponseBody)
	}
	s.checkWouldBlock(phaseResponseBody)
	return types.ActionContinue
}

// OnHttpStreamDone implements types.HttpContext. It runs the logging phase
// and closes the transaction, however the stream ended.
func (s *stream) OnHttpStreamDone() {
	s.unwatch()
	tx := s.tx
	if tx == nil {
		return
	}
	s.tx = nil
	start := time.Now()
	tx.ProcessLogging()
	s.addTime(start)
	// The matched rules and the variables go away with Close.
	s.report(tx)
	s.reportScreen(tx.ID())
	if activeStream == s {
		activeStream = nil
	}
	if err := tx.Close(); err != nil {
		proxywasm.LogError("waf: closing the transaction: " + err.Error())
	}
	s.plugin.metrics.active.Add(-1)
	yieldToGC()
}

// yieldToGC lets the Go garbage collector's background worker run. A
// plugin built for wasm has one thread, and that worker only runs when the
// running goroutine yields, which filter code otherwise never does: a GC
// cycle is then marked by allocation assists alone, stretches over seconds
// of requests, and everything allocated meanwhile survives it, which
// inflates the live heap and the next heap goal with it (bench pool: 225
// MiB of linear memory without, 188-192 MiB with, at the same CPU; see
// docs/performance.md, lever s). Natively the collector has threads of its
// own, so this compiles to nothing there.
func yieldToGC() {
	if runtime.GOARCH == "wasm" {
		runtime.Gosched()
	}
}

// interrupt answers an interruption with a local reply carrying the rule's
// status (403 when the rule sets none), counts it and stops the stream.
//
// Where the reply can go depends on the phase (Envoy's sendLocalReply):
// from the request path and from the response headers it replaces the
// response; from the response body the headers already went downstream, so
// Envoy resets the stream instead (the client sees a truncated response),
// unless the filter holds them (hold_headers_until_inspected) or a later
// filter does: then the reply replaces the response.
func (s *stream) interrupt(it *ctypes.Interruption, p phase) types.Action {
	s.unwatch()
	s.replied = true
	s.reqDone, s.respDone = true, true
	s.plugin.metrics.countInterruption(it.RuleID, p)

	status := it.Status
	var headers [][2]string
	var body []byte
	switch {
	case it.Action == "redirect":
		if status < 300 || status > 399 {
			status = 302
		}
		if it.Data != "" {
			headers = [][2]string{{"location", it.Data}}
		}
	case status < 200 || status > 599:
		status = 403
	}
	action := actionBlock
	switch {
	case it.Action == "redirect":
		action = actionRedirect
	case it.RuleID == 0 && status == statusBodyTooLarge:
		// Coraza's SecRequestBodyLimitAction Reject.
		action = actionBodyLimit
	}
	if d := s.rules.deny; d != nil && action != actionRedirect {
		if d.status != 0 && action == actionBlock {
			status = d.status
		}
		headers, body = d.headers, d.body
	}
	s.record(action, it.RuleID, p, status)
	proxywasm.LogInfo("waf: interrupted by rule " + strconv.Itoa(it.RuleID) + " in " + p.String() +
		", action " + it.Action + ", status " + strconv.Itoa(status) + ", unique_id " + s.tx.ID())
	details := localreply.Prefix + action.String()
	if action != actionBodyLimit {
		details += "_" + strconv.Itoa(it.RuleID)
	}
	if err := localreply.Send(uint32(status), details, headers, body); err != nil {
		proxywasm.LogError("waf: sending the local reply for rule " + strconv.Itoa(it.RuleID) + ": " + err.Error())
	}
	return types.ActionPause
}

// failClosed answers a stream the filter could not inspect with a 500.
func (s *stream) failClosed() types.Action {
	s.unwatch()
	s.replied = true
	s.reqDone, s.respDone = true, true
	s.action, s.finalStatus = actionFailClosed, statusFailClosed
	if err := localreply.Send(statusFailClosed, localreply.Prefix+actionFailClosed.String(), nil, nil); err != nil {
		proxywasm.LogError("waf: sending the fail-closed reply: " + err.Error())
	}
	return types.ActionPause
}

// getStringProperty reads a string property, or "" when the host has none.
func getStringProperty(path []string) string {
	b, err := proxywasm.GetProperty(path)
	if err != nil {
		return ""
	}
	return string(b)
}
