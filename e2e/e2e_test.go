// Package e2e tests the WAF plugin over HTTP, as a client sees it: either a
// running proxy (E2E_BASE_URL, E2E_ADMIN_URL; e.g. Envoy from
// docker-compose.yml) or, by default, the wazero test host started
// in-process with build/main.wasm. Both run the plugin settings of
// e2e/envoy.yaml.
package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Settings of e2e/envoy.yaml that the expectations depend on.
const (
	maxInflight       = 4     // admission.max_inflight
	retryAfterSeconds = 2     // admission.retry_after_seconds
	maxBodyBytes      = 65536 // admission.max_request_body_bytes and SecRequestBodyLimit
	canaryHeader      = "X-E2E-Canary"
	canaryValue       = "wafguard-e2e"
	canaryStatus      = 418 // rule 1000001
)

// client is shared by the tests; every request has its own deadline.
var client = &http.Client{Timeout: 20 * time.Second}

type request struct {
	method  string
	path    string // with query, already encoded
	headers map[string]string
	body    string
	// chunked sends the body without Content-Length (chunked in
	// HTTP/1.1), so that only the WAF's count of the bytes can stop it.
	chunked bool
}

// do sends one request and returns the status, the response headers and at
// most 64 KiB of the body.
func (tg *target) do(t *testing.T, r request) (int, http.Header, string) {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(method, tg.base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.chunked {
		req.ContentLength = -1
		req.Body = io.NopCloser(strings.NewReader(r.body))
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		tg.failf(t, "%s %s: %v", method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestWAF_requests is the table of requests and the status each must get.
func TestWAF_requests(t *testing.T) {
	tg := need(t)
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	cases := []struct {
		name       string
		req        request
		wantStatus int
		times      int // sent this many times (0: once), each must get wantStatus
	}{
		{
			name:       "canary rule proves the e2e configuration is loaded",
			req:        request{path: "/anything", headers: map[string]string{canaryHeader: canaryValue}},
			wantStatus: canaryStatus,
		},
		{
			name:       "benign get",
			req:        request{path: "/anything/search?q=" + url.QueryEscape("red shoes size 42")},
			wantStatus: http.StatusOK,
		},
		{
			name:       "benign form post",
			req:        request{method: http.MethodPost, path: "/anything/comments", headers: form, body: "name=alice&comment=" + url.QueryEscape("Nice article, thanks!")},
			wantStatus: http.StatusOK,
		},
		{
			name:       "benign upstream status passes through",
			req:        request{path: "/status/204"},
			wantStatus: http.StatusNoContent,
		},
		{
			name:       "xss in the query",
			req:        request{path: "/anything?q=" + url.QueryEscape("<script>alert(document.cookie)</script>")},
			wantStatus: http.StatusForbidden,
		},
		{
			name:       "sqli in the query",
			req:        request{path: "/anything?id=" + url.QueryEscape("1' OR '1'='1' -- ")},
			wantStatus: http.StatusForbidden,
		},
		{
			name:       "sqli in a form body",
			req:        request{method: http.MethodPost, path: "/anything/login", headers: form, body: "user=" + url.QueryEscape("admin' UNION SELECT password FROM users -- ") + "&pass=x"},
			wantStatus: http.StatusForbidden,
		},
		{
			// Coraza's own form processor kept one value of the three
			// fields named q and Q, at random; the plugin's keeps all.
			name: "xss in a form field beside fields whose names differ only in case",
			req: request{method: http.MethodPost, path: "/anything/comments", headers: form,
				body: "q=1&Q=" + url.QueryEscape("<script>alert(document.cookie)</script>") + "&q=2"},
			wantStatus: http.StatusForbidden,
			times:      12,
		},
		// Published CRS bypasses, fixed in CRS 4.25.1 (GHSA-6jp8-c2w2-x7wr
		// with attribute inspection on, and 4RI-250413).
		{
			name: "sqli in an XML attribute value",
			req: request{method: http.MethodPost, path: "/anything/xml", headers: map[string]string{"Content-Type": "application/xml"},
				body: `<?xml version="1.0"?><root><a probe="1' UNION SELECT password FROM users--"></a></root>`},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "shell command in an XML attribute value",
			req: request{method: http.MethodPost, path: "/anything/xml", headers: map[string]string{"Content-Type": "application/xml"},
				body: `<?xml version="1.0"?><root><a probe="c99 -wrapper sh,-c,curl google.com ."></a></root>`},
			wantStatus: http.StatusForbidden,
		},
		{
			name:       "JSON key with a command",
			req:        request{method: http.MethodPost, path: "/anything/json", headers: map[string]string{"Content-Type": "application/json"}, body: `{ "aa-disable php-fpm":"foo" }`},
			wantStatus: http.StatusForbidden,
		},
		{
			name: "benign XML with attributes",
			req: request{method: http.MethodPost, path: "/anything/xml", headers: map[string]string{"Content-Type": "application/xml"},
				body: `<?xml version="1.0"?><order id="42" currency="EUR"><item sku="A-100" qty="2">Wool jacket</item></order>`},
			wantStatus: http.StatusOK,
		},
		{
			name:       "benign JSON",
			req:        request{method: http.MethodPost, path: "/anything/json", headers: map[string]string{"Content-Type": "application/json"}, body: `{"item": "wool jacket", "size": "M", "qty": 2}`},
			wantStatus: http.StatusOK,
		},
		// Arguments past SecArgumentsLimit (1000): 400, whatever follows.
		{
			name:       "form of 1000 fields",
			req:        request{method: http.MethodPost, path: "/anything/form", headers: form, body: manyFields(1000, "")},
			wantStatus: http.StatusOK,
		},
		{
			name: "form of 1000 fields and an attack",
			req: request{method: http.MethodPost, path: "/anything/form", headers: form,
				body: manyFields(1000, "q="+url.QueryEscape("<script>alert(1)</script>"))},
			wantStatus: http.StatusBadRequest,
		},
		{
			name:       "query of 1000 arguments and an attack",
			req:        request{path: "/anything?" + manyFields(1000, "q="+url.QueryEscape("<script>alert(1)</script>"))},
			wantStatus: http.StatusBadRequest,
		},
		{
			name:       "body over the limit",
			req:        request{method: http.MethodPost, path: "/anything/upload", headers: form, body: "data=" + strings.Repeat("a", maxBodyBytes+4096)},
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		{
			name:       "chunked body over the limit",
			req:        request{method: http.MethodPost, path: "/anything/upload", headers: form, body: "data=" + strings.Repeat("a", maxBodyBytes+4096), chunked: true},
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		{
			// Well under the limit: Coraza already rejects a body of
			// exactly SecRequestBodyLimit bytes (it compares with >=), and
			// the CRS needs seconds of CPU for one form value of a few
			// KiB in a wasm VM.
			name:       "body under the limit",
			req:        request{method: http.MethodPost, path: "/anything/upload", headers: form, body: "data=" + strings.Repeat("a", 1024)},
			wantStatus: http.StatusOK,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range max(c.times, 1) {
				got, _, body := tg.do(t, c.req)
				if got != c.wantStatus {
					tg.failf(t, "%s %s (request %d): got status %d, want %d; body: %.300q", c.req.method, c.req.path, i+1, got, c.wantStatus, body)
				}
			}
		})
	}
}

// TestAdmission_overload sends more concurrent slow requests than the
// admission cap and expects the excess to get 429 with Retry-After, then
// the cap to be free again.
func TestAdmission_overload(t *testing.T) {
	tg := need(t)
	const (
		clients = 4 * maxInflight
		delay   = "/delay/3" // long enough for every client to arrive while the first ones wait
	)
	type result struct {
		status     int
		retryAfter string
		err        error
	}
	results := make([]result, clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Get(tg.base + delay)
			if err != nil {
				results[i] = result{err: err}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results[i] = result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		}()
	}
	close(start)
	wg.Wait()

	counts := map[int]int{}
	for i, r := range results {
		if r.err != nil {
			tg.failf(t, "client %d: GET %s: %v", i, delay, r.err)
		}
		counts[r.status]++
		if r.status == http.StatusTooManyRequests {
			secs, err := strconv.Atoi(r.retryAfter)
			if err != nil || secs < retryAfterSeconds {
				tg.failf(t, "client %d: 429 with Retry-After %q, want an integer of at least %d (admission.retry_after_seconds)", i, r.retryAfter, retryAfterSeconds)
			}
		}
	}
	if counts[http.StatusTooManyRequests] == 0 || counts[http.StatusOK] == 0 || counts[http.StatusOK] > maxInflight ||
		counts[http.StatusOK]+counts[http.StatusTooManyRequests] != clients {
		tg.failf(t, "%d concurrent GET %s: got statuses %v, want 1 to %d × 200 (admission.max_inflight) and the rest 429", clients, delay, counts, maxInflight)
	}
	// Every slot is released when its stream ends. Envoy ends a stream
	// (and the plugin releases its slot) just after the last byte went to
	// the client, so allow a short while.
	var got int
	for attempt := 0; attempt < 20; attempt++ {
		if got, _, _ = tg.do(t, request{path: "/anything"}); got == http.StatusOK {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tg.failf(t, "GET /anything after the burst: got %d for 2 s, want 200 (slots not released?)", got)
}

// TestMetrics_prometheus checks that the plugin's metrics reach the admin
// port's /stats/prometheus with the labels that stats_tags extracts.
func TestMetrics_prometheus(t *testing.T) {
	tg := need(t)
	if tg.admin == "" {
		t.Skipf("no admin URL; set %s", envAdminURL)
	}
	// One blocked request, so that an interruption counter exists.
	if got, _, _ := tg.do(t, request{path: "/anything?q=" + url.QueryEscape("<script>alert(1)</script>")}); got != http.StatusForbidden {
		tg.failf(t, "xss request: got %d, want 403", got)
	}
	// One body over the limit, refused by the admission guard.
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	if got, _, _ := tg.do(t, request{method: http.MethodPost, path: "/anything", headers: form, body: "data=" + strings.Repeat("a", maxBodyBytes)}); got != http.StatusRequestEntityTooLarge {
		tg.failf(t, "oversized body: got %d, want 413", got)
	}
	series, err := scrape(tg.admin + "/stats/prometheus")
	if err != nil {
		tg.failf(t, "%v", err)
	}
	want := []struct {
		name   string
		labels map[string]string
	}{
		{"waf_filter_tx_total", map[string]string{"env": "e2e"}},
		{"waf_filter_tx_interruptions", map[string]string{"env": "e2e", "rule_id": "949110", "phase": "http_request_body"}},
		{"wafguard_admission_admitted", map[string]string{}},
		{"wafguard_admission_rejected", map[string]string{"reason": "body_size"}},
	}
	for _, w := range want {
		found := false
		for _, s := range series[w.name] {
			if s.value >= 1 && hasLabels(s.labels, w.labels) {
				found = true
			}
		}
		if !found {
			tg.failf(t, "/stats/prometheus: no %s with labels %v and a value of at least 1; got %s", w.name, w.labels, describe(series, "waf"))
		}
	}
}

// sample is one line of the Prometheus text format.
type sample struct {
	labels map[string]string
	value  float64
}

// scrape fetches a Prometheus text page and returns its samples by metric
// name. Only the shapes Envoy writes are parsed: name{k="v",...} value.
func scrape(url string) (map[string][]sample, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	out := map[string][]sample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			// An unlabelled sample: name value.
			name, valueText, ok = strings.Cut(line, " ")
			if !ok {
				continue
			}
			labelText = ""
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(valueText), 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], sample{labels: parseLabels(labelText), value: v})
	}
	return out, sc.Err()
}

// parseLabels parses k="v",k2="v2" (values without escaped quotes).
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		v, rest2, _ := strings.Cut(rest, `"`)
		m[k] = v
		s = strings.TrimPrefix(rest2, ",")
	}
	return m
}

func hasLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// describe lists the series whose names start with prefix, for messages.
func describe(series map[string][]sample, prefix string) string {
	var lines []string
	for name, ss := range series {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, s := range ss {
			lines = append(lines, fmt.Sprintf("%s%v %g", name, s.labels, s.value))
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "no " + prefix + "* series"
	}
	return strings.Join(lines, "; ")
}

// manyFields is n benign form fields f0=v&f1=v..., then extra when it is
// not empty.
func manyFields(n int, extra string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('&')
		}
		fmt.Fprintf(&b, "f%d=v", i)
	}
	if extra != "" {
		b.WriteString("&" + extra)
	}
	return b.String()
}
