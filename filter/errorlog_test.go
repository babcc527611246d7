package filter

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// lineCheck is an error callback that formats each match with an errorLog
// and compares the line with Coraza's MatchedRule.ErrorLog.
type lineCheck struct {
	t     testing.TB
	el    *errorLog
	lines int // lines compared
	fast  int // of them, built without asking Coraza
	// fastDisrupted counts the lines of disruptive matches built
	// without asking Coraza.
	fastDisrupted int
	ids           map[int]bool
	failed        int
}

func (c *lineCheck) callback(mr types.MatchedRule) {
	rl := c.el.rules[mr.Rule()]
	// A rule already checked (or, for a disruptive match, learned) gets
	// its line from the errorLog alone.
	fast := rl != nil && !rl.fallback && (mr.Disruptive() && rl.disrupted != "" || !mr.Disruptive() && rl.checked)
	got := c.el.line(mr)
	want := mr.ErrorLog()
	c.lines++
	if fast {
		c.fast++
		if mr.Disruptive() {
			c.fastDisrupted++
		}
	}
	c.ids[mr.Rule().ID()] = true
	if got != want && c.failed < 5 {
		c.failed++
		c.t.Errorf("rule %d (disruptive %v):\n got %s\nwant %s", mr.Rule().ID(), mr.Disruptive(), got, want)
	}
}

// TestErrorLog_sameAsCoraza sends the CRS regression suite (every fourth
// stage), the bench pool and requests made to stress the quoting through
// the CRS in blocking mode and at paranoia level 4 in detection-only mode,
// and compares every logged match's line with Coraza's own. No rule may
// fall back to Coraza's line: that would mean the built line differed.
func TestErrorLog_sameAsCoraza(t *testing.T) {
	reqs := append(sample(ftwRequests(t), 4), poolRequests(t)...)
	reqs = append(reqs, quotingRequests()...)
	for _, set := range []struct {
		name       string
		directives []string
	}{{"crs", crsDirectives}, {"pl4", pl4Directives}} {
		t.Run(set.name, func(t *testing.T) {
			c := &lineCheck{t: t, el: newErrorLog(), ids: map[int]bool{}}
			cfg := coraza.NewWAFConfig().WithErrorCallback(c.callback).WithRootFS(rulesFS{}).
				WithDirectives(strings.Join(set.directives, "\n"))
			waf, err := coraza.NewWAF(cfg)
			if err != nil {
				t.Fatal(err)
			}
			disrupted := 0
			for i := range reqs {
				if tr := runTrace(waf, &reqs[i], nil); tr.interruption != "" {
					disrupted++
				}
			}
			var fallback []int
			for r, rl := range c.el.rules {
				if rl.fallback {
					fallback = append(fallback, r.ID())
				}
			}
			if len(fallback) != 0 {
				t.Errorf("rules %v fell back to Coraza's line", fallback)
			}
			t.Logf("%d requests (%d interrupted), %d lines of %d rules, %d built without Coraza (%d disruptive)",
				len(reqs), disrupted, c.lines, len(c.ids), c.fast, c.fastDisrupted)
			if c.lines < 2000 || len(c.ids) < 100 || c.fast < c.lines-2*len(c.ids) {
				t.Errorf("%d lines of %d rules, %d built without Coraza: the corpus no longer covers the lines", c.lines, len(c.ids), c.fast)
			}
			if set.name == "crs" && c.fastDisrupted < 500 {
				t.Errorf("%d disruptive lines built without Coraza, want 500 or more", c.fastDisrupted)
			}
		})
	}
}

