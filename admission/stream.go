package admission

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/localreply"
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
	// counted is true from admission until OnHttpStreamDone: the stream
	// counts against max_inflight_per_vm and holds reserved bytes of the
	// VM's heap budget.
	counted  bool
	reserved int64

	// Request body accounting: when the previous body callback paused,
	// Envoy reports the size of everything buffered since then, else the
	// size of the new chunk only.
	bodyPaused bool
	bodyBase   int64
	bodyTotal  int64
}

// OnHttpRequestHeaders implements types.HttpContext. The checks run from
// the cheapest to the one that writes shared data, so a stream refused
// locally never touches the process-wide count: the body-size limit (413),
// this VM's memory (429, or 413 for a body that could never fit), the
// per-VM cap, then the process-wide and per-authority caps.
func (s *stream) OnHttpRequestHeaders(numHeaders int, endOfStream bool) types.Action {
	g := s.g
	var cl int64
	if limit := g.cfg.MaxRequestBodyBytes; limit > 0 || g.mem.on {
		if v, ok := g.host.requestHeader("content-length"); ok {
			if limit > 0 && httpsyntax.ContentLengthOver(v, limit) {
				return s.reply413()
			}
			cl, _ = httpsyntax.ContentLength(v)
		}
	}
	var need int64
	if g.mem.on {
		need = g.mem.need(cl)
		switch g.mem.grow(0, need) {
		case memNever:
			return s.reply413()
		case memFull:
			return s.reply429(rejectedMemory, -1)
		}
	}
	if g.cfg.MaxInflightPerVM > 0 && g.vm >= uint32(g.cfg.MaxInflightPerVM) {
		g.mem.release(need)
		return s.reply429(rejectedVMCap, -1)
	}
	if g.capOn {
		ai := -1
		if len(g.auth) > 0 {
			if a, ok := g.host.requestHeader(":authority"); ok {
				ai = g.authorityIndex(a)
			}
		}
		if v := g.acquire(ai); v != admitted {
			g.mem.release(need)
			return s.reply429(v, ai)
		}
		s.held, s.ai = true, ai
	} else {
		g.m.admitted.Increment(1) // acquire counts the others
	}
	s.reserved = need
	s.counted = true
	g.vm++
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
	g := s.g
	if limit := g.cfg.MaxRequestBodyBytes; limit > 0 || g.mem.on {
		if !s.bodyPaused {
			s.bodyBase = s.bodyTotal
		}
		s.bodyTotal = s.bodyBase + int64(bodySize)
		if limit > 0 && s.bodyTotal > limit {
			return s.reply413()
		}
		// A body longer than its Content-Length (or without one)
		// reserves as it arrives; past the budget the stream is refused
		// like a new one (429), or 413 when it alone could never fit.
		if g.mem.on {
			need := g.mem.need(s.bodyTotal)
			switch g.mem.grow(s.reserved, need) {
			case memNever:
				return s.reply413()
			case memFull:
				return s.reply429(rejectedMemory, -1)
			}
			s.reserved = max(s.reserved, need)
			if endOfStream && !g.mem.settled(s.reserved) {
				return s.reply429(rejectedMemory, -1)
			}
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
	if s.counted {
		s.counted = false
		s.g.vm--
		s.g.mem.release(s.reserved)
		s.g.mem.ended = true
		s.reserved = 0
	}
	if s.inner != nil {
		s.inner.OnHttpStreamDone()
	}
}

func (s *stream) reply429(v verdict, ai int) types.Action {
	g := s.g
	capN := uint32(g.cfg.MaxInflight)
	reason := localreply.Prefix + "admission_cas_exhausted"
	switch v {
	case rejectedCap:
		g.m.rejectedCap.Increment(1)
		reason = localreply.Prefix + "admission_cap"
	case rejectedAuthority:
		g.m.rejectedAuthority.Increment(1)
		capN = g.auth[ai].cap
		reason = localreply.Prefix + "admission_authority_cap"
	case rejectedVMCap:
		g.m.rejectedVMCap.Increment(1)
		capN = uint32(g.cfg.MaxInflightPerVM)
		reason = localreply.Prefix + "admission_vm_cap"
	case rejectedMemory:
		g.m.rejectedMemory.Increment(1)
		g.mem.shed = true
		capN = max(g.vm, 1)
		reason = localreply.Prefix + "admission_memory"
	default:
		g.m.rejectedCAS.Increment(1)
		if ai >= 0 && capN == 0 {
			capN = g.auth[ai].cap
		}
	}
	g.windowRejects++
	s.replied = true
	_ = g.host.sendReply(429, reason, g.replyHeaders(g.retryAfter(capN)), g.body429)
	return types.ActionPause
}

func (s *stream) reply413() types.Action {
	g := s.g
	g.m.rejectedBody.Increment(1)
	s.replied = true
	_ = g.host.sendReply(413, localreply.Prefix+"admission_body_size", g.headers413, body413)
	return types.ActionPause
}

var _ types.HttpContext = (*stream)(nil)
