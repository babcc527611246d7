package filter

import (
	"bytes"
	"io"
	"log"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The fuzz targets replay their seeds and testdata/fuzz/<target>/ under plain
// `go test`. To fuzz one (at most a minute at a time on a shared machine):
//
//	go test ./filter -run '^$' -fuzz '^FuzzRequest$' -fuzztime 60s -parallel 1
//	go test ./filter -run '^$' -fuzz '^FuzzRequest_crs$' -fuzztime 60s -parallel 1
//
// Inputs the fuzzer finds land in testdata/fuzz/<target>/; keep the ones
// that failed, once fixed, so that CI replays them.

// fuzzRules is the small rule set of FuzzRequest: Coraza's recommended
// settings (body processors for urlencoded, multipart, JSON and XML, and the
// body-error rules 200002 and 200003) and one rule that blocks a marker
// wherever a parser may put it. It is fast enough for thousands of inputs a
// second, where the CRS manages tens.
var fuzzRules = ruleConfig(
	"Include @recommended-conf",
	"SecRuleEngine On",
	"SecResponseBodyAccess Off",
	`SecRule REQUEST_URI|ARGS|ARGS_NAMES|REQUEST_HEADERS|REQUEST_HEADERS_NAMES|REQUEST_COOKIES|REQUEST_COOKIES_NAMES|FILES|FILES_NAMES|XML:/* "@contains evilmarker" "id:9001,phase:2,deny,status:403,t:none,t:lowercase,log"`,
)

// fuzzMarker is the string fuzzRules blocks.
const fuzzMarker = "evilmarker"

// fuzzPlugin keeps one loaded plugin per configuration for the whole fuzz
// process: proxytest is global state, so exchanges are serialised, and the
// plugin is reloaded every fuzzReloadEvery exchanges so that the emulator's
// log lists stay small.
type fuzzPlugin struct {
	mu     sync.Mutex
	config string
	p      loadedPlugin
	n      int
}

const fuzzReloadEvery = 2000

func (fp *fuzzPlugin) close() {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.p != nil {
		fp.p.close()
		fp.p = nil
	}
}

func (fp *fuzzPlugin) get(t testing.TB) *nativePlugin {
	if fp.p != nil && fp.n >= fuzzReloadEvery {
		fp.p.close()
		fp.p = nil
	}
	if fp.p == nil {
		p, err := nativeRunner{}.load(t, fp.config)
		if err != nil {
			t.Fatalf("loading the fuzz plugin: %v", err)
		}
		fp.p, fp.n = p, 0
	}
	fp.n++
	return fp.p.(*nativePlugin)
}

// Body shapes of the request-path fuzzer (the first byte of the input).
const (
	shapeNone = iota
	shapeURLEncoded
	shapeJSON
	shapeMultipart
	shapeXML
	shapeText
	shapeDeepJSON      // nesting depth from the size byte
	shapeManyParts     // multipart with many parts
	shapeManyHeaders   // many request headers
	shapeHugeHeader    // one header of many KiB
	shapeBadBoundary   // multipart with a boundary that does not match the body
	shapeDeepXML       // nested XML elements
	shapeMultipartFile // one file part, fuzzed part name and file name
	numShapes
)

// fuzzRequest turns the fuzzer's bytes into one exchange. size scales the
// generated shapes; every size is bounded so that one input runs in
// milliseconds with the small rule set.
func fuzzRequest(shape, size uint8, method, path string, rawHeaders, body []byte, maxSize int) exchange {
	ex := exchange{method: method, path: path}
	if len(ex.path) > 0 && ex.path[0] != '/' {
		ex.path = "/" + ex.path
	}
	for i, line := range bytes.Split(rawHeaders, []byte{'\n'}) {
		if i >= 64 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte{':'})
		ex.headers = append(ex.headers, [2]string{string(name), string(value)})
	}
	n := int(size) * maxSize / 255
	switch shape % numShapes {
	case shapeNone:
		return ex
	case shapeURLEncoded:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/x-www-form-urlencoded"})
	case shapeJSON:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/json"})
	case shapeMultipart:
		ex.headers = append(ex.headers, [2]string{"content-type", "multipart/form-data; boundary=b0undary"})
	case shapeXML:
		ex.headers = append(ex.headers, [2]string{"content-type", "text/xml"})
	case shapeText:
		ex.headers = append(ex.headers, [2]string{"content-type", "text/plain"})
	case shapeDeepJSON:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/json"})
		body = []byte(strings.Repeat(`{"a":[`, n) + strconv.Quote(string(body)) + strings.Repeat(`]}`, n))
	case shapeManyParts:
		ex.headers = append(ex.headers, [2]string{"content-type", "multipart/form-data; boundary=b0undary"})
		var b bytes.Buffer
		for i := 0; i < n; i++ {
			b.WriteString("--b0undary\r\nContent-Disposition: form-data; name=\"p" + strconv.Itoa(i) + "\"\r\n\r\n")
			b.Write(body)
			b.WriteString("\r\n")
		}
		b.WriteString("--b0undary--\r\n")
		body = b.Bytes()
	case shapeManyHeaders:
		for i := 0; i < n*4; i++ {
			ex.headers = append(ex.headers, [2]string{"x-h" + strconv.Itoa(i), string(body)})
		}
		return ex
	case shapeHugeHeader:
		ex.headers = append(ex.headers, [2]string{"x-huge", strings.Repeat(string(body)+"a", n*64/(len(body)+1)+1)})
		return ex
	case shapeBadBoundary:
		ex.headers = append(ex.headers, [2]string{"content-type", "multipart/form-data; boundary=" + string(rawHeaders)})
	case shapeDeepXML:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/xml"})
		body = []byte(strings.Repeat("<a>", n) + string(body) + strings.Repeat("</a>", n))
	case shapeMultipartFile:
		ex.headers = append(ex.headers, [2]string{"content-type", "multipart/form-data; boundary=b0undary"})
		name, file, _ := bytes.Cut(body, []byte{0})
		body = []byte("--b0undary\r\nContent-Disposition: form-data; name=\"" + string(name) + "\"; filename=\"" + string(file) +
			"\"\r\nContent-Type: application/octet-stream\r\n\r\ncontent\r\n--b0undary--\r\n")
	}
	ex.body = [][]byte{body}
	return ex
}

