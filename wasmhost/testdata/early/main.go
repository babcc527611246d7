// Command early holds an upstream response that arrives before the request
// has ended, and logs every callback, for the wasmhost and v8host tests of
// Envoy's rules for such responses (docs/envoy-host-rules.md 2.6). Its
// plugin configuration is a list of words:
//
//	hold    pause the response headers while the request has not ended,
//	        and pause response body chunks that come meanwhile
//	pass    let each request body chunk continue (else the body is
//	        buffered to its end)
//	resume  at the end of the request, resume a held response
//	reply   at the end of the request, answer 403 locally
//	peek    at the end of the request, log the response body buffered
//
// The tests build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o early.wasm ./wasmhost/testdata/early
package main

import (
	"fmt"
	"strings"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"
)

func init() { proxywasm.SetVMContext(&vm{}) }

func main() {}

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct {
	types.DefaultPluginContext
	words map[string]bool
}

func (p *plugin) OnPluginStart(int) types.OnPluginStartStatus {
	b, err := proxywasm.GetPluginConfiguration()
	if err != nil && err != types.ErrorStatusNotFound {
		proxywasm.LogCriticalf("plugin configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	p.words = map[string]bool{}
	for _, w := range strings.Fields(string(b)) {
		p.words[w] = true
	}
	return types.OnPluginStartStatusOK
}

func (p *plugin) NewHttpContext(uint32) types.HttpContext { return &stream{w: p.words} }

type stream struct {
	types.DefaultHttpContext
	w          map[string]bool
	requestEnd bool // the request's end reached the filter
	held       bool // the response headers are paused
}

func (s *stream) OnHttpRequestHeaders(_ int, eos bool) types.Action {
	proxywasm.LogInfof("request_headers eos=%v", eos)
	if eos {
		s.end()
	}
	return types.ActionContinue
}

func (s *stream) OnHttpRequestBody(size int, eos bool) types.Action {
	b, _ := proxywasm.GetHttpRequestBody(0, size)
	proxywasm.LogInfof("request_body %d %q eos=%v", size, b, eos)
	if eos {
		return s.end()
	}
	if s.w["pass"] {
		return types.ActionContinue
	}
	return types.ActionPause
}

func (s *stream) OnHttpRequestTrailers(int) types.Action {
	proxywasm.LogInfo("request_trailers")
	return s.end()
}

// end runs at the end of the request.
func (s *stream) end() types.Action {
	s.requestEnd = true
	if s.w["peek"] {
		b, err := proxywasm.GetHttpResponseBody(0, 1<<20)
		proxywasm.LogInfof("peek %q %v", b, err)
	}
	if s.w["reply"] {
		_ = proxywasm.SendHttpResponse(403, [][2]string{{"x-early", "reply"}}, []byte("blocked"), -1)
		return types.ActionPause
	}
	if s.w["resume"] && s.held {
		s.held = false
		if err := proxywasm.ResumeHttpResponse(); err != nil {
			proxywasm.LogErrorf("resume: %v", err)
		}
		proxywasm.LogInfo("resume")
	}
	return types.ActionContinue
}

func (s *stream) OnHttpResponseHeaders(_ int, eos bool) types.Action {
	st, _ := proxywasm.GetHttpResponseHeader(":status")
	proxywasm.LogInfof("response_headers %s eos=%v request_end=%v", st, eos, s.requestEnd)
	if s.w["hold"] && !s.requestEnd {
		s.held = true
		return types.ActionPause
	}
	return types.ActionContinue
}

func (s *stream) OnHttpResponseBody(size int, eos bool) types.Action {
	b, _ := proxywasm.GetHttpResponseBody(0, size)
	proxywasm.LogInfof("response_body %d %q eos=%v", size, b, eos)
	if s.held {
		return types.ActionPause
	}
	return types.ActionContinue
}

func (s *stream) OnHttpStreamDone() { proxywasm.LogInfo(fmt.Sprintf("done held=%v", s.held)) }
