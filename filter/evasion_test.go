package filter

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// evasionCase is one way a client may try to slip an attack past the
// filter. why says what the case shows. Every case whose body arrives in
// more than one chunk is also run with the same bytes in one piece, and both
// runs must give the same status: splitting a request never changes the
// verdict.
type evasionCase struct {
	name   string
	why    string
	config string
	ex     exchange
	// wantStatus is what the client sees; 200 means the request passed
	// whole to the upstream, anything else is a local reply.
	wantStatus int
}

// markerRules blocks fuzzMarker wherever a body processor or the header
// parser may put it (fuzzRules); it is fast enough on the wasm runner to
// try every structural variant.
var markerRules = fuzzRules

// withLength adds a content-length header matching the body, as a real
// client sends it (CRS scores a POST without one).
func withLength(ex exchange) exchange {
	n := 0
	for _, c := range ex.body {
		n += len(c)
	}
	ex.headers = append(append([][2]string(nil), ex.headers...), [2]string{"content-length", strconv.Itoa(n)})
	return ex
}

// everyByte cuts s into one-byte chunks.
func everyByte(s string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte{s[i]}
	}
	return out
}

func multipartBody(disposition, content string) string {
	return "--b0undary\r\nContent-Disposition: form-data; " + disposition + "\r\nContent-Type: application/octet-stream\r\n\r\n" +
		content + "\r\n--b0undary--\r\n"
}

var multipartHeader = [][2]string{{"content-type", "multipart/form-data; boundary=b0undary"}}
var evasionJSONHeader = [][2]string{{"content-type", "application/json"}}

