package benchreq

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

func TestRequests_contentLength(t *testing.T) {
	for _, r := range Requests() {
		for _, h := range r.Headers {
			if h[0] == "content-length" && h[1] != strconv.Itoa(len(r.Body)) {
				t.Errorf("%s: content-length %s, body %d bytes", r.Name, h[1], len(r.Body))
			}
		}
	}
}

func TestJSONBody(t *testing.T) {
	for _, b := range [][]byte{JSONBody(10 * 1024), FreshJSONBody(10*1024, 7)} {
		if len(b) < 10*1024 || len(b) > 11*1024 {
			t.Errorf("length %d, want 10 to 11 KiB", len(b))
		}
		if !json.Valid(b) {
			t.Errorf("not valid JSON: %.80s...", b)
		}
	}
	if bytes.Equal(FreshJSONBody(1024, 1), FreshJSONBody(1024, 2)) {
		t.Error("fresh bodies with different salts are equal")
	}
	if !bytes.Contains(FreshJSONBody(1024, 7), []byte(`"lot 7-0 fresh`)) || bytes.Contains(JSONBody(1024), []byte("lot ")) {
		t.Error("salt placement")
	}
}
