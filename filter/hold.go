package filter

import (
	"strconv"
	"time"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

// Holding headers until the body is inspected (hold_headers_until_inspected).
//
// By default the filter lets the request headers continue and pauses only
// the body while Coraza reads it: Envoy sends the headers upstream at once,
// and when phase 2 blocks, the upstream sees that request reset. The same
// holds for responses: the headers go downstream before phase 4 decides,
// so a block there can only reset the stream.
//
// With the mode on, the filter pauses the headers too (proxy-wasm Pause,
// Envoy's StopIteration) when the body will be read, and lets headers and
// body go together once the body's phase has passed; on a block the local
// reply replaces everything, and the upstream (or the client) never sees
// the held message. Envoy delivers body callbacks while headers are paused
// only with allow_on_headers_stop_iteration: true in the wasm filter's
// PluginConfig (Envoy 1.35+): without it a pause on headers holds the body
// back as well (docs/envoy-host-rules.md 2.2), and the stream would hang
// until Envoy's own timeouts. So until the first body callback arrives
// while headers are held, which shows that Envoy delivers them, every held
// stream is watched from the plugin's tick: one that gets no body callback
// within hold_headers_timeout_ms is answered 500, as the filter answers
// any stream it cannot inspect, with a log line that names the flag.

// hold records that the stream's headers (the response's when resp) are
// held until the body is inspected.
func (s *stream) hold(resp bool) {
	p := s.plugin
	if resp {
		s.respHeld = true
	} else {
		s.reqHeld = true
	}
	if p.holdSeen {
		return
	}
	if p.held == nil {
		p.held = map[uint32]*stream{}
	}
	s.heldSince = time.Now()
	p.held[s.id] = s
}

// bodyWhileHeld records a body callback while the headers are held: Envoy
// delivers bodies under held headers, so no stream needs watching any more.
func (s *stream) bodyWhileHeld() {
	p := s.plugin
	if !p.holdSeen {
		p.holdSeen = true
		clear(p.held)
	}
}

// unwatch stops watching the stream (it ended, or was answered).
func (s *stream) unwatch() {
	delete(s.plugin.held, s.id)
}

// OnTick answers the streams whose held headers got no body callback in
// time, while it is not known that Envoy delivers bodies under held
// headers. The plugin context calls it from its own OnTick.
func (p *Plugin) OnTick() {
	if len(p.held) == 0 {
		return
	}
	now := time.Now()
	for id, s := range p.held {
		if now.Sub(s.heldSince) < p.ops.holdTimeout {
			continue
		}
		delete(p.held, id)
		if err := proxywasm.SetEffectiveContext(id); err != nil {
			continue // the stream is gone
		}
		side := "request"
		if s.respHeld {
			side = "response"
		}
		proxywasm.LogError("waf: hold_headers_until_inspected: no " + side + " body reached the plugin within " +
			strconv.FormatInt(p.ops.holdTimeout.Milliseconds(), 10) + " ms of holding the " + side +
			" headers; Envoy delivers none while headers are held unless allow_on_headers_stop_iteration is true in the wasm filter's plugin config (Envoy 1.35+): set it, or set hold_headers_until_inspected to false; answering 500")
		p.metrics.holdTimeouts.Increment(1)
		s.failClosed()
	}
}

// NeedsTicks reports whether the plugin needs proxy_on_tick: to watch held
// headers (see OnTick).
func (p *Plugin) NeedsTicks() bool { return p.ops.holdHeaders }

// heldAction is what a headers callback returns for a message whose body
// the WAF reads: Pause (its headers held) in hold mode, else Continue.
func (s *stream) heldAction(resp bool) types.Action {
	if !s.plugin.ops.holdHeaders {
		return types.ActionContinue
	}
	s.hold(resp)
	return types.ActionPause
}
