package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/wafguard/wafguard/internal/jsonstrict"
)

// nativeRunner drives the plugin compiled into the test binary through the
// SDK's proxytest emulator, adding what the emulator leaves out of Envoy's
// behaviour (docs/envoy-host-rules.md, sections 2 and 3):
//
//   - a local reply sent from the request path ends the request and is then
//     run through the plugin's own response callbacks, which must continue;
//   - a local reply sent from the response headers replaces the response
//     without running the plugin again;
//   - a local reply sent from the response body, after the headers went
//     downstream, resets the stream (outcome status 0);
//   - the response phase only runs when the request was released upstream;
//   - headers the plugin pauses (hold_headers_until_inspected) are held
//     with the body: with allow_on_headers_stop_iteration (envoyConfig)
//     the body callbacks still come, and a body callback that continues
//     releases both; without it no body callback comes, which the plugin
//     only ends from its tick, through proxy_set_effective_context, which
//     the emulator does not honour: such an exchange ends stuck.
//
// Body accumulation while a body callback pauses is the emulator's own. The
// emulator keeps request headers readable in every phase, unlike Envoy; the
// filter never reads them after OnHttpRequestHeaders.
//
// proxytest keeps its state in package globals, so only one plugin may be
// loaded at a time and native subtests cannot run in parallel. Compiled WAFs
// are cached by the filter package itself (wafCache), so loading the same
// rules again is cheap.
type nativeRunner struct{}

// nativeProperties are the stream properties the emulator answers with.
var nativeProperties = [][2]string{
	{"source\x00address", "10.1.2.3:43210"},
	{"destination\x00address", "10.0.0.1:8080"},
	{"request\x00protocol", "HTTP/1.1"},
}

func (r nativeRunner) load(t testing.TB, config string) (loadedPlugin, error) {
	t.Helper()
	return r.loadEnvoy(t, config, envoyConfig{})
}