var evasionCases = []evasionCase{
	// Body limits.
	{
		name:   "attack past the limit with reject",
		why:    "Reject answers 413 for any body over SecRequestBodyLimit, so bytes past the limit can never pass uninspected",
		config: bodyLimitConfig("Reject"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks(strings.Repeat("a", 99), "=attack")},
		wantStatus: 413,
	},
	{
		name:   "attack past the limit with reject, one chunk",
		why:    "the limit applies inside a chunk too, not only between chunks",
		config: bodyLimitConfig("Reject"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks(strings.Repeat("a", 150) + "=attack")},
		wantStatus: 413,
	},
	{
		name:   "attack straddling the limit with reject",
		why:    "the attack starts inside the limit and ends past it: still 413, never a pass",
		config: bodyLimitConfig("Reject"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks("x="+strings.Repeat("a", 95), "attack")},
		wantStatus: 413,
	},
	{
		name: "attack past the limit with process partial passes",
		why: "documented trade-off of ProcessPartial: only the first SecRequestBodyLimit bytes are inspected, the rest passes; " +
			"configurations that must not let anything through use Reject (the default of @recommended-conf)",
		config: bodyLimitConfig("ProcessPartial"),
		ex: exchange{method: "POST", headers: formHeader,
			body: chunks(strings.Repeat("a", 99), "=attack")},
		wantStatus: 200,
	},
	{
		name:   "attack inside the limit with process partial, body in many chunks",
		why:    "ProcessPartial still inspects the part inside the limit, however it is split",
		config: bodyLimitConfig("ProcessPartial"),
		ex: exchange{method: "POST", headers: formHeader,
			body: append(everyByte("x=attack&"), []byte(strings.Repeat("b", 150)))},
		wantStatus: 403,
	},

	// An upstream that answers before the request ended (early.go).
	{
		name: "early answer, marker after it",
		why: "the upstream answered after the first chunk: the filter holds its answer and inspects the rest of the " +
			"body before any of it goes upstream",
		config: markerRules,
		ex: exchange{method: "POST", headers: append([][2]string{{"transfer-encoding", "chunked"}}, formHeader...),
			body: chunks("a=1&", "b=evilmarker"), respAfter: 1, respBody: [][]byte{[]byte("ok")}},
		wantStatus: 403,
	},
	{
		name:       "early answer, marker split across it",
		why:        "the marker is cut where the upstream answered; phase 2 still sees the whole body",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=1&b=evil", "mar", "ker"), respAfter: 1, respBody: [][]byte{[]byte("ok")}},
		wantStatus: 403,
	},
	{
		name:       "early answer, body past the limit with reject",
		why:        "the body limit applies to the rest of the body as before the answer",
		config:     bodyLimitConfig("Reject"),
		ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=1&", strings.Repeat("b", 120)), respAfter: 1, respBody: [][]byte{[]byte("ok")}},
		wantStatus: 413,
	},
	{
		name: "early answer, attack past the limit with process partial passes",
		why: "ProcessPartial's documented trade-off holds with an early answer too: the first SecRequestBodyLimit bytes " +
			"are inspected, the rest passes",
		config:     bodyLimitConfig("ProcessPartial"),
		ex:         exchange{method: "POST", headers: formHeader, body: chunks("a=1&", strings.Repeat("a", 99)+"=attack"), respAfter: 1, respBody: [][]byte{[]byte("ok")}},
		wantStatus: 200,
	},

	// Chunked bodies and split attacks.
	{
		name:   "chunked body without a length",
		why:    "transfer-encoding chunked and no content-length: the filter buffers to end of stream, as with a length",
		config: markerRules,
		ex: exchange{method: "POST", headers: append([][2]string{{"transfer-encoding", "chunked"}}, formHeader...),
			body: chunks("a=1&", "b=evil", "marker")},
		wantStatus: 403,
	},
	{
		name:       "marker split into one-byte chunks",
		why:        "Coraza sees the whole body at phase 2, not each chunk alone",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: formHeader, body: everyByte("q=evilmarker")},
		wantStatus: 403,
	},
	{
		name:   "crs: xss split across chunks",
		why:    "the script tag is cut in the middle; CRS 941 still matches on the joined body",
		config: crsConfig,
		ex: withLength(exchange{method: "POST", headers: formHeader,
			body: chunks("q=<scr", "ipt>alert(1)</sc", "ript>")}),
		wantStatus: 403,
	},

	{
		name:       "marker beside form fields whose names differ only in case",
		why:        "ARGS_POST ignores case: every value of A, a and %41 is inspected, none replaces another",
		config:     markerRules,
		ex:         withLength(exchange{method: "POST", headers: formHeader, body: chunks("A=evilmarker&a=1&%41=2")}),
		wantStatus: 403,
	},
	{
		name:   "crs: xss beside a form field whose name differs only in case",
		why:    "the attack's field and a benign one fold to one ARGS_POST key; CRS 941 still sees the attack",
		config: crsConfig,
		ex: withLength(exchange{method: "POST", headers: formHeader,
			body: chunks("q=1&Q=<script>alert(1)</script>&", "q=2")}),
		wantStatus: 403,
	},

	// Attacks in places other than ARGS values.
	{
		name:       "marker in a JSON key",
		why:        "the JSON processor turns keys into ARGS_NAMES (json.evilmarker)",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: evasionJSONHeader, body: chunks(`{"a": {"evilmarker": 1}}`)},
		wantStatus: 403,
	},
	{
		name:       "marker in a nested JSON key, split",
		why:        "the key is cut across chunks",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: evasionJSONHeader, body: chunks(`{"a": [{"evil`, `marker": true}]}`)},
		wantStatus: 403,
	},
	{
		name:   "crs: sqli in a JSON key",
		why:    "CRS 942 rules read ARGS_NAMES, which holds JSON keys",
		config: crsConfig,
		ex: withLength(exchange{method: "POST", headers: evasionJSONHeader,
			body: chunks(`{"1' UNION SELECT password FROM users--": 1}`)}),
		wantStatus: 403,
	},
	{
		name:       "marker in a multipart part name",
		why:        "part names become ARGS_NAMES (and FILES_NAMES for file parts)",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: multipartHeader, body: chunks(multipartBody(`name="evilmarker"`, "x"))},
		wantStatus: 403,
	},
	{
		name:       "marker in a multipart file name",
		why:        "file names become FILES",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: multipartHeader, body: chunks(multipartBody(`name="f"; filename="evilmarker.txt"`, "x"))},
		wantStatus: 403,
	},
	{
		name:   "marker in a multipart file name, split",
		why:    "the Content-Disposition line is cut across chunks",
		config: markerRules,
		ex: exchange{method: "POST", headers: multipartHeader,
			body: chunks("--b0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"ev", "ilmarker.txt\"\r\n\r\nx\r\n--b0undary--\r\n")},
		wantStatus: 403,
	},
	{
		name:   "crs: php file upload",
		why:    "CRS 933110 reads FILES for script extensions",
		config: crsConfig,
		ex: withLength(exchange{method: "POST", headers: multipartHeader,
			body: chunks(multipartBody(`name="f"; filename="shell.php"`, "x"))}),
		wantStatus: 403,
	},
	{
		name:       "marker in a cookie value",
		why:        "cookies are parsed into REQUEST_COOKIES",
		config:     markerRules,
		ex:         exchange{headers: [][2]string{{"cookie", "a=1; b=evilmarker"}}},
		wantStatus: 403,
	},
	{
		name:       "marker in a cookie name",
		why:        "and their names into REQUEST_COOKIES_NAMES",
		config:     markerRules,
		ex:         exchange{headers: [][2]string{{"cookie", "evilmarker=1"}}},
		wantStatus: 403,
	},
	{
		name:       "crs: xss in a cookie",
		why:        "CRS 941 rules read REQUEST_COOKIES",
		config:     crsConfig,
		ex:         exchange{headers: [][2]string{{"cookie", "session=<script>alert(1)</script>"}}},
		wantStatus: 403,
	},
	{
		name:       "marker in a header name with unusual case",
		why:        "header names are matched case-insensitively (t:lowercase, and Coraza's collections fold case)",
		config:     markerRules,
		ex:         exchange{headers: [][2]string{{"X-EvIlMaRkEr", "1"}}},
		wantStatus: 403,
	},
	{
		name:       "marker in a header value with unusual case",
		why:        "t:lowercase folds the value",
		config:     markerRules,
		ex:         exchange{headers: [][2]string{{"X-Thing", "EVILMARKER"}}},
		wantStatus: 403,
	},
	{
		name:       "crs: scanner user agent with unusual header case",
		why:        "REQUEST_HEADERS:User-Agent matches the header whatever its case (CRS 913100)",
		config:     crsConfig,
		ex:         exchange{headers: [][2]string{{"uSeR-aGeNt", "sqlmap/1.8"}}},
		wantStatus: 403,
	},
	{
		name:       "clean request passes",
		why:        "control case: the same shapes without the marker reach the upstream",
		config:     markerRules,
		ex:         exchange{method: "POST", headers: evasionJSONHeader, body: chunks(`{"a": `, `{"b": 1}}`)},
		wantStatus: 200,
	},
}

func TestFilter_evasion(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, tc := range evasionCases {
			t.Run(tc.name, func(t *testing.T) {
				p, err := r.load(t, tc.config)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				defer p.close()
				check := func(what string, ex exchange) {
					t.Helper()
					got := p.do(t, ex)
					wantLocal := tc.wantStatus != 200
					if got.status != tc.wantStatus || got.localReply != wantLocal || got.upstream == wantLocal {
						t.Errorf("%s: got status %d, local reply %v, upstream %v; want %d (%s)\nlogs:\n%s",
							what, got.status, got.localReply, got.upstream, tc.wantStatus, tc.why, strings.Join(p.logs(), "\n"))
					}
				}
				check("as sent", tc.ex)
				if len(tc.ex.body) > 1 {
					ex := tc.ex
					ex.body = [][]byte{bytes.Join(tc.ex.body, nil)}
					check("in one piece", ex)
				}
				if v, ok := p.metric(metricActive); !ok || v != 0 {
					t.Errorf("%s: got %d (defined: %v), want 0: a transaction was left open", metricActive, v, ok)
				}
			})
		}
	})
}
