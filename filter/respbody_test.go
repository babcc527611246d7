package filter

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// responseRun is what a response body leaves in a transaction.
type responseRun struct {
	processor, body, length string
	matched                 []int
	status                  int
}

// runResponse sends a GET and a response with body, in chunks of chunk
// bytes, through waf.
// The rules in quiet (the prelude's, which log nothing) are not listed.
func runResponse(t *testing.T, waf coraza.WAF, contentType string, body []byte, chunk int) responseRun {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI("/page", "GET", "HTTP/1.1")
	tx.AddRequestHeader("Host", "example.com")
	tx.ProcessRequestHeaders()
	if _, err := tx.ProcessRequestBody(); err != nil {
		t.Fatal(err)
	}
	tx.AddResponseHeader("Content-Type", contentType)
	tx.ProcessResponseHeaders(200, "HTTP/1.1")
	for rest := body; len(rest) > 0; {
		n := min(chunk, len(rest))
		if _, _, err := tx.WriteResponseBody(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	it, err := tx.ProcessResponseBody()
	if err != nil {
		t.Fatal(err)
	}
	quiet := preludeIDs(crsSet(t).on)
	v := tx.(plugintypes.TransactionState).Variables()
	run := responseRun{processor: v.ResponseBodyProcessor().Get(), body: v.ResponseBody().Get(), length: v.ResponseContentLength().Get()}
	if it != nil {
		run.status = it.Status
	}
	for _, mr := range tx.MatchedRules() {
		if id := mr.Rule().ID(); id >= 950000 && id < 960000 && !quiet[id] {
			run.matched = append(run.matched, id)
		}
	}
	return run
}

// TestRawResponse: with the preselection, the CRS reads the response body
// through the plugin's processor, and the body, its length, the response
// rules that match and the verdict are the same as through Coraza's own
// reading: empty, small, one byte short of and past the 32 KiB copy
// buffer, larger than the kept read buffer, not UTF-8, in one chunk or
// many, a page that leaks an SQL error (951xxx) and one that does not.
func TestRawResponse(t *testing.T) {
	quietLogs(t)
	crs := crsSet(t)
	sqlError := []byte("<html><body>You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version</body></html>")
	big := bytes.Repeat([]byte("<p>lorem ipsum dolor sit amet</p>\n"), 10000)
	for _, c := range []struct {
		name  string
		body  []byte
		chunk int
	}{
		{"empty", nil, 1},
		{"small", []byte("<p>hello</p>"), 1 << 20},
		{"small in bytes", []byte("<p>hello</p>"), 1},
		{"32 KiB - 1", bytes.Repeat([]byte("a"), 32<<10-1), 4096},
		{"32 KiB + 1", bytes.Repeat([]byte("a"), 32<<10+1), 4096},
		{"past the kept buffer", big, 65536},
		{"not UTF-8", []byte("\xff\xfe<p>\x80\x81</p>\x00"), 3},
		{"SQL error", sqlError, 16},
	} {
		on := runResponse(t, crs.on, "text/html", c.body, c.chunk)
		off := runResponse(t, crs.off, "text/html", c.body, c.chunk)
		if on.processor != rawResponseProcessor || off.processor != "" {
			t.Fatalf("%s: processors %q and %q, want %q with the preselection and none without", c.name, on.processor, off.processor, rawResponseProcessor)
		}
		if on.body != off.body || on.length != off.length || !slices.Equal(on.matched, off.matched) || on.status != off.status {
			t.Errorf("%s: with the processor %d bytes (length %s), matched %v, status %d; without %d bytes (length %s), matched %v, status %d",
				c.name, len(on.body), on.length, on.matched, on.status, len(off.body), off.length, off.matched, off.status)
		}
		if on.body != string(c.body) {
			t.Errorf("%s: RESPONSE_BODY has %d bytes, the response %d", c.name, len(on.body), len(c.body))
		}
	}
	if on := runResponse(t, crs.on, "text/html", sqlError, 1<<20); len(on.matched) == 0 || on.status != 403 {
		t.Errorf("SQL error page: matched %v, status %d; want a 951 rule and 403", on.matched, on.status)
	}
	// An image is not processable: neither reads it.
	if on, off := runResponse(t, crs.on, "image/png", sqlError, 1<<20), runResponse(t, crs.off, "image/png", sqlError, 1<<20); on.body != "" || off.body != "" {
		t.Errorf("image/png: RESPONSE_BODY %q and %q, want none", on.body, off.body)
	}
}

// TestRawResponse_mentioned: a rule set that names RES_BODY_PROCESSOR, in
// any case, anywhere, keeps Coraza's own reading (the variable would
// differ); one that does not gets the processor.
func TestRawResponse_mentioned(t *testing.T) {
	quietLogs(t)
	base := []string{"SecRuleEngine On", "SecResponseBodyAccess On", "SecResponseBodyMimeType text/html"}
	for _, c := range []struct {
		rule string
		raw  bool
	}{
		{`SecRule RESPONSE_BODY "@contains secret" "id:1,phase:4,deny,status:403"`, true},
		{`SecRule RES_BODY_PROCESSOR "@streq json" "id:1,phase:5,pass,log"`, false},
		{`SecRule RESPONSE_BODY "@contains x" "id:1,phase:4,pass,log,msg:'%{res_body_processor}'"`, false},
		{`# Res_Body_Processor_Error is read below` + "\n" + `SecRule RESPONSE_BODY "@contains x" "id:1,phase:4,pass"`, false},
	} {
		waf, err := compileWAF(append(slices.Clone(base), c.rule), true)
		if err != nil {
			t.Fatal(err)
		}
		run := runResponse(t, waf, "text/html", []byte("<p>secret</p>"), 5)
		if got := run.processor == rawResponseProcessor; got != c.raw {
			t.Errorf("%q: processor %q, want the plugin's: %v", c.rule, run.processor, c.raw)
		}
		if run.body != "<p>secret</p>" || run.length != "13" {
			t.Errorf("%q: RESPONSE_BODY %q, length %s", c.rule, run.body, run.length)
		}
	}
	if !mentionsResBodyProcessor(strings.Repeat("_x", 1000)+"RES_BODY_PROCESSOR") || mentionsResBodyProcessor("res_body") || mentionsResBodyProcessor("_body_processor") {
		t.Error("mentionsResBodyProcessor misreads its text")
	}
}

// TestReleaseReadBuffer: a read buffer of up to maxKeptReadBuffer bytes
// goes back to the pool emptied, a larger one does not.
func TestReleaseReadBuffer(t *testing.T) {
	for _, c := range []struct {
		cap  int
		kept bool
	}{{maxKeptReadBuffer, true}, {maxKeptReadBuffer + 1, false}} {
		b := bytes.NewBuffer(make([]byte, 0, c.cap))
		b.WriteString("left over")
		if got := releaseReadBuffer(b); got != c.kept {
			t.Errorf("a buffer of %d bytes: kept %v, want %v", c.cap, got, c.kept)
		}
		if c.kept && b.Len() != 0 {
			t.Errorf("a buffer of %d bytes went back holding %q", c.cap, b.String())
		}
	}
}
