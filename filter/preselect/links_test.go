package preselect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// linkRules are the CRS's 920170, 920171 and 920180 in small, a chain
// whose first chained rule writes TX when it matches, and one whose
// starter does. Rule 5 runs the screen (a rule being evaluated when it
// runs the screen is evaluated whatever the screen finds).
const linkRules = `SecRuleEngine On
SecAction "id:900000,phase:1,pass,nolog,setvar:tx.score=0"
SecRule REQUEST_URI "@rx ^/never" "id:5,phase:1,pass,nolog"
SecRule REQUEST_METHOD "@rx ^(?:GET|HEAD)$" "id:10,phase:1,block,msg:'GET with a body',logdata:'%{MATCHED_VAR}',chain"
    SecRule REQUEST_HEADERS:Content-Length "!@rx ^0?$" "t:none,setvar:'tx.score=+5'"
SecRule REQUEST_METHOD "@rx ^(?:GET|HEAD)$" "id:11,phase:1,block,chain"
    SecRule &REQUEST_HEADERS:Transfer-Encoding "!@eq 0" "t:none,setvar:'tx.score=+5'"
SecRule REQUEST_PROTOCOL "!@within HTTP/2 HTTP/2.0" "id:12,phase:1,block,chain"
    SecRule REQUEST_METHOD "@streq POST" "chain"
    SecRule &REQUEST_HEADERS:Content-Length "@eq 0" "t:none,setvar:'tx.score=+5'"
SecRule ARGS "@rx ." "id:13,phase:1,pass,nolog,chain"
    SecRule ARGS_NAMES "@streq k" "setvar:'tx.k=1',chain"
    SecRule REQUEST_METHOD "@streq NEVER" "setvar:'tx.score=+1'"
SecRule ARGS "@rx ." "id:14,phase:1,pass,nolog,setvar:'tx.seen=1',chain"
    SecRule REQUEST_METHOD "@streq NEVER" ""
SecRule TX:score "@ge 5" "id:949110,phase:2,deny,status:403,log"
`

// linkRun is what phases 1 and 2 of one request did.
type linkRun struct {
	status     int
	matched    string
	tx         string
	matchedVar string
}

func runLinks(t *testing.T, waf coraza.WAF, ix *Index, method, uri string, headers [][2]string) linkRun {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	if ix != nil {
		ix.Start(tx)
	}
	tx.ProcessURI(uri, method, "HTTP/1.1")
	for _, h := range headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	run := linkRun{status: requestPhases(t, tx)}
	run.matchedVar = tx.(plugintypes.TransactionState).Variables().MatchedVar().Get()
	var ids []string
	for _, mr := range tx.MatchedRules() {
		if id := mr.Rule().ID(); id != 900000 {
			ids = append(ids, fmt.Sprint(id))
		}
	}
	run.matched = strings.Join(ids, " ")
	run.tx = txWithoutCaptures(tx)
	return run
}

// TestLinks: a chained rule that can match nothing removes its rule,
// unless a chained rule before it writes TX when it matches; the same
// verdict, matched rules and TX with and without the preselection.
func TestLinks(t *testing.T) {
	with, ix, without, err := withAndWithout(t, linkRules)
	if err != nil {
		t.Fatal(err)
	}
	var linked []int
	for _, r := range ix.plans[1].rules {
		if r.links != nil {
			linked = append(linked, r.id)
		}
	}
	// 14's starter writes TX when it matches: its chain is not read.
	if !slices.Equal(linked, []int{10, 11, 12, 13}) {
		t.Errorf("rules read with their chains: %v, want [10 11 12 13]", linked)
	}
	for _, c := range []struct {
		method, uri string
		headers     [][2]string
		status      int
		removed     bool // by their chains: MATCHED_VAR is not a starter's
	}{
		{"GET", "/", nil, 0, true},
		{"GET", "/", [][2]string{{"Content-Length", "5"}}, 403, false},
		{"GET", "/", [][2]string{{"Content-Length", "0"}}, 0, true},
		{"GET", "/", [][2]string{{"Transfer-Encoding", "chunked"}}, 403, false},
		{"POST", "/", nil, 403, false},
		{"POST", "/", [][2]string{{"Content-Length", "0"}}, 0, true}, // 12's last chained rule cannot match
		{"GET", "/?k=1", nil, 0, false},                              // 13's first chained rule matches and writes tx.k
		{"GET", "/?a=1", nil, 0, false},                              // 14's starter matches and writes tx.seen
	} {
		name := fmt.Sprintf("%s %s %v", c.method, c.uri, c.headers)
		a := runLinks(t, with, ix, c.method, c.uri, c.headers)
		b := runLinks(t, without, nil, c.method, c.uri, c.headers)
		if a.status != b.status || a.matched != b.matched || a.tx != b.tx {
			t.Errorf("%s: with the preselection %+v, without %+v", name, a, b)
		}
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d", name, a.status, c.status)
		}
		if got := a.matchedVar == "" && b.matchedVar != ""; got != c.removed {
			t.Errorf("%s: removed by their chains %v (MATCHED_VAR %q, without %q), want %v", name, got, a.matchedVar, b.matchedVar, c.removed)
		}
	}
}

