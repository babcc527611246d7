package filter

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
)

// formWAF is a WAF that reads form bodies, keeps at most limit arguments
// and denies a request with "evilmarker" in any ARGS_POST value.
func formWAF(t testing.TB, limit int) coraza.WAF {
	t.Helper()
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().WithDirectives(`
SecRuleEngine On
SecRequestBodyAccess On
SecArgumentsLimit ` + strconv.Itoa(limit) + `
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/x-www-form-urlencoded" "id:10,phase:1,pass,nolog,ctl:requestBodyProcessor=URLENCODED"
SecRule ARGS_POST "@contains evilmarker" "id:20,phase:2,deny,status:403,log"
`))
	if err != nil {
		t.Fatal(err)
	}
	return waf
}

// formArgs is what a collection holds: each name with its value, in the
// collection's order for one name, the names sorted.
type formArgs struct {
	pairs   []string // "name=value"
	limited string   // the arguments limit reached ("1") or not ("0")
	status  int
}

// postForm sends body as a form POST through waf and reads ARGS_POST.
func postForm(t testing.TB, waf coraza.WAF, body string) formArgs {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI("/submit", "POST", "HTTP/1.1")
	tx.AddRequestHeader("Host", "example.com")
	tx.AddRequestHeader("Content-Type", "application/x-www-form-urlencoded")
	tx.ProcessRequestHeaders()
	if _, _, err := tx.WriteRequestBody([]byte(body)); err != nil {
		t.Fatal(err)
	}
	it, err := tx.ProcessRequestBody()
	if err != nil {
		t.Fatal(err)
	}
	v := tx.(plugintypes.TransactionState).Variables()
	if got := v.RequestBody().Get(); got != body {
		t.Fatalf("REQUEST_BODY %q, want the body %q", got, body)
	}
	if got := v.RequestBodyLength().Get(); got != strconv.Itoa(len(body)) {
		t.Fatalf("REQUEST_BODY_LENGTH %s, want %d", got, len(body))
	}
	a := formArgs{pairs: collectionPairs(v.ArgsPost().FindAll()), limited: v.ArgumentsLimitReached().Get()}
	if it != nil {
		a.status = it.Status
	}
	return a
}

// getQuery sends query as a GET's query string through waf and reads
// ARGS_GET, which Coraza fills itself, pair by pair.
func getQuery(t testing.TB, waf coraza.WAF, query string) formArgs {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	tx.ProcessURI("/submit?"+query, "GET", "HTTP/1.1")
	v := tx.(plugintypes.TransactionState).Variables()
	return formArgs{pairs: collectionPairs(v.ArgsGet().FindAll()), limited: v.ArgumentsLimitReached().Get()}
}

// collectionPairs lists matches as name=value, sorted by name, in the
// collection's order within a name.
func collectionPairs(ms []types.MatchData) []string {
	ms = slices.Clone(ms)
	slices.SortStableFunc(ms, func(a, b types.MatchData) int { return strings.Compare(a.Key(), b.Key()) })
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Key() + "=" + m.Value()
	}
	return out
}

// TestFormBody_caseCollision: fields whose names differ only in case each
// keep their values, under their own names, and a rule on ARGS_POST sees
// the attack in any of them, every time (Coraza's own processor kept one
// of the values, picked at random).
func TestFormBody_caseCollision(t *testing.T) {
	waf := formWAF(t, 1000)
	for _, tc := range []struct {
		body string
		want []string
	}{
		{"A=evilmarker&a=1", []string{"A=evilmarker", "a=1"}},
		{"a=1&A=evilmarker", []string{"A=evilmarker", "a=1"}},
		{"%41=evilmarker&a=1", []string{"A=evilmarker", "a=1"}},
		{"aB=1&Ab=evilmarker&ab=2&AB=3", []string{"AB=3", "Ab=evilmarker", "aB=1", "ab=2"}},
		{"a=1&A=2&a=evilmarker", []string{"A=2", "a=1", "a=evilmarker"}},
	} {
		for i := range 20 {
			got := postForm(t, waf, tc.body)
			if got.status != 403 || !slices.Equal(got.pairs, tc.want) {
				t.Fatalf("%q, run %d: status %d, ARGS_POST %q; want 403 and %q", tc.body, i, got.status, got.pairs, tc.want)
			}
		}
	}
}

// TestFormBody_sameAsQuery: a form body fills ARGS_POST with what the same
// text fills ARGS_GET with as a query string, which Coraza parses itself:
// the same names and values, unescaped alike, the same pairs skipped, and
// the arguments limit reached at the same point (here 3 pairs: at the limit
// not reached, past it reached, with the pairs past it dropped).
func TestFormBody_sameAsQuery(t *testing.T) {
	waf := formWAF(t, 3)
	for _, tc := range []struct {
		body    string
		want    []string
		limited string
	}{
		{"a=1&a=2", []string{"a=1", "a=2"}, "0"},
		{"a+b=%41%42+c", []string{"a b=AB c"}, "0"},
		{"a", []string{"a="}, "0"},
		{"=b", []string{"=b"}, "0"},
		{"&&a=1&&", []string{"a=1"}, "0"},
		{"a=1=2", []string{"a=1=2"}, "0"},
		{"a=%zz&b=%4&c=%", []string{"a=%zz", "b=%4", "c=%"}, "0"},
		{"k=%e2%82%ac%00", []string{"k=€\x00"}, "0"},
		{"a=1&b=2&c=3", []string{"a=1", "b=2", "c=3"}, "0"},
		{"a=1&b=2&c=3&&", []string{"a=1", "b=2", "c=3"}, "0"},
		{"a=1&b=2&c=3&d=evilmarker", []string{"a=1", "b=2", "c=3"}, "1"},
	} {
		got := postForm(t, waf, tc.body)
		if !slices.Equal(got.pairs, tc.want) || got.limited != tc.limited {
			t.Errorf("body %q: ARGS_POST %q, limit reached %q; want %q, %q", tc.body, got.pairs, got.limited, tc.want, tc.limited)
		}
		q := getQuery(t, waf, tc.body)
		if !slices.Equal(got.pairs, q.pairs) || got.limited != q.limited {
			t.Errorf("body %q: ARGS_POST %q, limit reached %q; as a query string ARGS_GET %q, %q", tc.body, got.pairs, got.limited, q.pairs, q.limited)
		}
		if got.status != 0 {
			t.Errorf("body %q: interrupted with %d; the marker past the limit is not inspected", tc.body, got.status)
		}
	}
}

