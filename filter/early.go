package filter

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// An upstream response that arrives before the request ended.
//
// Envoy's router streams a request to the upstream as the filters release
// it, and an upstream may answer before it has read the whole body:
// streaming and full-duplex servers send their headers at once, and some
// refuse a request from its headers alone. The filter releases no byte of
// a request body before phase 2 has passed the whole of it, so at that
// point the upstream has seen the headers only. Coraza runs its phases in
// order (the response's phases 3 and 4 after phase 2, and phase 2 after the
// last byte of the body), so the filter holds the response until the
// request is complete:
//
//   - Its headers callback pauses. Envoy keeps the headers, and either holds
//     the response body too (a Pause on headers is StopAllIterationAndWatermark)
//     or, with allow_on_headers_stop_iteration (StopIteration), passes it to
//     the filter, which pauses it unread, so Envoy buffers it.
//   - Request body chunks keep arriving, and are buffered and fed to Coraza
//     as before, up to the same limits.
//   - At the end of the request phase 2 decides. A block answers with the
//     local reply, which replaces the held response (Envoy writes it
//     directly: the response never left the filter), and nothing of the
//     body reaches the upstream. A pass releases the body upstream, runs
//     phase 3 on the held headers and lets the response continue
//     (proxy_continue_stream), or answers locally if phase 3 blocks;
//     phase 4 reads the response body as usual.
//   - If the response ends first (a response without a body, or the end of
//     its body or its trailers reaching the filter), Envoy delivers no more
//     of the request to any filter and resets the upstream request: the
//     rest of the body is never forwarded. Phase 2 then runs on the part
//     that arrived, phases 3 and 4 on the response, and the response goes
//     on or is answered locally. Without allow_on_headers_stop_iteration
//     the filter does not see the end of a body Envoy holds for it: such a
//     stream waits until Envoy's stream_idle_timeout answers it.
//
// Two kinds of stream differ:
//
//   - Tunnels (CONNECT, Upgrade): the upstream's answer opens the tunnel,
//     and the bytes that follow are the tunnel's, not a body. Phase 2 runs
//     on what the client sent before the answer, and the tunnel's bytes
//     pass uninspected, as in any WAF that reads HTTP.
//   - Full-duplex streams (gRPC bidirectional streaming, or any client that
//     waits for the response before it ends its request) cannot pass a WAF
//     that inspects whole request bodies: the request never ends while the
//     client waits, and the upstream gets no message until it does. They
//     stall until Envoy's stream_idle_timeout, its request_timeout or a
//     buffer limit ends them, and waf_filter.tx.early_responses counts
//     them. Routes that carry them need body inspection off
//     (ctl:requestBodyAccess=Off in phase 1), which the operator decides.

// earlyResponse is an upstream response the filter holds until phase 2
// has passed the whole request.
type earlyResponse struct {
	headers [][2]string
	// bodySize is how much response body Envoy buffers for the filter
	// (allow_on_headers_stop_iteration passes it to the filter while its
	// headers are held; without it Envoy holds the body itself).
	bodySize int
}

// resumeResponse is proxywasm.ResumeHttpResponse; the native runner
// replaces it to see the call, which the SDK's emulator forgets when it
// comes from inside a callback.
var resumeResponse = proxywasm.ResumeHttpResponse

// holdEarlyResponse pauses the response headers that arrived before the
// request ended (see above).
func (s *stream) holdEarlyResponse(headers [][2]string) types.Action {
	s.early = &earlyResponse{headers: headers}
	s.plugin.metrics.earlyResponses.Increment(1)
	proxywasm.LogDebug("waf: the upstream answered before the request ended; its response waits until phase 2 has passed the whole request body, unique_id " + s.tx.ID())
	return types.ActionPause
}

// body records a response body callback while the response waits, and
// keeps the body buffered in Envoy, unread.
func (e *earlyResponse) body(bodySize int) types.Action {
	e.bodySize = bodySize
	return types.ActionPause
}

// cutRequest runs phase 2 on the request body received so far, once the
// response ended before the request did: from then on Envoy delivers no
// more of the request to any filter and resets the upstream request (its
// filter manager stops decoding once the response ended, and its router
// resets an upstream request whose response completed first), so the rest
// of the body never reaches the upstream, and reqCut makes sure the
// filter releases none of it.
func (s *stream) cutRequest() {
	s.reqCut = true
	if !s.reqDone {
		s.requestBodyPhase()
	}
}

// endEarlyResponse handles a held response that ended (end of stream on a
// body chunk, or trailers) before the request did: phase 2 on what
// arrived (cutRequest), then phase 3 on the held headers. done reports
// that the callback answers a; otherwise the body Envoy buffered for the
// filter goes through phase 4 in the same callback, as any response body.
func (s *stream) endEarlyResponse() (a types.Action, done bool) {
	e := s.early
	s.early = nil
	if s.cutRequest(); s.replied {
		return types.ActionPause, true
	}
	a = s.responseHeaders(e.headers, false)
	return a, s.replied || s.respDone
}

// releaseEarlyResponse runs once phase 2 has passed the whole request,
// from the request's last callback: phase 3 on the held headers, then the
// response continues, or is answered locally (s.replied). The response
// has not ended (that would have cut the request). When Envoy gave the
// filter some of its body meanwhile, phase 4 reads it now, and the
// headers stay held with it until the body's end passes phase 4 in
// OnHttpResponseBody; else the headers go on (or stay held in hold mode)
// and the body follows as usual.
func (s *stream) releaseEarlyResponse() {
	e := s.early
	s.early = nil
	action := s.responseHeaders(e.headers, false)
	switch {
	case s.replied:
		return
	case s.respDone:
		// Phase 4 has run already: the body is not read.
		resumeResponse()
		return
	case e.bodySize > 0:
		if _, done := s.feedResponseBody(e.bodySize); done && !s.replied {
			// Phase 4 ran at SecResponseBodyLimit (ProcessPartial).
			resumeResponse()
		}
		return
	case action == types.ActionContinue:
		// Envoy delivers the body it held to the filter once the
		// headers continue.
		resumeResponse()
	}
	// Else hold mode keeps the response headers until phase 4 (hold.go).
}
