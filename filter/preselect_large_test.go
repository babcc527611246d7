package filter

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
)

// Large values: the screen writes transformed values into a buffer it
// reuses, and keeps results for the other paths of a value's walk only up
// to a bound of that buffer (filter/preselect, made.go). Values of tens
// or hundreds of kilobytes are where a result can outlive its region of
// the buffer; these tests put such values in every place a request
// carries them, with the rule set that showed the fault and with the CRS
// at every paranoia level.

// largeValueRules is an operator's own rule set whose transformations
// make long results, some in the screen's buffer (t:lowercase,
// t:removeWhitespace) and some slices of another result (t:trim).
var largeValueRules = []string{
	"SecRuleEngine On",
	"SecRequestBodyAccess On",
	`SecRule ARGS "@contains zzz"  "id:101,phase:2,pass,log,t:none,t:lowercase,t:trim"`,
	`SecRule ARGS "@contains qqq"  "id:102,phase:2,pass,log,t:none,t:removeWhitespace"`,
	`SecRule ARGS "@contains evil" "id:103,phase:2,deny,status:403,log,t:none,t:urlDecodeUni,t:lowercase,t:trim"`,
}

// largeValueRulesAll is largeValueRules with rule 103 reading every
// collection a request carries values in (ARGS, cookies, headers), so
// that each placement of largePlacements reaches it.
var largeValueRulesAll = append(append([]string{}, largeValueRules[:4]...),
	`SecRule ARGS|REQUEST_COOKIES|REQUEST_HEADERS:x-data "@contains evil" "id:103,phase:2,deny,status:403,log,t:none,t:urlDecodeUni,t:lowercase,t:trim"`,
	// JSON bodies are read into ARGS as with Coraza's recommended settings.
	`SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:100,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"`)

// evilValue is "A " n times and "EVIL": each transformation of rule 103's
// chain changes it, and only the last bytes match.
func evilValue(n int) string { return strings.Repeat("A ", n) + "EVIL" }

// largePlacement puts values into a request.
type largePlacement struct {
	name string
	make func(values ...string) exchange
}

// largePlacements are the places a request carries a value in: the query
// string, a form, JSON and multipart body, a cookie and a header. Each
// takes one or more values.
var largePlacements = []largePlacement{
	{"query", func(vs ...string) exchange {
		q := url.Values{}
		for i, v := range vs {
			q.Set(fmt.Sprintf("v%d", i), v)
		}
		return exchange{path: "/search?" + q.Encode()}
	}},
	{"form", func(vs ...string) exchange {
		q := url.Values{}
		for i, v := range vs {
			q.Set(fmt.Sprintf("v%d", i), v)
		}
		return bodyExchange("application/x-www-form-urlencoded", q.Encode())
	}},
	{"json", func(vs ...string) exchange {
		m := map[string]any{"items": []any{}}
		for i, v := range vs {
			m[fmt.Sprintf("v%d", i)] = v
			m["items"] = append(m["items"].([]any), map[string]string{"text": v})
		}
		b, _ := json.Marshal(m)
		return bodyExchange("application/json", string(b))
	}},
	{"multipart", func(vs ...string) exchange {
		var sb strings.Builder
		for i, v := range vs {
			fmt.Fprintf(&sb, "--b0undary\r\nContent-Disposition: form-data; name=\"v%d\"\r\n\r\n%s\r\n", i, v)
		}
		sb.WriteString("--b0undary--\r\n")
		return bodyExchange("multipart/form-data; boundary=b0undary", sb.String())
	}},
	{"cookie", func(vs ...string) exchange {
		var parts []string
		for i, v := range vs {
			parts = append(parts, fmt.Sprintf("v%d=%s", i, url.QueryEscape(v)))
		}
		return exchange{headers: [][2]string{{"cookie", strings.Join(parts, "; ")}}}
	}},
	{"header", func(vs ...string) exchange {
		ex := exchange{}
		for _, v := range vs {
			ex.headers = append(ex.headers, [2]string{"x-data", v})
		}
		return ex
	}},
}

func bodyExchange(contentType, body string) exchange {
	return exchange{method: "POST", path: "/submit", headers: [][2]string{{"content-type", contentType}},
		body: [][]byte{[]byte(body)}}
}

// largeContent makes a value of about n bytes.
type largeContent struct {
	name string
	make func(n int, rng *rand.Rand) string
}