// splitBody returns ex with its body cut into chunks of at most k bytes.
func splitBody(ex exchange, k int) exchange {
	if ex.body == nil {
		return ex
	}
	whole := bytes.Join(ex.body, nil)
	var chunks [][]byte
	for len(whole) > k {
		chunks = append(chunks, whole[:k])
		whole = whole[k:]
	}
	ex.body = append(chunks, whole)
	return ex
}

// checkOutcome asserts that an outcome is a pass, a block, or a clear error:
// a pass reaches the upstream whole and gets its 200; a block is a local
// reply with a rule's or a body check's status; a 500 is only sent with an
// error line in the log. Afterwards no transaction is open.
func checkOutcome(t *testing.T, p *nativePlugin, what string, out outcome, errLinesBefore int) {
	t.Helper()
	switch {
	case !out.localReply:
		if !out.upstream || out.status != 200 {
			t.Fatalf("%s: neither passed nor blocked: %+v", what, out)
		}
	case out.status == 400 || out.status == 403 || out.status == 413:
		if out.upstream {
			t.Fatalf("%s: blocked with %d after the upstream got the request", what, out.status)
		}
	case out.status == statusFailClosed:
		if len(p.host.GetErrorLogs()) == errLinesBefore {
			t.Fatalf("%s: 500 without an error line in the log", what)
		}
	default:
		t.Fatalf("%s: unexpected local reply %d", what, out.status)
	}
	if v, _ := p.metric(metricActive); v != 0 {
		t.Fatalf("%s: %d transactions still open after the stream ended", what, v)
	}
}

