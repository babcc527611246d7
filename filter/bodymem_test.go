package filter

import (
	"strings"
	"testing"
)

// Regression: in the wasm build every request body larger than 128 KiB and
// smaller than SecRequestBodyLimit was answered 500 ("waf: buffering the
// request body: memoryLimit reached while writing") with @recommended-conf.
// Cause: the plugin is built with no_fs_access, so Coraza cannot spill a
// body past SecRequestBodyInMemoryLimit (131072 in @recommended-conf) to a
// file and fails the write instead. compileWAF now raises the in-memory
// limit to SecRequestBodyLimit (inMemoryLimitDirective). Found by
// faults.TestMemory_concurrentUploads; the native runner has a file system,
// so only the wasm subtest showed the 500.
func TestFilter_bodyOverInMemoryLimit(t *testing.T) {
	config := ruleConfig("Include @recommended-conf", "SecRuleEngine On")
	part := strings.Repeat("0123456789abcdef", 200<<10/16)
	body := "--b0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"blob.bin\"\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n" + part + "\r\n--b0undary--\r\n"
	var chunked [][]byte
	for i := 0; i < len(body); i += 64 << 10 {
		chunked = append(chunked, []byte(body[i:min(i+64<<10, len(body))]))
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, config)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer p.close()
		got := p.do(t, exchange{method: "POST", headers: multipartHeader, body: chunked})
		if got.status != 200 || got.localReply || !got.upstream {
			t.Errorf("200 KiB upload: got status %d, local reply %v, upstream %v; want 200 from the upstream\nlogs:\n%s",
				got.status, got.localReply, got.upstream, strings.Join(p.logs(), "\n"))
		}
	})
}

func TestInMemoryLimitDirective(t *testing.T) {
	for _, tc := range []struct {
		name       string
		directives []string
		want       string
	}{
		{"recommended", []string{"Include @recommended-conf"}, "SecRequestBodyInMemoryLimit 13107200"},
		{"recommended, then a lower limit", []string{"Include @recommended-conf", "SecRequestBodyLimit 1048576"}, "SecRequestBodyInMemoryLimit 1048576"},
		{"limits already equal", []string{"Include @recommended-conf", "SecRequestBodyInMemoryLimit 13107200"}, ""},
		{"no in-memory limit", []string{"SecRequestBodyLimit 1000"}, ""},
		{"in-memory limit only", []string{"SecRequestBodyInMemoryLimit 1000"}, "SecRequestBodyInMemoryLimit 134217728"},
		{"demo conf", []string{"Include @demo-conf"}, ""},
		{"crs glob is skipped", []string{"Include @crs-setup-conf", "Include @owasp_crs/*.conf"}, ""},
		{"quoted and mixed case", []string{`secrequestbodyinmemorylimit "100"`, `SECREQUESTBODYLIMIT '200'`}, "SecRequestBodyInMemoryLimit 200"},
		{"comments", []string{"# SecRequestBodyInMemoryLimit 100", "SecRequestBodyLimit 200"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inMemoryLimitDirective(strings.Join(tc.directives, "\n")); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