// quotingRequests carry what Go's quoting escapes (quotes, backslashes,
// control bytes, invalid UTF-8, non-ASCII), values past the 280 bytes a
// line keeps, and values that several rules of a chain match.
func quotingRequests() []diffRequest {
	values := []string{
		`<script>alert("x\\y")</script>`,
		"1' OR '1'='1\x01\x7f",
		"<svg onload=alert(1)>\xff\xfe",
		"<script>alert('ü€😀')</script>",
		"../../etc/passwd\t\r",
		"<script>" + strings.Repeat("a\"b", 200) + "</script>",
		"' UNION SELECT " + strings.Repeat("ñ", 300) + " --",
		";cat /etc/passwd #\u2028",
	}
	var out []diffRequest
	for i, v := range values {
		q := pctEncode(v, "plain")
		out = append(out,
			diffRequest{name: fmt.Sprintf("quote-get-%d", i), method: "GET", uri: "/q?a=" + q + "&b=" + q,
				headers: [][2]string{{"Host", "localhost"}, {"User-Agent", v}, {"Cookie", "c=" + q}}},
			diffRequest{name: fmt.Sprintf("quote-form-%d", i), method: "POST", uri: "/f", body: []byte("x=" + q),
				headers: [][2]string{{"Host", "localhost"}, {"Content-Type", "application/x-www-form-urlencoded"}}},
		)
	}
	return out
}

// fakeMatch is a matched rule whose Coraza line is given, to test what the
// errorLog does when its own line differs.
type fakeMatch struct {
	types.MatchedRule
	disruptive bool
	line       string
	asked      *int
}

func (f fakeMatch) Disruptive() bool { return f.disruptive }
func (f fakeMatch) ErrorLog() string { *f.asked++; return f.line }

type fakeRule struct{ types.RuleMetadata }

func (fakeRule) ID() int                      { return 7 }
func (fakeRule) File() string                 { return "f.conf" }
func (fakeRule) Line() int                    { return 3 }
func (fakeRule) Revision() string             { return "" }
func (fakeRule) Severity() types.RuleSeverity { return types.RuleSeverityCritical }
func (fakeRule) Version() string              { return "" }
func (fakeRule) Tags() []string               { return []string{"t"} }
func (fakeRule) Maturity() int                { return 0 }
func (fakeRule) Accuracy() int                { return 0 }

type fakeData struct{ types.MatchData }

func (fakeData) Message() string                  { return "m" }
func (fakeData) Data() string                     { return "d" }
func (fakeData) Variable() variables.RuleVariable { return variables.Args }
func (fakeData) Key() string                      { return "a" }

type fakeBase struct {
	types.MatchedRule
	rule   types.RuleMetadata
	client string
}

func (b fakeBase) MatchedDatas() []types.MatchData { return []types.MatchData{fakeData{}} }
func (b fakeBase) Rule() types.RuleMetadata        { return b.rule }
func (b fakeBase) ClientIPAddress() string {
	if b.client != "" {
		return b.client
	}
	return "10.1.2.3"
}
func (fakeBase) ServerIPAddress() string { return "10.0.0.1" }
func (fakeBase) URI() string             { return "/" }
func (fakeBase) TransactionID() string   { return "tx" }

// TestErrorLog_fallback: a rule whose line from Coraza differs from the
// built one keeps Coraza's lines from then on, for both kinds of match,
// and a disruptive phrase is learned only from a line that has the built
// body around it.
func TestErrorLog_fallback(t *testing.T) {
	built := `[client "10.1.2.3"] Coraza: Warning. m [file "f.conf"] [line "3"] [id "7"] [rev ""] [msg "m"] [data "d"] [severity "critical"] [ver ""] [maturity "0"] [accuracy "0"] [tag "t"] [hostname "10.0.0.1"] [uri "/"] [unique_id "tx"]`
	denied := strings.Replace(built, "Coraza: Warning. ", "Coraza: Access denied (phase 2). ", 1)
	tests := []struct {
		name       string
		disruptive bool
		coraza     string
		// wantAsked is how often the errorLog asks Coraza over three
		// matches of the rule.
		wantAsked int
	}{
		{"warning as built", false, built, 1},
		{"warning differs", false, built + " [extra]", 3},
		{"disruptive learned", true, denied, 1},
		{"disruptive body differs", true, strings.Replace(denied, `[tag "t"]`, `[tag "u"]`, 1), 3},
		{"disruptive phrase not a phrase", true, strings.Replace(built, "Coraza: Warning. ", "x", 1), 3},
		{"disruptive phrase with a field", true, strings.Replace(built, "Coraza: Warning. ", `Coraza: [x "y"]. `, 1), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			el := newErrorLog()
			asked := 0
			mr := fakeMatch{MatchedRule: fakeBase{rule: fakeRule{}}, disruptive: tc.disruptive, line: tc.coraza, asked: &asked}
			for i := 0; i < 3; i++ {
				if got := el.line(mr); got != tc.coraza {
					t.Fatalf("match %d: line\n %s\nwant Coraza's\n %s", i, got, tc.coraza)
				}
			}
			if asked != tc.wantAsked {
				t.Errorf("asked Coraza %d times over three matches, want %d", asked, tc.wantAsked)
			}
		})
	}
}

