package filter

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"

	"github.com/wafguard/wafguard/filter/transform"
)

// The form body, every value of it.
//
// Coraza v3.8.1's URLENCODED body processor gathers a form's fields in a
// Go map keyed by their exact names, then stores each name's values with
// Set into ARGS_POST, a collection whose keys ignore case. Two fields whose
// names differ only in case ("A=<attack>&a=x", or "%41=<attack>&a=x")
// fold to one key there, and the second Set replaces the first: one of the
// two values is gone before any rule runs, and which one follows Go's map
// order, at random. Every rule on ARGS, ARGS_POST or ARGS_POST_NAMES then
// misses it about half the time. The query string has no such hole:
// Coraza adds its arguments one by one, in order.
//
// formBody takes the place of that processor under its name, through
// Coraza's public registry (plugins.RegisterBodyProcessor, which replaces
// a processor of the same name): it parses the body as Coraza parses a
// query string (pairs split at '&', empty pairs skipped, the name up to
// the first '=', both unescaped by the plugin's t:urlDecode: '+' is a
// space, a '%' not followed by two hex digits stays as it is), stops after
// SecArgumentsLimit pairs and marks the limit reached as Coraza does, and
// adds every pair to ARGS_POST in the order of the body. For a body
// whose names do not collide, ARGS_POST holds what Coraza's processor put
// there; for one whose names collide, it holds every value, under each
// field's own name (which is what ModSecurity does). REQUEST_BODY and
// REQUEST_BODY_LENGTH are set as Coraza sets them.
//
// The processor is registered by this package's init, so it serves every
// WAF of the process, the plugin's and any other.

// formBodyProcessor is the name Coraza's registry knows the URLENCODED
// processor by (it looks names up in lower case).
const formBodyProcessor = "urlencoded"

func init() {
	if urlDecode == nil {
		panic("filter: filter/transform has no urlDecode for the form body processor")
	}
	plugins.RegisterBodyProcessor(formBodyProcessor, func() plugintypes.BodyProcessor { return formBody{} })
}

// formBody is the request body processor described above.
type formBody struct{}

// urlDecode is the plugin's t:urlDecode (filter/transform), which decodes
// as Coraza unescapes a query string's names and values: '+' is a space,
// "%XY" (two hex digits) the byte XY, and any other '%' stays as it is.
var urlDecode, _ = transform.Lookup("urlDecode")

// formUnescape is s with its form encoding undone (urlDecode).
func formUnescape(s string) string {
	out, _, _ := urlDecode(s)
	return out
}

// errFormVariables is returned when Coraza's variables lack the setter
// the processor needs: Coraza then sets REQBODY_ERROR, and the
// recommended rule 200002 denies the request.
var errFormVariables = errors.New("form body processor: the transaction's variables cannot be set")

// ProcessRequest implements plugintypes.BodyProcessor.
func (formBody) ProcessRequest(r io.Reader, v plugintypes.TransactionVariables, opts plugintypes.BodyProcessorOptions) error {
	body, ok1 := v.RequestBody().(setter)
	length, ok2 := v.RequestBodyLength().(setter)
	limited, ok3 := v.ArgumentsLimitReached().(setter)
	if !ok1 || !ok2 || !ok3 {
		return errFormVariables
	}
	b := readBuffers.Get().(*bytes.Buffer)
	defer releaseReadBuffer(b)
	if _, err := b.ReadFrom(r); err != nil {
		return err
	}
	text := b.String()
	args := v.ArgsPost()
	if eachFormPair(text, opts.ArgumentLimit, args.Add) {
		limited.Set("1")
	}
	body.Set(text)
	length.Set(strconv.Itoa(len(text)))
	return nil
}

// ProcessResponse implements plugintypes.BodyProcessor: Coraza's
// URLENCODED processor reads nothing from a response either.
func (formBody) ProcessResponse(io.Reader, plugintypes.TransactionVariables, plugintypes.BodyProcessorOptions) error {
	return nil
}

// eachFormPair calls add with each name and value of the form text, in
// order, unescaped, and reports whether it stopped at limit pairs with
// more to come (limit ≤ 0: no limit).
func eachFormPair(text string, limit int, add func(name, value string)) (truncated bool) {
	n := 0
	for text != "" {
		var pair string
		pair, text, _ = strings.Cut(text, "&")
		if pair == "" {
			continue
		}
		if limit > 0 && n >= limit {
			return true
		}
		name, value, _ := strings.Cut(pair, "=")
		add(formUnescape(name), formUnescape(value))
		n++
	}
	return false
}
