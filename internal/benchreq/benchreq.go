// Package benchreq holds the requests the per-request benchmarks send, so
// that the native benchmarks (filter/) and the .wasm ones (perf/) measure
// exactly the same bytes and can be read side by side.
package benchreq

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// Request is one benchmark request and the status the CRS must give it:
// one of Requests, or of a generated Pool (the bench's traffic).
type Request struct {
	// Name is the class name for pool requests ("benign_get",
	// "benign_json", "attack"), else the request's own name.
	Name  string
	Class Class
	// Kind is what the generator made ("get", "json_order", "sqli_query", ...).
	Kind   string
	Method string
	// Path is the request target (path and query). Each one in a pool is
	// unique, so a response can be mapped back to its request by method
	// and target alone.
	Path       string
	Headers    [][2]string // regular headers, lower case, without Host and pseudo-headers
	Body       []byte      // nil: no body
	WantStatus int
}

// Key returns the string that identifies the request in a pool.
func (r *Request) Key() string { return r.Method + " " + r.Path }

// HTTPHeader returns the request's headers for an HTTP client, with Host.
func (r *Request) HTTPHeader() http.Header {
	h := make(http.Header, len(r.Headers)+1)
	h.Set("Host", Host)
	for _, kv := range r.Headers {
		h.Add(kv[0], kv[1])
	}
	return h
}

// Requests returns, in a new slice each call (callers may change bodies), a
// benign GET, a benign 10 KiB JSON POST and a SQL injection in the query.
func Requests() []Request {
	body := JSONBody(10 * 1024)
	return []Request{
		{
			Name: "benign_get", Class: BenignGET, Kind: "get", Method: "GET", Path: "/products/42?page=2&sort=price",
			Headers: [][2]string{
				{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "text/html"}, {"accept-language", "en"},
			},
			WantStatus: 200,
		},
		{
			Name: "json_post_10kb", Class: BenignJSON, Kind: "json_order", Method: "POST", Path: "/api/orders",
			Headers: [][2]string{
				{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "application/json"},
				{"content-type", "application/json"}, {"content-length", strconv.Itoa(len(body))},
			},
			Body:       body,
			WantStatus: 200,
		},
		{
			Name: "sqli_get", Class: Attack, Kind: "sqli_query", Method: "GET", Path: "/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--",
			Headers: [][2]string{
				{"user-agent", "Mozilla/5.0 (X11; Linux x86_64)"}, {"accept", "text/html"},
			},
			WantStatus: 403,
		},
	}
}

// JSONBody returns a benign JSON document of at least n bytes (it ends with
// the item that passes n-64): items with an id and a 200-byte description,
// about 90 arguments for 10 KiB.
func JSONBody(n int) []byte { return jsonDoc(n, "") }

// FreshJSONBody is JSONBody(n) with every description and the note made
// unique by salt, so that results remembered from earlier requests do not
// help.
func FreshJSONBody(n, salt int) []byte { return jsonDoc(n, strconv.Itoa(salt)) }

func jsonDoc(n int, salt string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items": [`)
	for i := 0; b.Len() < n-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id": ` + strconv.Itoa(i) + `, "description": "`)
		if salt != "" {
			b.WriteString(`lot ` + salt + `-` + strconv.Itoa(i) + ` `)
		}
		b.WriteString(strings.Repeat("fresh organic produce from local farms ", 5) + `"}`)
	}
	b.WriteString(`], "note": "deliver before noon`)
	if salt != "" {
		b.WriteString(" " + salt)
	}
	b.WriteString(`"`)
	for b.Len() < n-1 {
		b.WriteByte(' ')
	}
	b.WriteByte('}')
	return b.Bytes()
}
