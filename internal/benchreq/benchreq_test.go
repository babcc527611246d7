package benchreq

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
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

func TestDefaultPool(t *testing.T) {
	reqs, err := DefaultPool()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range reqs {
		count[r.Name]++
		for _, h := range r.Headers {
			if h[0] == "host" || h[0] != strings.ToLower(h[0]) {
				t.Errorf("%s %s: header %q, want lower-case names without host", r.Method, r.Path, h[0])
			}
		}
		if (r.Name == "attack") != (r.WantStatus == 403) {
			t.Errorf("%s %s: class %s wants %d", r.Method, r.Path, r.Name, r.WantStatus)
		}
		if r.Body != nil {
			var length []string
			for _, h := range r.Headers {
				if h[0] == "content-length" {
					length = append(length, h[1])
				}
			}
			if want := strconv.Itoa(len(r.Body)); len(length) != 1 || length[0] != want {
				t.Errorf("%s %s: content-length headers %q, want exactly one, %s", r.Method, r.Path, length, want)
			}
		}
		if r.Name == "benign_json" && len(r.Body) < 5000 {
			t.Errorf("%s: JSON body of %d bytes, want 5-25 KB", r.Path, len(r.Body))
		}
	}
	if count["benign_get"] != 140 || count["benign_json"] != 40 || count["attack"] != 20 {
		t.Errorf("classes %v, want 140/40/20", count)
	}
}

func TestSelect(t *testing.T) {
	pool := []Request{{Name: "a", Path: "/1"}, {Name: "b", Path: "/2"}, {Name: "a", Path: "/3"}}
	got := Select(pool, "a")
	if len(got) != 2 || got[0] != &pool[0] || got[1] != &pool[2] {
		t.Errorf(`Select(pool, "a") = %v, want pool[0] and pool[2] in order`, got)
	}
	if all := Select(pool, "mix"); len(all) != 3 || all[1] != &pool[1] {
		t.Errorf(`Select(pool, "mix") = %v, want the whole pool in order`, all)
	}
	if none := Select(pool, "c"); len(none) != 0 {
		t.Errorf(`Select(pool, "c") = %v, want none`, none)
	}
	if want := append(append([]string(nil), PoolClasses...), "mix"); !slices.Equal(PoolRuns, want) {
		t.Errorf("PoolRuns = %v, want %v", PoolRuns, want)
	}
}
