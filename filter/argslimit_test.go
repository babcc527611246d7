package filter

import (
	"fmt"
	"strings"
	"testing"
)

// Arguments past SecArgumentsLimit (1000 in @recommended-conf): Coraza
// keeps the first 1000 values of the query string and of a form or JSON
// body and drops the rest, so an attack after them would never be looked
// at. The shipped configuration refuses such a request with 400 (rules
// 200004 in phase 1 for the query string, 200005 in phase 2 for the
// body); at the limit it passes, and an attack within it is blocked as
// usual. Multipart fields are not limited: Coraza keeps every one, so an
// attack after a thousand of them is blocked like any other.

const xssValue = "<script>alert(1)</script>"

// benignPairs is n benign fields a0=v ... of a form or query string, then
// the extra pairs.
func benignPairs(n int, extra ...string) string {
	pairs := make([]string, 0, n+len(extra))
	for i := range n {
		pairs = append(pairs, fmt.Sprintf("a%d=v", i))
	}
	return strings.Join(append(pairs, extra...), "&")
}

// jsonArgs is a JSON object of n benign string members, then the extra
// members (JSON text).
func jsonArgs(n int, extra ...string) string {
	members := make([]string, 0, n+len(extra))
	for i := range n {
		members = append(members, fmt.Sprintf(`"a%d":"v"`, i))
	}
	return "{" + strings.Join(append(members, extra...), ",") + "}"
}

// multipartArgs is a multipart body of n benign fields, then the extra
// fields (name, value).
func multipartArgs(n int, extra ...[2]string) string {
	var b strings.Builder
	field := func(name, value string) {
		fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", name, value)
	}
	for i := range n {
		field(fmt.Sprintf("a%d", i), "v")
	}
	for _, f := range extra {
		field(f[0], f[1])
	}
	b.WriteString("--XyZ--\r\n")
	return b.String()
}

// TestArgumentsLimit_shipped sends the query strings and bodies at and
// past the limit through the shipped configuration: at the limit 200, past
// it 400 whether the values past it are benign or an attack, an attack
// within it 403; every request past it counted in
// waf_filter.tx.args_limit_reached.
func TestArgumentsLimit_shipped(t *testing.T) {
	const limit = 1000
	form := [][2]string{{"content-type", "application/x-www-form-urlencoded"}}
	js := [][2]string{{"content-type", "application/json"}}
	mp := [][2]string{{"content-type", "multipart/form-data; boundary=XyZ"}}
	attack := "q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
	jsonAttack := `"q":"` + xssValue + `"`
	cases := []struct {
		name    string
		ex      exchange
		status  int
		limited bool // past the limit
	}{
		{"query at the limit", exchange{path: "/?" + benignPairs(limit)}, 200, false},
		{"query past the limit", exchange{path: "/?" + benignPairs(limit+1)}, 400, true},
		{"query attack after the limit", exchange{path: "/?" + benignPairs(limit, attack)}, 400, true},
		{"query attack at the limit", exchange{path: "/?" + benignPairs(limit-1, attack)}, 403, false},
		{"form at the limit", exchange{method: "POST", headers: form, body: [][]byte{[]byte(benignPairs(limit))}}, 200, false},
		{"form past the limit", exchange{method: "POST", headers: form, body: [][]byte{[]byte(benignPairs(limit + 1))}}, 400, true},
		{"form attack after the limit", exchange{method: "POST", headers: form, body: [][]byte{[]byte(benignPairs(limit, attack))}}, 400, true},
		{"form attack at the limit", exchange{method: "POST", headers: form, body: [][]byte{[]byte(benignPairs(limit-1, attack))}}, 403, false},
		{"JSON at the limit", exchange{method: "POST", headers: js, body: [][]byte{[]byte(jsonArgs(limit))}}, 200, false},
		{"JSON past the limit", exchange{method: "POST", headers: js, body: [][]byte{[]byte(jsonArgs(limit + 1))}}, 400, true},
		{"JSON attack after the limit", exchange{method: "POST", headers: js, body: [][]byte{[]byte(jsonArgs(limit, jsonAttack))}}, 400, true},
		{"JSON attack at the limit", exchange{method: "POST", headers: js, body: [][]byte{[]byte(jsonArgs(limit-1, jsonAttack))}}, 403, false},
		{"multipart past the limit", exchange{method: "POST", headers: mp, body: [][]byte{[]byte(multipartArgs(limit + 1))}}, 200, false},
		{"multipart attack after the limit", exchange{method: "POST", headers: mp, body: [][]byte{[]byte(multipartArgs(limit, [2]string{"q", xssValue}))}}, 403, false},
	}
	cfg := shippedConfig(t)
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		limited := 0
		for _, c := range cases {
			c.ex.headers = append(c.ex.headers, [2]string{"user-agent", "Mozilla/5.0"}, [2]string{"accept", "*/*"})
			out := p.do(t, c.ex)
			if out.status != c.status {
				t.Errorf("%s: status %d, want %d", c.name, out.status, c.status)
			}
			if c.status != 200 && out.upstream {
				t.Errorf("%s: the request reached the upstream", c.name)
			}
			if c.limited {
				limited++
			}
		}
		if n, _ := p.metric(metricArgsLimit); n != uint64(limited) {
			t.Errorf("%s = %d, want %d", metricArgsLimit, n, limited)
		}
	})
}
