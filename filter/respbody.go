package filter

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
)

// The response body, read once.
//
// Without a response body processor, Coraza reads the buffered response
// body into RESPONSE_BODY through io.Copy into a strings.Builder, which
// allocates a 32 KiB copy buffer for every response (and grows the
// builder by doubling): for a small page that is most of what the
// response phase allocates, and in wasm a large allocation costs a heap
// span each time. rawResponse is a body processor that sets the same two
// variables the same way, RESPONSE_BODY to the whole buffered body and
// RESPONSE_CONTENT_LENGTH to its length in bytes, reading through a
// reused buffer and copying the body once into a string of its size.
//
// A transaction of a rule set compiled with the preselection starts with
// RES_BODY_PROCESSOR naming it (preludeWAF), unless some text of the rule
// set (a directive or an included file) mentions RES_BODY_PROCESSOR in
// any case: the only difference a rule could see is that variable's
// value. A ctl:responseBodyProcessor sets another processor, as it would
// have without this one. Coraza runs a processor only when it would have
// read the body itself (SecResponseBodyAccess on, a processable MIME
// type).

// rawResponseProcessor is rawResponse's name in Coraza's registry (which
// looks names up in lower case).
const rawResponseProcessor = "wafguard_raw_response"

func init() {
	plugins.RegisterBodyProcessor(rawResponseProcessor, func() plugintypes.BodyProcessor { return rawResponse{} })
}

// rawResponse is the response body processor described above.
type rawResponse struct{}

// readBuffers holds the buffers the bodies are read through. In wasm, one
// transaction runs at a time; natively, transactions take one each.
var readBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxKeptReadBuffer is the largest read buffer kept for the next body; a
// larger one is left to the collector.
const maxKeptReadBuffer = 256 << 10

// releaseReadBuffer hands b back to readBuffers when it is at most
// maxKeptReadBuffer, and reports whether it did.
func releaseReadBuffer(b *bytes.Buffer) bool {
	if b.Cap() > maxKeptReadBuffer {
		return false
	}
	b.Reset()
	readBuffers.Put(b)
	return true
}

// setter is what a collection of Coraza's transaction variables has to
// set a value (collections.Single).
type setter interface{ Set(string) }

// ProcessRequest implements plugintypes.BodyProcessor: rawResponse is
// never a request body processor.
func (rawResponse) ProcessRequest(io.Reader, plugintypes.TransactionVariables, plugintypes.BodyProcessorOptions) error {
	return errors.New(rawResponseProcessor + " reads response bodies only")
}

// ProcessResponse implements plugintypes.BodyProcessor.
func (rawResponse) ProcessResponse(r io.Reader, v plugintypes.TransactionVariables, _ plugintypes.BodyProcessorOptions) error {
	body, ok1 := v.ResponseBody().(setter)
	length, ok2 := v.ResponseContentLength().(setter)
	if !ok1 || !ok2 {
		return errors.New(rawResponseProcessor + ": the transaction's variables cannot be set")
	}
	b := readBuffers.Get().(*bytes.Buffer)
	defer releaseReadBuffer(b)
	if _, err := b.ReadFrom(r); err != nil {
		return err
	}
	body.Set(b.String())
	length.Set(strconv.Itoa(b.Len()))
	return nil
}

// useRawResponse makes rawResponse the response body processor of tx.
func useRawResponse(tx types.Transaction) {
	ts, ok := tx.(plugintypes.TransactionState)
	if !ok {
		return
	}
	if p, ok := ts.Variables().ResponseBodyProcessor().(setter); ok {
		p.Set(rawResponseProcessor)
	}
}

// mentionsResBodyProcessor reports whether a rule set's text names
// RES_BODY_PROCESSOR (or one of the variables named after it), in any
// case. It looks at each underscore, without a lower-case copy of the
// text (the CRS is over a megabyte).
func mentionsResBodyProcessor(text string) bool {
	const word = "res_body_processor"
	for i := 0; ; {
		k := strings.IndexByte(text[i:], '_')
		if k < 0 {
			return false
		}
		i += k
		if start := i - len("res"); start >= 0 && start+len(word) <= len(text) && strings.EqualFold(text[start:start+len(word)], word) {
			return true
		}
		i++
	}
}
