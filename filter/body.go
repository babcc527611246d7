package filter

// The filter's own request-body handling, ahead of Coraza's: the no-files
// limit, the JSON nesting scan, and raw processing of opaque types.

import (
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/wafguard/wafguard/internal/httpsyntax"
	"github.com/wafguard/wafguard/internal/localreply"
)

// prepareRequestBody applies the filter's own request-body settings before
// the body arrives: the no-files limit on Content-Length, the JSON depth
// scan, and raw processing of opaque content types. stop is true when the
// stream was answered.
func (s *stream) prepareRequestBody(contentType, contentLength string) (types.Action, bool) {
	ops := &s.plugin.ops
	mt := ""
	if contentType != "" {
		mt = httpsyntax.MediaType(contentType)
	}
	s.multipart = mt == "multipart/form-data"
	if ops.noFilesLimit > 0 && !s.multipart && httpsyntax.ContentLengthOver(contentLength, ops.noFilesLimit) {
		return s.rejectBody(statusBodyTooLarge, actionBodyLimit), true
	}
	s.scanJSON = ops.jsonMaxDepth > 0 && isJSONMediaType(mt)
	if mt != "" && len(ops.rawTypes) != 0 {
		for _, t := range ops.rawTypes {
			if t == mt {
				s.useRawBodyProcessor()
				break
			}
		}
	}
	return types.ActionContinue, false
}

// settable is Coraza's collections.Single, whose Set the public
// collection.Single interface leaves out.
type settable interface {
	Get() string
	Set(string)
}

// useRawBodyProcessor makes Coraza keep the request body as REQUEST_BODY
// only (its "raw" body processor), unless a rule already chose a processor.
// Without it, the CRS forces URLENCODED on bodies of unknown types
// (rule 901340, ctl:forceRequestBodyVariable), which turns arbitrary bytes
// into ARGS_POST.
func (s *stream) useRawBodyProcessor() {
	ts, ok := s.tx.(plugintypes.TransactionState)
	if !ok {
		return
	}
	if rbp, ok := ts.Variables().RequestBodyProcessor().(settable); ok && rbp.Get() == "" {
		rbp.Set("RAW")
	}
}

// rejectBody answers a request whose body breaks one of the filter's own
// limits. Like Coraza's body limits, it counts as an interruption by rule 0.
func (s *stream) rejectBody(status int, a txAction) types.Action {
	s.replied = true
	s.reqDone, s.respDone = true, true
	s.plugin.metrics.countInterruption(0, phaseRequestBody)
	var headers [][2]string
	var body []byte
	if d := s.rules.deny; d != nil {
		headers, body = d.headers, d.body
	}
	s.record(a, 0, phaseRequestBody, status)
	proxywasm.LogInfo("waf: request body refused (" + a.String() + "), status " + strconv.Itoa(status) + ", unique_id " + s.tx.ID())
	if err := localreply.Send(uint32(status), localreply.Prefix+a.String(), headers, body); err != nil {
		proxywasm.LogError("waf: sending the local reply for " + a.String() + ": " + err.Error())
	}
	return types.ActionPause
}

// isJSONMediaType reports application/json and application/*+json.
func isJSONMediaType(mt string) bool {
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// jsonDepth tracks the nesting of a JSON text fed in chunks, without
// parsing it: only brackets outside strings count. Malformed JSON is left to
// Coraza's JSON body processor.
type jsonDepth struct {
	depth    int
	inString bool
	escaped  bool
}

// feed scans b and reports whether the nesting went past max.
func (j *jsonDepth) feed(b []byte, max int) bool {
	for _, c := range b {
		if j.inString {
			switch {
			case j.escaped:
				j.escaped = false
			case c == '\\':
				j.escaped = true
			case c == '"':
				j.inString = false
			}
			continue
		}
		switch c {
		case '"':
			j.inString = true
		case '{', '[':
			j.depth++
			if j.depth > max {
				return true
			}
		case '}', ']':
			if j.depth > 0 {
				j.depth--
			}
		}
	}
	return false
}
