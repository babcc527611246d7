package admission

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/wafguard/wafguard/internal/httpsyntax"
)

// Wrap returns the HTTP context for a new stream. With admission off (no cap
// and no body limit, or before Start) it returns next(contextID) itself.
// Otherwise the returned context decides on the request headers, before the
// inner context exists: an admitted stream takes a slot and only then calls
// next; a rejected one gets a local reply (429 or 413) and next is never
// called, so the inner filter allocates nothing for it.
func (g *Guard) Wrap(contextID uint32, next func(contextID uint32) types.HttpContext) types.HttpContext {
	if !g.enabled {
		return next(contextID)
	}
	return &stream{g: g, id: contextID, next: next, ai: -1}
}

// stream wraps one inner HTTP context.
//
// # Notes
//
//   - held is true from a successful acquire until the release in
//     OnHttpStreamDone, so the slot is released exactly once. Envoy calls
//     OnHttpStreamDone (proxy_on_log) for every stream that has a context,
//     resets and local replies included; a VM that trapped calls nothing,
//     and the repair in OnTick returns its slots.
//   - After this wrapper sent a local reply, request callbacks are not
//     passed on (Envoy stops them anyway) and the reply's own response
//     callbacks are answered Continue without the inner context, which
//     never saw the end of the request. The inner context still gets
//     OnHttpStreamDone.
type stream struct {
	g     *Guard
	id    uint32
	next  func(uint32) types.HttpContext
	inner types.HttpContext
	ai    int // per_authority index of the held slot, -1 for none

	held    bool
	replied bool

	// Request body accounting: when the previous body callback paused,
	// Envoy reports the size of everything buffered since then, else the
	// size of the new chunk only.
	bodyPaused bool
	bodyBase   int64
	bodyTotal  int64
}

// OnHttpRequestHeaders implements types.HttpContext.
func (s *stream) OnHttpRequestHeaders(numHeaders int, endOfStream bool) types.Action {
	g := s.g
	if limit := g.cfg.MaxRequestBodyBytes; limit > 0 {
		if cl, ok := g.host.requestHeader("content-length"); ok && httpsyntax.ContentLengthOver(cl, limit) {
			return s.reply413()
		}
	}
	if g.capOn {
		ai := -1
		if len(g.auth) > 0 {
			if a, ok := g.host.requestHeader(":authority"); ok {
				ai = g.authorityIndex(a)
			}
		}
		if v := g.acquire(ai); v != admitted {
			return s.reply429(v, ai)
		}
		s.held, s.ai = true, ai
	}
	s.inner = s.next(s.id)
	if s.inner == nil {
		return types.ActionContinue
	}
	return s.inner.OnHttpRequestHeaders(numHeaders, endOfStream)
}

// OnHttpRequestBody implements types.HttpContext.
func (s *stream) OnHttpRequestBody(bodySize int, endOfStream bool) types.Action {
	if s.replied {
		return types.ActionPause
	}
	if limit := s.g.cfg.MaxRequestBodyBytes; limit > 0 {
		if !s.bodyPaused {
			s.bodyBase = s.bodyTotal
		}
		s.bodyTotal = s.bodyBase + int64(bodySize)
		if s.bodyTotal > limit {
			return s.reply413()
		}
	}
	if s.inner == nil {
		return types.ActionContinue
	}
	a := s.inner.OnHttpRequestBody(bodySize, endOfStream)
	s.bodyPaused = a == types.ActionPause
	return a
}

// OnHttpRequestTrailers implements types.HttpContext.
func (s *stream) OnHttpRequestTrailers(numTrailers int) types.Action {
	if s.replied {
		return types.ActionPause
	}
	if s.inner == nil {
		return types.ActionContinue
	}
	return s.inner.OnHttpRequestTrailers(numTrailers)
}

// OnHttpResponseHeaders implements types.HttpContext.
func (s *stream) OnHttpResponseHeaders(numHeaders int, endOfStream bool) types.Action {
	if s.replied || s.inner == nil {
		return types.ActionContinue
	}
	return s.inner.OnHttpResponseHeaders(numHeaders, endOfStream)
}

// OnHttpResponseBody implements types.HttpContext.
func (s *stream) OnHttpResponseBody(bodySize int, endOfStream bool) types.Action {
	if s.replied || s.inner == nil {
		return types.ActionContinue
	}
	return s.inner.OnHttpResponseBody(bodySize, endOfStream)
}

// OnHttpResponseTrailers implements types.HttpContext.
func (s *stream) OnHttpResponseTrailers(numTrailers int) types.Action {
	if s.replied || s.inner == nil {
		return types.ActionContinue
	}
	return s.inner.OnHttpResponseTrailers(numTrailers)
}

// OnHttpStreamDone implements types.HttpContext.
func (s *stream) OnHttpStreamDone() {
	if s.held {
		s.held = false
		s.g.release(s.ai)
	}
	if s.inner != nil {
		s.inner.OnHttpStreamDone()
	}
}

func (s *stream) reply429(v verdict, ai int) types.Action {
	g := s.g
	capN := uint32(g.cfg.MaxInflight)
	switch v {
	case rejectedCap:
		g.m.rejectedCap.Increment(1)
	case rejectedAuthority:
		g.m.rejectedAuthority.Increment(1)
		capN = g.auth[ai].cap
	default:
		g.m.rejectedCAS.Increment(1)
		if ai >= 0 && capN == 0 {
			capN = g.auth[ai].cap
		}
	}
	g.windowRejects++
	s.replied = true
	_ = g.host.sendReply(429, g.replyHeaders(g.retryAfter(capN)), g.body429)
	return types.ActionPause
}

func (s *stream) reply413() types.Action {
	g := s.g
	g.m.rejectedBody.Increment(1)
	s.replied = true
	_ = g.host.sendReply(413, g.headers413, body413)
	return types.ActionPause
}

var _ types.HttpContext = (*stream)(nil)