// largeContents are repetitive and random contents, benign and with an
// attack at the start, in the middle or at the end, in plain and encoded
// forms, so that the CRS's transformations change them in many ways.
var largeContents = []largeContent{
	{"spaces-evil", func(n int, _ *rand.Rand) string { return evilValue(n / 2) }},
	{"prose", func(n int, _ *rand.Rand) string {
		return repeatTo("The Quick brown fox, jumps over the lazy dog.  ", n)
	}},
	{"encoded-xss-end", func(n int, _ *rand.Rand) string {
		return repeatTo("%41%20&#x41; \\x41 ", n) + "<script>alert(document.cookie)</script>"
	}},
	{"sqli-start", func(n int, _ *rand.Rand) string {
		return "1' UNION SELECT password FROM users -- " + repeatTo("a", n)
	}},
	{"path-middle", func(n int, _ *rand.Rand) string {
		h := repeatTo("dir/", n/2)
		return h + "../../../../etc/passwd" + h
	}},
	{"comments", func(n int, _ *rand.Rand) string {
		return repeatTo("/**/SeLeCt/*x*/", n) + " -- \t\r\n"
	}},
	{"random-printable", func(n int, rng *rand.Rand) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x5f))
		}
		return string(b)
	}},
	{"random-bytes-cmd", func(n int, rng *rand.Rand) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		mid := n / 2
		return string(b[:mid]) + ";cat /etc/passwd;" + string(b[mid:])
	}},
}

func repeatTo(s string, n int) string {
	return strings.Repeat(s, max(1, n/len(s)))
}

// largeSizes are the value sizes compared: below the screen's bound on
// kept results (64 KiB), past it with room for a second result in the
// buffer (80 KiB: the fault's range, 66 to 100 KB of "A " and "EVIL"), a
// value of the fault's report (140 KB), up to half the plugin's default
// body limit for a body without files (1 MiB).
var largeSizes = []int{16 << 10, 80 << 10, 140 << 10, 512 << 10}

// TestPreselection_largeValueRules: a form value of "A " 35,000 times and
// "EVIL" (70 KB, a body of 140 KB) is denied by rule 103 with the preselection as
// without, on every run (the fault it pins depended on Coraza's map order).
func TestPreselection_largeValueRules(t *testing.T) {
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	on, off := diffWAFs(t, largeValueRules...)
	for _, n := range []int{10, 35000} {
		body := "x=" + strings.Repeat("A%20", n) + "EVIL"
		r := diffRequest{name: "form", method: "POST", uri: "/", body: []byte(body),
			headers: [][2]string{{"Host", "localhost"}, {"Content-Type", "application/x-www-form-urlencoded"}}}
		for i := 0; i < 20; i++ {
			got := runTrace(on, &r, nil)
			if want := runTrace(off, &r, nil); got.interruption != want.interruption {
				t.Fatalf("%d repetitions, run %d: interruption %q with the preselection, %q without", n, i, got.interruption, want.interruption)
			}
			if !strings.Contains(got.interruption, "rule=103") {
				t.Fatalf("%d repetitions: interruption %q, want rule 103", n, got.interruption)
			}
		}
	}
}

// TestLargeValue_blocked drives the fault's request (a form body of
// "A%20" 35,000 times and "EVIL", 140 KB, whose value is 70 KB), and the
// same value in every placement, through the plugin (natively, on the
// .wasm in wazero and on V8), with the preselection on and off: each is
// denied by rule 103. The query, cookie and header placements are past
// Envoy's default 60 KiB of request headers: the hosts here take them, as
// an Envoy with a larger max_request_headers_kb would.
func TestLargeValue_blocked(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		for _, pre := range []bool{true, false} {
			config := configJSON(map[string]any{
				"directives_map":     map[string][]string{"rules": largeValueRulesAll},
				"default_directives": "rules",
				"rule_preselection":  pre,
			})
			p, err := r.load(t, config)
			if err != nil {
				t.Fatal(err)
			}
			for _, pl := range largePlacements {
				for _, reps := range []int{10, 35000} {
					ex := pl.make(evilValue(reps))
					for i := 0; i < 3; i++ {
						if o := p.do(t, ex); o.status != 403 {
							t.Errorf("rule_preselection %v, %s, %d repetitions, run %d: status %d, want 403 (rule 103)", pre, pl.name, reps, i, o.status)
						}
					}
				}
			}
			p.close()
		}
	})
}

// crsLevelDirectives is the CRS at paranoia level pl in detection-only
// mode, as pl4Directives: every rule of the level runs, and no
// interruption ends a transaction early.
func crsLevelDirectives(pl int) []string {
	return []string{
		"Include @recommended-conf",
		fmt.Sprintf(`SecAction "id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,setvar:tx.blocking_paranoia_level=%d,setvar:tx.crs_validate_utf8_encoding=1"`, pl),
		"Include @crs-setup-conf",
		"Include @owasp_crs/*.conf",
	}
}