func (nativeRunner) loadEnvoy(t testing.TB, config string, env envoyConfig) (loadedPlugin, error) {
	t.Helper()
	opt := proxytest.NewEmulatorOption().
		WithVMContext(&testVM{}).
		WithPluginConfiguration([]byte(config))
	for _, p := range nativeProperties {
		opt = opt.WithProperty(strings.Split(p[0], "\x00"), []byte(p[1]))
	}
	host, reset := proxytest.NewHostEmulator(opt)
	if status := host.StartPlugin(); status != types.OnPluginStartStatusOK {
		lines := host.GetCriticalLogs()
		reset()
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	return &nativePlugin{host: host, reset: reset, env: env}, nil
}

type nativePlugin struct {
	host  proxytest.HostEmulator
	reset func()
	env   envoyConfig
}

func (p *nativePlugin) do(t testing.TB, ex exchange) outcome {
	t.Helper()
	h := p.host
	// The emulator's properties are the process's, so the route is set
	// for each exchange; it refuses an empty value, so a name no test
	// configures stands for no route.
	route := ex.route
	if route == "" {
		route = "(no route)"
	}
	if err := h.SetProperty(propRouteName, []byte(route)); err != nil {
		t.Fatal(err)
	}
	id := h.InitializeHttpContext()
	var out outcome

	reqHeaders := ex.requestHeaders()
	if ex.respAfter > 0 && ex.respAfter < len(ex.body) {
		return p.doEarly(t, id, ex, reqHeaders)
	}

	// Request path.
	endOfStream := ex.body == nil && !ex.reset
	action := h.CallOnRequestHeaders(id, reqHeaders, endOfStream)
	released := false
	if lr := h.GetSentLocalResponse(id); lr != nil {
		return p.finish(t, id, p.localReplyFromRequest(t, id, lr))
	}
	// released: every byte the client sent so far went upstream (the last
	// callback continued; a paused body is held in full, and so are
	// paused headers).
	released = action == types.ActionContinue
	out.upstreamHeaders = released
	if !released && ex.body != nil && !p.env.stopIteration {
		// The headers are held with the body: Envoy delivers no body
		// callback until the plugin resumes.
		p.finish(t, id, outcome{})
		return outcome{stuck: true}
	}
	for i, chunk := range ex.body {
		last := i == len(ex.body)-1 && !ex.reset
		action = h.CallOnRequestBody(id, chunk, last)
		if lr := h.GetSentLocalResponse(id); lr != nil {
			o := p.localReplyFromRequest(t, id, lr)
			o.upstreamHeaders = out.upstreamHeaders
			return p.finish(t, id, o)
		}
		released = action == types.ActionContinue
		out.upstreamHeaders = out.upstreamHeaders || released
		if released {
			out.upstreamBody = append(out.upstreamBody, h.GetCurrentRequestBody(id)...)
		}
	}
	if ex.reset {
		// The client went away before the end of its request: the
		// upstream never got a whole request, and nobody a response.
		return p.finish(t, id, outcome{})
	}
	if !released {
		t.Errorf("request: the filter still holds the request at its end (last action %v)", action)
		return p.finish(t, id, outcome{upstreamHeaders: out.upstreamHeaders})
	}
	out.upstream = true

	// Response path.
	status := ex.respStatus
	if status == 0 {
		status = 200
	}
	respHeaders := append([][2]string{{":status", strconv.Itoa(status)}}, ex.respHeaders...)
	action = h.CallOnResponseHeaders(id, respHeaders, ex.respBody == nil)
	if lr := h.GetSentLocalResponse(id); lr != nil {
		// Direct local reply: the upstream response is dropped.
		out.status, out.localReply = int(lr.StatusCode), true
		out.headers = append([][2]string{{":status", strconv.Itoa(int(lr.StatusCode))}}, lr.Headers...)
		out.body = append([]byte(nil), lr.Data...)
		return p.finish(t, id, out)
	}
	held := action != types.ActionContinue
	if held && (ex.respBody == nil || !p.env.stopIteration) {
		if ex.respBody == nil {
			t.Errorf("response headers: got action %v for a response without a body, want Continue", action)
		}
		p.finish(t, id, outcome{})
		return outcome{stuck: true, upstream: true, upstreamHeaders: true}
	}
	out.status = status
	out.headers = h.GetCurrentResponseHeaders(id)
	for i, chunk := range ex.respBody {
		last := i == len(ex.respBody)-1
		action = h.CallOnResponseBody(id, chunk, last)
		if lr := h.GetSentLocalResponse(id); lr != nil {
			if held {
				// The headers are still held: the reply replaces
				// the response.
				out.status, out.localReply = int(lr.StatusCode), true
				out.headers = append([][2]string{{":status", strconv.Itoa(int(lr.StatusCode))}}, lr.Headers...)
				out.body = append([]byte(nil), lr.Data...)
				return p.finish(t, id, out)
			}
			// The headers are gone: Envoy resets the stream.
			return p.finish(t, id, outcome{upstream: true, upstreamHeaders: true})
		}
		if action == types.ActionContinue {
			held = false
		}
		if action == types.ActionContinue {
			out.body = append(out.body, h.GetCurrentResponseBody(id)...)
		} else if last {
			t.Errorf("response: the filter still holds the response at its end (action %v)", action)
		}
	}
	return p.finish(t, id, out)
}

// localReplyFromRequest runs a local reply sent from the request path
// through the plugin's response callbacks, as Envoy's encoder chain does.
func (p *nativePlugin) localReplyFromRequest(t testing.TB, id uint32, lr *proxytest.LocalHttpResponse) outcome {
	t.Helper()
	h := p.host
	out := outcome{status: int(lr.StatusCode), localReply: true}
	body := append([]byte(nil), lr.Data...)
	headers := append([][2]string{{":status", strconv.Itoa(out.status)}}, lr.Headers...)
	headers = append(headers, [2]string{"content-length", strconv.Itoa(len(body))})
	if len(body) != 0 {
		headers = append(headers, [2]string{"content-type", "text/plain"})
	}
	if a := h.CallOnResponseHeaders(id, headers, len(body) == 0); a != types.ActionContinue {
		t.Errorf("local reply: response headers action %v, want Continue (the filter would stall its own reply)", a)
	}
	if len(body) != 0 {
		if a := h.CallOnResponseBody(id, body, true); a != types.ActionContinue {
			t.Errorf("local reply: response body action %v, want Continue", a)
		}
	}
	if again := h.GetSentLocalResponse(id); again != lr {
		t.Errorf("local reply: the filter sent a second local reply (%d) for its own reply", again.StatusCode)
	}
	out.headers = headers
	out.body = body
	return out
}

// finish ends the stream as Envoy does: proxy_on_log, proxy_on_done,
// proxy_on_delete (the emulator has no separate on_done for streams).
func (p *nativePlugin) finish(t testing.TB, id uint32, out outcome) outcome {
	p.host.CompleteHttpContext(id)
	return out
}

func (p *nativePlugin) logs() []string {
	// The emulator keeps one list per level, so lines are in order within
	// a level only.
	var out []string
	for _, l := range []struct {
		prefix string
		lines  []string
	}{
		{"trace: ", p.host.GetTraceLogs()},
		{"debug: ", p.host.GetDebugLogs()},
		{"info: ", p.host.GetInfoLogs()},
		{"warn: ", p.host.GetWarnLogs()},
		{"error: ", p.host.GetErrorLogs()},
		{"critical: ", p.host.GetCriticalLogs()},
	} {
		for _, line := range l.lines {
			out = append(out, l.prefix+line)
		}
	}
	return out
}

func (p *nativePlugin) metric(name string) (uint64, bool) {
	if v, err := p.host.GetCounterMetric(name); err == nil {
		return v, true
	}
	if v, err := p.host.GetGaugeMetric(name); err == nil {
		return v, true
	}
	return 0, false
}

func (p *nativePlugin) close() { p.reset() }

// parseConfig reads a whole plugin configuration for the filter's tests,
// which cannot import pluginconfig (it imports filter): the document
// decoded strictly with the admission and memory objects skipped, then
// Validate, as pluginconfig.Parse does. Errors in the document itself
// (unknown keys, JSON types) are worded by pluginconfig and tested there.
func parseConfig(data []byte) (*Config, error) {
	var doc struct {
		Config
		Admission json.RawMessage `json:"admission"`
		Memory    json.RawMessage `json:"memory"`
	}
	if len(bytes.TrimSpace(data)) != 0 {
		if err := jsonstrict.Decode(data, &doc); err != nil {
			return nil, err
		}
	}
	if err := doc.Validate(); err != nil {
		return nil, err
	}
	doc.Config.Digest = ConfigDigest(data)
	return &doc.Config, nil
}

// testVM mirrors main.go without the admission guard.
type testVM struct{ types.DefaultVMContext }

func (*testVM) NewPluginContext(uint32) types.PluginContext { return &testPluginContext{} }

type testPluginContext struct {
	types.DefaultPluginContext
	waf *Plugin
}

func (p *testPluginContext) OnPluginStart(int) types.OnPluginStartStatus {
	data, err := proxywasm.GetPluginConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		proxywasm.LogCriticalf("reading plugin configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	cfg, err := parseConfig(data)
	if err != nil {
		proxywasm.LogCritical(err.Error())
		return types.OnPluginStartStatusFailed
	}
	if p.waf, err = NewPlugin(cfg); err != nil {
		proxywasm.LogCritical(err.Error())
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *testPluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	return p.waf.NewHttpContext(contextID)
}

func (p *testPluginContext) OnPluginDone() bool {
	if p.waf != nil {
		p.waf.Done()
	}
	return true
}

// doEarly drives an exchange whose upstream answers after ex.respAfter
// request body chunks, before the rest (Envoy's filter manager runs the
// decode and encode paths independently): its headers and body arrive
// then, and its end after the request's end, or with the rest of it when
// ex.respEndsEarly. As in Envoy (docs/envoy-host-rules.md 2.6):
//
//   - response headers the filter pauses are held: with
//     allow_on_headers_stop_iteration the response body callbacks still
//     come, without it Envoy holds the body until the filter resumes
//     the response, then delivers what it held in one callback;
//   - a local reply sent while the filter holds the response headers is
//     written directly, replacing the response, without the filter's
//     response callbacks; once the headers went downstream it resets the
//     stream;
//   - once the response has ended at the filter manager, held or not, no
//     more request data reaches the filter, and the upstream request is
//     reset;
//   - proxy_continue_stream on the response (which the emulator forgets
//     when it comes from inside a callback: see resumeResponse) releases
//     the held response.
func (p *nativePlugin) doEarly(t testing.TB, id uint32, ex exchange, reqHeaders [][2]string) outcome {
	t.Helper()
	h := p.host
	var out outcome
	resumed := false
	defer func(orig func() error) { resumeResponse = orig }(resumeResponse)
	resumeResponse = func() error {
		resumed = true
		return nil
	}

	action := h.CallOnRequestHeaders(id, reqHeaders, false)
	if lr := h.GetSentLocalResponse(id); lr != nil {
		return p.finish(t, id, p.localReplyFromRequest(t, id, lr))
	}
	out.upstreamHeaders = action == types.ActionContinue
	if !out.upstreamHeaders {
		t.Errorf("early response: the request headers were held (action %v): the upstream cannot answer early", action)
		return p.finish(t, id, outcome{})
	}

	status := ex.upstreamStatus()
	respHeaders := append([][2]string{{":status", strconv.Itoa(status)}}, ex.respHeaders...)
	var (
		held      bool   // the filter paused the response headers
		respOut   bool   // the response headers went downstream
		respEnded bool   // the response's end reached the filter manager
		heldBody  []byte // response body Envoy holds for the filter (StopAll)
		sent      int    // response body chunks given to the filter or to heldBody
	)
	// reply is what the client sees of a local reply sent now.
	reply := func(lr *proxytest.LocalHttpResponse) outcome {
		if respOut {
			// The response went downstream: Envoy resets.
			return outcome{upstreamHeaders: true, upstreamBody: out.upstreamBody}
		}
		o := outcome{status: int(lr.StatusCode), localReply: true, upstreamHeaders: true, upstreamBody: out.upstreamBody}
		o.headers = append([][2]string{{":status", strconv.Itoa(int(lr.StatusCode))}}, lr.Headers...)
		o.body = append([]byte(nil), lr.Data...)
		return o
	}
	released := func() {
		held, respOut = false, true
		out.status, out.headers = status, h.GetCurrentResponseHeaders(id)
	}
	// respond gives the filter the response body chunks up to n (the
	// last with end of stream), or Envoy's buffer while it holds them.
	respond := func(n int) (outcome, bool) {
		for ; sent < n; sent++ {
			last := sent == len(ex.respBody)-1
			if last {
				respEnded = true
			}
			if held && !p.env.stopIteration {
				heldBody = append(heldBody, ex.respBody[sent]...)
				continue
			}
			a := h.CallOnResponseBody(id, ex.respBody[sent], last)
			if lr := h.GetSentLocalResponse(id); lr != nil {
				return reply(lr), true
			}
			if a == types.ActionContinue {
				if held {
					released()
				}
				out.body = append(out.body, h.GetCurrentResponseBody(id)...)
			}
		}
		return outcome{}, false
	}

	for i, chunk := range ex.body {
		if i == ex.respAfter {
			a := h.CallOnResponseHeaders(id, respHeaders, ex.respBody == nil)
			if lr := h.GetSentLocalResponse(id); lr != nil {
				return p.finish(t, id, reply(lr))
			}
			held = a != types.ActionContinue
			if !held {
				released()
			}
			if ex.respBody == nil {
				respEnded = true
			}
			n := len(ex.respBody) - 1
			if ex.respEndsEarly {
				n = len(ex.respBody)
			}
			if o, done := respond(n); done {
				return p.finish(t, id, o)
			}
		}
		if respEnded {
			// Envoy delivers no more of the request.
			break
		}
		last := i == len(ex.body)-1 && !ex.reset
		action = h.CallOnRequestBody(id, chunk, last)
		if lr := h.GetSentLocalResponse(id); lr != nil {
			if i < ex.respAfter {
				o := p.localReplyFromRequest(t, id, lr)
				o.upstreamHeaders, o.upstreamBody = true, out.upstreamBody
				return p.finish(t, id, o)
			}
			return p.finish(t, id, reply(lr))
		}
		if action == types.ActionContinue {
			out.upstreamBody = append(out.upstreamBody, h.GetCurrentRequestBody(id)...)
			out.upstream = last
		}
	}
	if ex.reset && !respEnded {
		return p.finish(t, id, outcome{upstreamHeaders: true, upstreamBody: out.upstreamBody})
	}
	if !respEnded && !out.upstream {
		t.Errorf("request: the filter still holds the request at its end (last action %v)", action)
		return p.finish(t, id, outcome{upstreamHeaders: true, upstreamBody: out.upstreamBody})
	}
	if held && resumed {
		released()
		if heldBody != nil {
			// Envoy delivers what it held in one callback.
			a := h.CallOnResponseBody(id, heldBody, respEnded)
			if lr := h.GetSentLocalResponse(id); lr != nil {
				return p.finish(t, id, reply(lr))
			}
			if a == types.ActionContinue {
				out.body = append(out.body, h.GetCurrentResponseBody(id)...)
			}
		} else if p.env.stopIteration {
			// The body the filter kept buffered goes with the headers.
			out.body = append(out.body, h.GetCurrentResponseBody(id)...)
		}
	}
	if held && !p.env.stopIteration || held && respEnded {
		// Nothing more comes that could release the response: Envoy's
		// stream idle timeout ends the stream.
		p.finish(t, id, outcome{})
		return outcome{stuck: true, upstreamHeaders: true, upstreamBody: out.upstreamBody}
	}
	if o, done := respond(len(ex.respBody)); done {
		return p.finish(t, id, o)
	}
	if held {
		t.Errorf("response: the filter still holds the response at its end")
	}
	return p.finish(t, id, out)
}
