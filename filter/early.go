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
//     phase 3 on the held headers, phase 4 on the held body when the
//     response has already ended, and lets the response continue
//     (proxy_continue_stream), or answers locally if phase 3 or 4 blocks.
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
	// ended is set once the response ended: end of stream on the headers
	// or on a body chunk, or trailers.
	ended bool
}

// resumeResponse is proxywasm.ResumeHttpResponse; the native runner
// replaces it to see the call, which the SDK's emulator forgets when it
// comes from inside a callback.
var resumeResponse = proxywasm.ResumeHttpResponse

// holdEarlyResponse pauses the response headers that arrived before the
// request ended (see above).
func (s *stream) holdEarlyResponse(headers [][2]string, endOfStream bool) types.Action {
	s.early = &earlyResponse{headers: headers, ended: endOfStream}
	s.plugin.metrics.earlyResponses.Increment(1)
	proxywasm.LogDebug("waf: the upstream answered before the request ended; its response waits until phase 2 has passed the whole request body, unique_id " + s.tx.ID())
	return types.ActionPause
}

// body records a response body callback while the response waits, and
// keeps the body buffered in Envoy, unread.
func (e *earlyResponse) body(bodySize int, endOfStream bool) types.Action {
	e.bodySize = bodySize
	e.ended = e.ended || endOfStream
	return types.ActionPause
}

// trailers records the response's trailers while the response waits.
func (e *earlyResponse) trailers() types.Action {
	e.ended = true
	return types.ActionPause
}

// releaseEarlyResponse runs once phase 2 has passed the request: phase 3
// on the held headers, phase 4 when the response has ended, then the
// response continues, or is answered locally (s.replied). A response
// whose body is still coming stays paused when the filter already reads
// its body; its body callbacks then go on as usual and release headers
// and body together.
func (s *stream) releaseEarlyResponse() {
	e := s.early
	s.early = nil
	action := s.responseHeaders(e.headers, e.ended && e.bodySize == 0)
	switch {
	case s.replied:
		return
	case s.respDone:
		// Phase 4 has run already: no body to read.
		resumeResponse()
		return
	}
	if e.bodySize > 0 {
		// The body Envoy buffered for the filter while it waited.
		chunk, err := proxywasm.GetHttpResponseBody(0, e.bodySize)
		if err != nil {
			proxywasm.LogError("waf: reading the response body held while the request ended: " + err.Error())
			s.failClosed()
			return
		}
		s.respBodySeen = e.bodySize
		it, n, err := s.tx.WriteResponseBody(chunk)
		if err != nil {
			proxywasm.LogError("waf: buffering the response body: " + err.Error())
			s.failClosed()
			return
		}
		if it != nil {
			s.interrupt(it, phaseResponseBody)
			return
		}
		if n < len(chunk) || e.ended {
			if s.finishResponseBody(); !s.replied {
				resumeResponse()
			}
		}
		// Else the headers stay held with the body read so far, and
		// OnHttpResponseBody goes on from respBodySeen.
		return
	}
	if e.ended {
		// Trailers ended a response without a body.
		if s.finishResponseBody(); !s.replied {
			resumeResponse()
		}
		return
	}
	if action == types.ActionContinue {
		// The body follows: Envoy delivers what it held to the filter
		// once the headers continue.
		resumeResponse()
	}
	// Else hold mode keeps the response headers until phase 4 (hold.go).
}