// TestPlugin_matchLogLines: on every runner, a rule's second match is
// logged by the line built without Coraza (the first is checked against
// Coraza's, or learns its phrase from it), so the two requests' lines
// must be the same but for the transaction's ID; a deny names its action
// and phase, a pass match is a warning.
func TestPlugin_matchLogLines(t *testing.T) {
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, phaseConfig)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		defer p.close()
		for _, tc := range []struct {
			name   string
			ex     exchange
			id     string
			phrase string
		}{
			{"deny", exchange{path: "/a?x=1", headers: [][2]string{{"x-phase1", "attack"}}}, `[id "1001"]`, "] Coraza: Access denied (phase 1). phase 1 rule ["},
			{"pass", exchange{path: "/b?log=me", headers: nil}, `[id "1005"]`, `] Coraza: Warning. logged, not blocked [`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var lines []string
				for i := 1; i <= 2; i++ {
					ex := tc.ex
					reqID := fmt.Sprintf("req-%s-%d", tc.name, i)
					ex.headers = append([][2]string{{"x-request-id", reqID}}, ex.headers...)
					p.do(t, ex)
					var got []string
					for _, l := range p.logs() {
						if strings.HasPrefix(l, "warn: ") && strings.Contains(l, tc.id) && strings.Contains(l, `[unique_id "`+reqID+`"]`) {
							got = append(got, strings.TrimPrefix(l, "warn: "))
						}
					}
					if len(got) != 1 {
						t.Fatalf("request %d: %d warn lines with %s and its ID, want 1: %q", i, len(got), tc.id, got)
					}
					if !strings.Contains(got[0], tc.phrase) || !strings.HasSuffix(got[0], `[unique_id "`+reqID+`"]`) {
						t.Errorf("request %d: line %q lacks %q or its transaction's ID at the end", i, got[0], tc.phrase)
					}
					lines = append(lines, got[0])
				}
				if want := strings.Replace(lines[0], "req-"+tc.name+"-1", "req-"+tc.name+"-2", 1); lines[1] != want {
					t.Errorf("second line\n %s\nwant the first's but for the ID\n %s", lines[1], want)
				}
			})
		}
	})
}

// TestErrorLog_concurrent: natively, transactions of one WAF may log at
// once; each line stays whole.
func TestErrorLog_concurrent(t *testing.T) {
	el := newErrorLog()
	lines := make(chan string, 4*2000)
	el.write = func(l string) { lines <- l }
	want := func(client string) string {
		return `[client "` + client + `"] Coraza: Warning. m [file "f.conf"] [line "3"] [id "7"] [rev ""] [msg "m"] [data "d"] [severity "critical"] [ver ""] [maturity "0"] [accuracy "0"] [tag "t"] [hostname "10.0.0.1"] [uri "/"] [unique_id "tx"]`
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(client string) {
			defer wg.Done()
			asked := 0
			mr := fakeMatch{MatchedRule: fakeBase{rule: fakeRule{}, client: client}, line: want(client), asked: &asked}
			for i := 0; i < 2000; i++ {
				el.log(mr)
			}
		}(strings.Repeat(strconv.Itoa(g), 10+g*7))
	}
	wg.Wait()
	close(lines)
	n := 0
	for l := range lines {
		n++
		client := l[len(`[client "`):strings.Index(l, `"]`)]
		if l != want(client) {
			t.Fatalf("line %q is not whole", l)
		}
	}
	if n != 4*2000 {
		t.Errorf("%d lines, want %d", n, 4*2000)
	}
}