// fuzzRequestPath is the body of FuzzRequest and FuzzRequest_crs: each input
// runs twice, the body in one piece and in chunks of 1 to 64 bytes, and both
// runs must agree, so that splitting a request never changes the verdict.
func fuzzRequestPath(f *testing.F, config string, maxSize int) {
	seeds := []struct {
		shape, size  uint8
		method, path string
		headers      string
		body         string
	}{
		{shapeNone, 0, "GET", "/", "", ""},
		{shapeNone, 0, "GET", "/?q=evilmarker", "", ""},
		{shapeNone, 0, "GET", "/?q=%00%ff%c0%af&a[b]=1&&=", "cookie:a=evilmarker", ""},
		{shapeNone, 0, "GET", "/", "X-EvilMarker:1\nx-ok:\xff\xfe", ""},
		{shapeNone, 0, "", "", ":\n:\n\x00:\x00", ""},
		{shapeURLEncoded, 0, "POST", "/form", "", "a=1&b=evilmarker"},
		{shapeURLEncoded, 0, "POST", "/form", "", "a=%zz&%=&=&&b"},
		{shapeJSON, 0, "POST", "/api", "", `{"evilmarker": 1}`},
		{shapeJSON, 0, "POST", "/api", "", `{"a": [1, 2, {"b": "\ud800"}], "c": 1e999}`},
		{shapeJSON, 0, "POST", "/api", "", `{"a":`},
		{shapeMultipart, 0, "POST", "/up", "", "--b0undary\r\nContent-Disposition: form-data; name=\"evilmarker\"\r\n\r\nx\r\n--b0undary--\r\n"},
		{shapeMultipart, 0, "POST", "/up", "", "--b0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx"},
		{shapeXML, 0, "POST", "/x", "", "<a><b>evilmarker</b></a>"},
		{shapeXML, 0, "POST", "/x", "", "<!DOCTYPE a [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><a>&e;</a>"},
		{shapeText, 0, "POST", "/t", "", "evilmarker"},
		{shapeDeepJSON, 255, "POST", "/api", "", "x"},
		{shapeDeepJSON, 20, "POST", "/api", "", "evilmarker"},
		{shapeManyParts, 255, "POST", "/up", "", "v"},
		{shapeManyHeaders, 255, "GET", "/", "", "v"},
		{shapeHugeHeader, 255, "GET", "/", "", "v"},
		{shapeBadBoundary, 0, "POST", "/up", "\"", "--x\r\n\r\n"},
		{shapeBadBoundary, 0, "POST", "/up", "", "--\r\n--\r\n"},
		{shapeDeepXML, 255, "POST", "/x", "", "evilmarker"},
		{shapeMultipartFile, 0, "POST", "/up", "", "f\x00evilmarker.php"},
		{shapeMultipartFile, 0, "POST", "/up", "", "f\"\r\nx\x00a\xff.txt"},
	}
	for _, s := range seeds {
		f.Add(s.shape, s.size, s.method, s.path, []byte(s.headers), []byte(s.body), uint8(7))
	}
	fp := &fuzzPlugin{config: config}
	// proxytest holds one emulator at a time: free it for the next test.
	f.Cleanup(fp.close)
	// The emulator prints every plugin log line through the log package;
	// at thousands of inputs a second that output is the bottleneck.
	prev := log.Writer()
	log.SetOutput(io.Discard)
	f.Cleanup(func() { log.SetOutput(prev) })
	f.Fuzz(func(t *testing.T, shape, size uint8, method, path string, rawHeaders, body []byte, split uint8) {
		if len(body) > maxSize || len(rawHeaders) > maxSize || len(path) > maxSize {
			t.Skip("input over the size bound of this target")
		}
		fp.mu.Lock()
		defer fp.mu.Unlock()
		p := fp.get(t)
		ex := fuzzRequest(shape, size, method, path, rawHeaders, body, maxSize)

		errs := len(p.host.GetErrorLogs())
		total, _ := p.metric(metricTotal)
		whole := p.do(t, ex)
		checkOutcome(t, p, "whole body", whole, errs)
		if ex.body == nil {
			return
		}
		errs = len(p.host.GetErrorLogs())
		chunked := p.do(t, splitBody(ex, int(split)%64+1))
		checkOutcome(t, p, "chunked body", chunked, errs)
		// Both exchanges ran to their end, each as one transaction
		// (checkOutcome: none is left open).
		if n, _ := p.metric(metricTotal); n != total+2 {
			t.Fatalf("shape %d: the two exchanges ran %d transactions, want 2", shape%numShapes, n-total)
		}
		if whole.status != chunked.status || whole.localReply != chunked.localReply || whole.upstream != chunked.upstream {
			t.Fatalf("shape %d: in one piece %d (local reply %v), in chunks of %d: %d (local reply %v)",
				shape%numShapes, whole.status, whole.localReply, int(split)%64+1, chunked.status, chunked.localReply)
		}
	})
}

// FuzzRequest drives random requests through the plugin natively with the
// small rule set fuzzRules.
func FuzzRequest(f *testing.F) {
	fuzzRequestPath(f, fuzzRules, 4096)
}

// FuzzRequest_crs drives random requests through the plugin natively with
// the whole CRS, with smaller bodies.
func FuzzRequest_crs(f *testing.F) {
	fuzzRequestPath(f, crsConfig, 1024)
}