// TestLinksOf: which chains the screen reads, on compiled rule sets (the
// chained rules' operator instances are the compile's).
func TestLinksOf(t *testing.T) {
	starter := `SecRule REQUEST_METHOD "@rx ^GET$" "id:10,phase:1,block,msg:'m',chain"`
	for _, c := range []struct {
		starter string
		links   []string
		extra   string // another rule
		want    string // the links' quiet flags, "" for none
	}{
		{starter, []string{`SecRule REQUEST_HEADERS:Content-Length "!@rx ^0?$" "t:none,setvar:'tx.score=+5'"`}, "", "[false]"},
		{starter, []string{`SecRule REQUEST_METHOD "@streq POST" "chain"`, `SecRule &REQUEST_HEADERS:Content-Length "@eq 0" "t:none"`}, "", "[true true]"},
		{strings.Replace(starter, "block,", "capture,", 1), []string{`SecRule ARGS "@rx a" ""`}, "", ""},
		{strings.Replace(starter, "block,", "setvar:tx.a=1,", 1), []string{`SecRule ARGS "@rx a" ""`}, "", ""},
		{starter, []string{`SecRule TX:a "@eq 1" ""`}, "", ""},                          // TX changes during the phase
		{starter, []string{`SecRule ARGS|!ARGS:x "@rx a" ""`}, "", ""},                  // an exclusion
		{starter, []string{`SecRule ARGS "@validateUrlEncoding" ""`}, "", ""},           // not this project's
		{starter, []string{`SecRule ARGS "@rx %{tx.a}" ""`}, "", "[true]"},              // @rx reads no macro
		{starter, []string{`SecRule ARGS "@streq %{tx.a}" ""`}, "", ""},                 // a macro
		{starter, []string{`SecRule ARGS "@rx a" "t:md5"`}, "", ""},                     // a foreign transformation
		{starter, []string{`SecRule ARGS:/^a/ "@rx a" ""`}, "", ""},                     // a regexp key
		{starter, []string{`SecRule ARGS "@rx a" "ctl:ruleEngine=Off"`}, "", "[false]"}, // runs when it matches
		{starter, []string{`SecRule &REQUEST_HEADERS:Transfer-Encoding "!@eq 0" ""`}, "", "[true]"},
		// A ctl may remove a target of rule 10: its count may change.
		{starter, []string{`SecRule &REQUEST_HEADERS:Transfer-Encoding "!@eq 0" ""`},
			`SecRule ARGS "@rx z" "id:20,phase:1,pass,nolog,ctl:ruleRemoveTargetById=10;REQUEST_HEADERS:x"`, ""},
	} {
		_, ix := compile(t, "SecRuleEngine On\n"+c.extra+"\n"+c.starter+"\n"+strings.Join(c.links, "\n")+"\n")
		got := "no rule 10"
		for _, r := range ix.plans[1].rules {
			if r.id != 10 {
				continue
			}
			got = ""
			if r.links != nil {
				var q []bool
				for _, l := range r.links {
					q = append(q, l.quiet)
				}
				got = fmt.Sprint(q)
			}
		}
		if got != c.want {
			t.Errorf("%s / %v: %q, want %q", c.starter, c.links, got, c.want)
		}
	}
}
