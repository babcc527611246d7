package benchreq

import "github.com/corazawaf/coraza/v3"

// Coraza runs r through a transaction of waf, every phase, answered by
// the benchmarks' upstream (200, text/html, 12 bytes), and returns the
// status the client would get: the interruption's, 413 when the body is
// refused, 500 on an error, else 200.
func Coraza(waf coraza.WAF, r *Request) int {
	tx := waf.NewTransaction()
	defer func() {
		tx.ProcessLogging()
		_ = tx.Close()
	}()
	tx.ProcessConnection("10.1.2.3", 43210, "10.0.0.1", 8080)
	tx.ProcessURI(r.Path, r.Method, "HTTP/1.1")
	tx.AddRequestHeader("Host", "shop.example.com")
	for _, h := range r.Headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	if it := tx.ProcessRequestHeaders(); it != nil {
		return it.Status
	}
	if r.Body != nil {
		if it, _, err := tx.WriteRequestBody(r.Body); it != nil || err != nil {
			return 413
		}
	}
	if it, err := tx.ProcessRequestBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	tx.AddResponseHeader("Content-Type", "text/html")
	tx.AddResponseHeader("Content-Length", "12")
	if it := tx.ProcessResponseHeaders(200, "HTTP/1.1"); it != nil {
		return it.Status
	}
	if tx.IsResponseBodyAccessible() && tx.IsResponseBodyProcessable() {
		if it, _, err := tx.WriteResponseBody([]byte("<p>hello</p>")); it != nil || err != nil {
			return 500
		}
	}
	if it, err := tx.ProcessResponseBody(); err != nil {
		return 500
	} else if it != nil {
		return it.Status
	}
	return 200
}
