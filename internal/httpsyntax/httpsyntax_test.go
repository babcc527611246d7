package httpsyntax

import "testing"

func TestContentLengthOver(t *testing.T) {
	cases := []struct {
		cl    string
		limit int64
		want  bool
	}{
		{"", 10, false},
		{"10", 10, false}, // at the limit
		{"11", 10, true},  // past it
		{"0", 0, false},
		{"1x", 0, false}, // not a number: Envoy's codec rejects it
		{"-1", 0, false}, // likewise
		{"99999999999999999999999", 1 << 40, true}, // overflows int64: over
	}
	for _, tc := range cases {
		if got := ContentLengthOver(tc.cl, tc.limit); got != tc.want {
			t.Errorf("ContentLengthOver(%q, %d) = %v, want %v", tc.cl, tc.limit, got, tc.want)
		}
	}
}

func TestToken(t *testing.T) {
	for s, want := range map[string]bool{"x-reason": true, "Content-Type": true, "a!#$%&'*+-.^_`|~z": true,
		"": false, "a b": false, "a:b": false, "a\x00": false, "ä": false} {
		if got := Token(s); got != want {
			t.Errorf("Token(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestFieldValue(t *testing.T) {
	for s, want := range map[string]bool{"": true, "text/plain; charset=utf-8": true, "a\tb": true,
		"a\r\nb": false, "a\x00": false, "\x7f": false} {
		if got := FieldValue(s); got != want {
			t.Errorf("FieldValue(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestContentLength(t *testing.T) {
	for _, tc := range []struct {
		cl string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"1048576", 1 << 20, true}, {"", 0, false}, {"-1", 0, false}, {"12a", 0, false},
		{" 5", 0, false}, {"99999999999999999999999", 1 << 62, true},
	} {
		if n, ok := ContentLength(tc.cl); n != tc.n || ok != tc.ok {
			t.Errorf("ContentLength(%q) = %d, %v, want %d, %v", tc.cl, n, ok, tc.n, tc.ok)
		}
	}
}

// TestAuthority: the one reading of :authority that the rule-set choice
// and the per-authority caps share.
func TestAuthority(t *testing.T) {
	for _, tc := range []struct{ in, host, withPort string }{
		{"example.com", "example.com", "example.com"},
		{"Example.COM:8080", "example.com", "example.com:8080"},
		{"example.com.", "example.com", "example.com"},
		{"example.com.:443", "example.com", "example.com:443"},
		{"[::1]:8443", "[::1]", "[::1]:8443"},
		{"[::1]", "[::1]", "[::1]"},
		{"[FE80::1]", "[fe80::1]", "[fe80::1]"},
		{"::1", "::1", "::1"},
		{"10.0.0.1:80", "10.0.0.1", "10.0.0.1:80"},
		{"", "", ""},
		{".", ".", "."},
		{" a.example.com :1", "a.example.com", "a.example.com:1"},
		{"a.example.com:", "a.example.com", "a.example.com"},
	} {
		if got := AuthorityHost(tc.in); got != tc.host {
			t.Errorf("AuthorityHost(%q) = %q, want %q", tc.in, got, tc.host)
		}
		if got := AuthorityWithPort(tc.in); got != tc.withPort {
			t.Errorf("AuthorityWithPort(%q) = %q, want %q", tc.in, got, tc.withPort)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AuthorityWithPort("api.example.com:8443"); AuthorityHost("api.example.com:8443") }); n != 0 {
		t.Errorf("normal-form authorities allocate %.0f times, want 0", n)
	}
}

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		"application/json": "application/json", "Application/JSON; charset=utf-8": "application/json",
		" text/plain ;x=1": "text/plain", "": "",
	} {
		if got := MediaType(in); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
}