// TestEachFormPair_limit: eachFormPair stops at limit pairs and reports
// it only when a pair is left (empty pairs do not count); a limit of 0 or
// less reads every pair (Coraza refuses SecArgumentsLimit 0, so only a
// direct call reaches it).
func TestEachFormPair_limit(t *testing.T) {
	for _, tc := range []struct {
		text      string
		limit     int
		want      []string
		truncated bool
	}{
		{"a=1&b=2&&", 2, []string{"a=1", "b=2"}, false},
		{"a=1&b=2&c", 2, []string{"a=1", "b=2"}, true},
		{"a=1&b=2&c", 0, []string{"a=1", "b=2", "c="}, false},
		{"a=1&b=2&c", -1, []string{"a=1", "b=2", "c="}, false},
	} {
		var got []string
		truncated := eachFormPair(tc.text, tc.limit, func(n, v string) { got = append(got, n+"="+v) })
		if !slices.Equal(got, tc.want) || truncated != tc.truncated {
			t.Errorf("%q, limit %d: %q, truncated %v; want %q, %v", tc.text, tc.limit, got, truncated, tc.want, tc.truncated)
		}
	}
}

// FuzzFormBody compares ARGS_POST of a form body with ARGS_GET of the same
// text as a query string (see TestFormBody_sameAsQuery), with a limit of 5
// arguments.
func FuzzFormBody(f *testing.F) {
	for _, s := range []string{"a=1&A=2", "%41=x&a=%", "a+b=c&&d", "x=%e2%82&y=%zz&=&z", "1&2&3&4&5&6&7"} {
		f.Add(s)
	}
	waf := formWAF(f, 5)
	f.Fuzz(func(t *testing.T, body string) {
		if strings.Contains(body, "#") {
			t.Skip("a query string ends at '#'")
		}
		got := postForm(t, waf, body)
		q := getQuery(t, waf, body)
		if !slices.Equal(got.pairs, q.pairs) || got.limited != q.limited {
			t.Fatalf("body %q: ARGS_POST %q, limit reached %q; as a query string ARGS_GET %q, %q", body, got.pairs, got.limited, q.pairs, q.limited)
		}
	})
}

// TestPreselection_formCaseCollision runs form bodies whose field names
// collide in case through each rule set of the differential test with and
// without the preselection: the screen's keys to skip (keyrx.go) fold case
// as Coraza's exceptions do, so a benign field beside an attack of the
// same folded name never hides it. The bodies have 12 fields or more, past
// minKeyValues, so that kept rules are told which keys to skip; the
// product default must also block each attack.
func TestPreselection_formCaseCollision(t *testing.T) {
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	attacks := []string{
		"<script>alert(document.cookie)</script>",
		"1' UNION SELECT password FROM users -- ",
		";cat /etc/passwd",
		"../../../../etc/passwd",
	}
	var reqs []diffRequest
	for i, attack := range attacks {
		// The attack goes under the name that differs, in each place.
		for _, f := range []struct {
			names    [3]string
			attackAt int
		}{
			{[3]string{"q", "Q", "q"}, 1},
			{[3]string{"Q", "q", "q"}, 0},
			{[3]string{"q", "q", "Q"}, 2},
			{[3]string{"Comment", "comment", "COMMENT"}, 2},
		} {
			var b strings.Builder
			for k := range 10 {
				b.WriteString("field" + strconv.Itoa(k) + "=value" + strconv.Itoa(k) + "&")
			}
			for k, n := range f.names {
				v := "plain" + strconv.Itoa(k)
				if k == f.attackAt {
					v = url.QueryEscape(attack)
				}
				b.WriteString(n + "=" + v + "&")
			}
			body := strings.TrimSuffix(b.String(), "&")
			reqs = append(reqs, diffRequest{
				name:   "attack " + strconv.Itoa(i) + ", names " + strings.Join(f.names[:], ","),
				method: "POST",
				uri:    "/form",
				headers: [][2]string{{"Host", "example.com"}, {"Content-Type", "application/x-www-form-urlencoded"},
					{"Content-Length", strconv.Itoa(len(body))}, {"User-Agent", "Mozilla/5.0"}, {"Accept", "*/*"}},
				body: []byte(body),
			})
		}
	}
	for _, s := range diffRuleSets(t) {
		t.Run(s.name, func(t *testing.T) {
			st := newDiffStats()
			for i := range reqs {
				compareOne(t, s.on, s.off, &reqs[i], st)
				if s.name == "crs" {
					if got := runTrace(s.on, &reqs[i], preludeIDs(s.on)); !strings.Contains(got.interruption, "status=403") {
						t.Errorf("%s: interruption %q with the preselection, want status 403", reqs[i].name, got.interruption)
					}
				}
			}
			st.log(t)
			st.check(t)
		})
	}
}