// diffSet is one rule set compiled with and without the preselection.
type diffSet struct {
	name    string
	on, off coraza.WAF
}

// TestPreselection_largeValues compares the preselection against the full
// rule set on large values: each content of largeContents at each size
// of largeSizes, in each placement, alone and three values in one
// request, under the fault's rule set (largeValueRulesAll) and the CRS
// at paranoia levels 1 to 4. Without PRESELECT_FULL=1 the fault's rule
// set sees every such request, and the CRS, which takes up to a second a
// transaction on such values, one per (content, placement): a level, a
// size under 512 KB and a count turn by turn, so that each is covered.
// PRESELECT_LARGE_CONTENTS=<regexp> compares only the contents whose name
// it matches (to split or resume the full run); PRESELECT_LARGE_SHARD=i/n
// compares only every n-th request from the i-th on (0 <= i < n), to
// spread one content over n processes: the values are made for every
// request either way, so the n shards compare the same requests as one run.
func TestPreselection_largeValues(t *testing.T) {
	if testing.Short() {
		t.Skip("large values: not with -short")
	}
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	sets := levelSets(t)
	customs := make([]diffSet, 2)
	for i, rules := range [][]string{largeValueRules, largeValueRulesAll} {
		customs[i].on, customs[i].off = diffWAFs(t, rules...)
	}
	full := preselectFull()
	rng := rand.New(rand.NewPCG(44, 1))
	st := newDiffStats()
	pair := 0
	only := os.Getenv("PRESELECT_LARGE_CONTENTS")
	shard, shards := largeShard(t)
	made := 0
	for _, c := range largeContents {
		if only != "" && !regexp.MustCompile(only).MatchString(c.name) {
			continue
		}
		for _, pl := range largePlacements {
			pair++
			for si, size := range largeSizes {
				for ci, count := range []int{1, 3} {
					vs := make([]string, count)
					for i := range vs {
						vs[i] = c.make(size/count, rng)
					}
					k := made
					made++
					if k%shards != shard {
						continue
					}
					r := exchangeRequest(fmt.Sprintf("%s/%s/%dK/x%d", c.name, pl.name, size>>10, count), pl.make(vs...))
					for _, c := range customs {
						compareOne(t, c.on, c.off, &r, st)
					}
					// Without PRESELECT_FULL: the sizes under 512 KB
					// and the counts take turns, and so do the levels.
					turns := 2 * (len(largeSizes) - 1)
					crs := full || size < 512<<10 && si+(len(largeSizes)-1)*ci == pair%turns
					for k, s := range sets {
						if crs && (full || k == (pair+pair/turns)%len(sets)) {
							compareOne(t, s.on, s.off, &r, st)
						}
					}
					if t.Failed() {
						st.log(t)
						return
					}
				}
			}
		}
	}
	st.log(t)
	st.check(t)
	if want := len(largeContents) * len(largePlacements) * (2*len(largeSizes) + 1); only == "" && shards == 1 && st.requests < want {
		t.Fatalf("compared %d requests, want at least %d", st.requests, want)
	}
}

// largeShard reads PRESELECT_LARGE_SHARD (parseShard): shard 0 of 1 when
// it is unset.
func largeShard(t *testing.T) (shard, shards int) {
	v := os.Getenv("PRESELECT_LARGE_SHARD")
	if v == "" {
		return 0, 1
	}
	shard, shards, err := parseShard(v)
	if err != nil {
		t.Fatal(err)
	}
	return shard, shards
}

// parseShard reads "i/n": shard i of n, with 0 <= i < n.
func parseShard(v string) (shard, shards int, err error) {
	is, ns, ok := strings.Cut(v, "/")
	shard, err1 := strconv.Atoi(is)
	shards, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || shards < 1 || shard < 0 || shard >= shards {
		return 0, 0, fmt.Errorf("PRESELECT_LARGE_SHARD=%q: want i/n with 0 <= i < n, e.g. 0/2", v)
	}
	return shard, shards, nil
}

// TestParseShard: every shard from 0 to n-1 is taken, n and past it, a
// negative shard, n < 1 and text that is not i/n are refused.
func TestParseShard(t *testing.T) {
	for _, v := range []string{"0/1", "0/2", "1/2", "47/48"} {
		if _, _, err := parseShard(v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	if i, n, _ := parseShard("7/48"); i != 7 || n != 48 {
		t.Errorf(`"7/48": got %d/%d`, i, n)
	}
	for _, v := range []string{"2/2", "3/2", "-1/2", "0/0", "1/-1", "1", "a/b", "1/2/3", "1/2x"} {
		if _, _, err := parseShard(v); err == nil {
			t.Errorf("%q: no error", v)
		}
	}
}
