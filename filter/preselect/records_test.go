package preselect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
)

const recordStarter = `SecRule REQUEST_HEADERS_NAMES "@rx ^.*$" "id:920450,phase:1,block,capture,t:none,t:lowercase,msg:'restricted (%{MATCHED_VAR})',severity:'CRITICAL',setvar:'tx.header_name_920450_%{tx.0}=/%{tx.0}/',chain"`
const recordLink = `SecRule TX:/^header_name_920450_/ "@within %{tx.restricted_headers_basic}" "setvar:'tx.score=+5'"`

func TestRecordOf(t *testing.T) {
	crs := &record{prefix: "header_name_920450_", before: "/", after: "/", list: "restricted_headers_basic"}
	for _, c := range []struct {
		starter string
		links   []string
		want    *record
	}{
		{recordStarter, []string{recordLink}, crs},
		{strings.Replace(recordStarter, "tx.header_name_920450_%{tx.0}=/%{tx.0}/", "TX.Header_Name_920450_%{TX.0}=</%{tx.0}>", 1),
			[]string{recordLink}, &record{prefix: "header_name_920450_", before: "</", after: ">", list: "restricted_headers_basic"}},
		{strings.Replace(recordStarter, "^.*$", "^.+$", 1), []string{recordLink}, nil},                  // may not match every value
		{strings.Replace(recordStarter, `"@rx`, `"!@rx`, 1), []string{recordLink}, nil},                 // negated
		{strings.Replace(recordStarter, "capture,", "", 1), []string{recordLink}, nil},                  // %{tx.0} is not the value
		{strings.Replace(recordStarter, "block,", "ctl:ruleEngine=Off,", 1), []string{recordLink}, nil}, // runs on every match
		{strings.Replace(recordStarter, "block,", "multiMatch,", 1), []string{recordLink}, nil},
		{strings.Replace(recordStarter, "chain", "setvar:tx.n=+1,chain", 1), []string{recordLink}, nil}, // two setvars
		{strings.Replace(recordStarter, "=/%{tx.0}/", "=+%{tx.0}", 1), []string{recordLink}, nil},       // arithmetic
		{strings.Replace(recordStarter, "=/%{tx.0}/", "=/%{tx.1}/", 1), []string{recordLink}, nil},
		{strings.Replace(recordStarter, "920450_%{tx.0}", "%{tx.1}_%{tx.0}", 1), []string{recordLink}, nil},
		{strings.Replace(recordStarter, "REQUEST_HEADERS_NAMES", "REQUEST_HEADERS_NAMES:host", 1), []string{recordLink}, nil},
		{strings.Replace(recordStarter, "REQUEST_HEADERS_NAMES", "&REQUEST_HEADERS_NAMES", 1), []string{recordLink}, nil},
		{recordStarter, []string{recordLink, recordLink}, nil},
		{recordStarter, []string{strings.Replace(recordLink, "^header_name_920450_", "^header_name_", 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, "TX:/", "ARGS:/", 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, `"@within`, `"!@within`, 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, "@within", "@contains", 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, `%{tx.restricted_headers_basic}`, `/proxy/`, 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, `"setvar`, `"t:lowercase,setvar`, 1)}, nil},
		{recordStarter, []string{strings.Replace(recordLink, `'tx.score=+5'`, `'tx.header_name_920450_x=1'`, 1)}, nil},
	} {
		r := observed{id: 920450, phase: 1, raw: c.starter, parsed: parseRule(c.starter)}
		got := recordOf(r, c.links, directiveFacts{})
		if got != nil {
			got = &record{prefix: got.prefix, before: got.before, after: got.after, list: got.list}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s / %s: %v, want %v", c.starter, c.links, got, c.want)
		}
	}
	r := observed{id: 920450, phase: 1, raw: recordStarter, parsed: parseRule(recordStarter)}
	if got := recordOf(r, []string{recordLink}, directiveFacts{updated: [][2]int{{920450, 920450}}}); got != nil {
		t.Error("an updated rule is a record rule")
	}
	if got := recordOf(r, []string{recordLink}, directiveFacts{defaultsOther: true}); got != nil {
		t.Error("a rule that inherits a SecDefaultAction's ctl is a record rule")
	}
}

// recordRules is the CRS's 920450 with its list set up in the prelude,
// and a rule that removes a header name from its targets.
const recordRules = `SecRuleEngine On
SecAction "id:900000,phase:1,pass,nolog,setvar:'tx.restricted_headers_basic=/proxy/ /lock-token/ /x-a b/',setvar:tx.score=0"
SecRule REQUEST_URI "@beginsWith /skip" "id:100,phase:1,pass,nolog,ctl:ruleRemoveTargetById=920450;REQUEST_HEADERS_NAMES:proxy"
` + recordStarter + "\n    " + recordLink + `
SecRule TX:score "@ge 5" "id:949110,phase:2,deny,status:403,log,msg:'score %{tx.score}'"
`

// recordRun is what phases 1 and 2 of one GET did.
type recordRun struct {
	status     int
	matched    string // rule IDs and their matched data
	tx         string // without the capture slots
	matchedVar string
}

func runRecord(t *testing.T, waf coraza.WAF, ix *Index, path string, headers []string) recordRun {
	t.Helper()
	tx := waf.NewTransaction()
	defer tx.Close()
	if ix != nil {
		ix.Start(tx)
	}
	tx.ProcessURI(path, "GET", "HTTP/1.1")
	for _, h := range headers {
		tx.AddRequestHeader(h, "1")
	}
	run := recordRun{status: requestPhases(t, tx)}
	run.matchedVar = tx.(plugintypes.TransactionState).Variables().MatchedVar().Get()
	for _, mr := range tx.MatchedRules() {
		if id := mr.Rule().ID(); id != 900000 {
			// Coraza puts the message on the first matched value, in
			// the order of a Go map: the messages are compared apart.
			var md, msgs []string
			for _, d := range mr.MatchedDatas() {
				md = append(md, fmt.Sprintf("%s:%s=%q", d.Variable().Name(), d.Key(), d.Value()))
				if d.Message() != "" {
					msgs = append(msgs, d.Message())
				}
			}
			sort.Strings(md)
			run.matched += fmt.Sprintf("%d%v%q ", id, md, msgs)
		}
	}
	// TX.0 is the last header name Coraza read, in the order of a Go
	// map: not compared.
	run.tx = txWithoutCaptures(tx)
	return run
}

// txWithoutCaptures returns tx's TX collection, sorted, without TX.0-9.
func txWithoutCaptures(tx types.Transaction) string {
	var kv []string
	for _, md := range tx.(plugintypes.TransactionState).Variables().TX().FindAll() {
		if k := md.Key(); strings.Trim(k, "0123456789") != "" {
			kv = append(kv, k+"="+md.Value())
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, " ")
}

// TestRecords runs requests through a record rule with and without the
// preselection: the same verdict, matched rules, matched data and TX
// (the records of every header name the rule reads); without a
// restricted name the operator wrote the records (MATCHED_VAR is not the
// last name, as it is when Coraza matches each one).
func TestRecords(t *testing.T) {
	with, ix, without, err := withAndWithout(t, recordRules)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.records) != 1 || !ix.records[0].on {
		t.Fatalf("records %v, want 920450, on", ix.records)
	}
	for _, c := range []struct {
		path     string
		headers  []string
		status   int
		recorded bool // the operator wrote the records
	}{
		{"/", []string{"Host", "Accept", "User-Agent"}, 0, true},
		{"/", []string{"Host", "X-Upper", "Lock", "Token", "X-A"}, 0, true}, // near misses of the list
		{"/", []string{"Host", "Proxy"}, 403, false},
		{"/", []string{"Lock-Token", "Host"}, 403, false},
		{"/skip", []string{"Host", "Proxy"}, 0, false}, // excluded: no record of it either way
		{"/skip", []string{"Host", "Lock-Token"}, 403, false},
		// Again: the records now come from those the rule made.
		{"/", []string{"Host", "Accept", "User-Agent"}, 0, true},
		{"/", []string{"Host", "Proxy"}, 403, false},
	} {
		a := runRecord(t, with, ix, c.path, c.headers)
		b := runRecord(t, without, nil, c.path, c.headers)
		if a.status != b.status || a.tx != b.tx || a.matched != b.matched {
			t.Errorf("%s %v: with the preselection %+v, without %+v", c.path, c.headers, a, b)
		}
		if a.status != c.status {
			t.Errorf("%s %v: status %d, want %d", c.path, c.headers, a.status, c.status)
		}
		if !strings.Contains(a.tx, "header_name_920450_host=/host/") {
			t.Errorf("%s %v: no record of host in %s", c.path, c.headers, a.tx)
		}
		if got := a.matchedVar == "" && b.matchedVar != ""; got != c.recorded {
			t.Errorf("%s %v: recorded by the operator %v (MATCHED_VAR %q, without %q), want %v",
				c.path, c.headers, got, a.matchedVar, b.matchedVar, c.recorded)
		}
	}
}

// TestRecord_made: the records a rule keeps are the ones it would make,
// for any case and past maxMade values.
func TestRecord_made(t *testing.T) {
	rec := &record{prefix: "header_name_920450_", before: "/", after: "/"}
	for round := 0; round < 2; round++ {
		for i := range maxMade + 10 {
			v := fmt.Sprintf("X-Name-%d", i)
			m := rec.record(v)
			if want := "header_name_920450_x-name-" + fmt.Sprint(i); m.key != want {
				t.Fatalf("round %d, %s: key %q, want %q", round, v, m.key, want)
			}
			if len(m.vals) != 1 || m.vals[0] != "/"+v+"/" {
				t.Fatalf("round %d, %s: values %q, want [/%s/]", round, v, m.vals, v)
			}
		}
		if len(rec.made) > maxMade {
			t.Fatalf("%d records kept, want at most %d", len(rec.made), maxMade)
		}
	}
}

// TestRecords_refused: a rule that writes keys the records start with
// makes 920450 no record rule; a list a transaction may change keeps it
// off.
func TestRecords_refused(t *testing.T) {
	rules := recordRules + `SecRule ARGS:h "@rx ." "id:200,phase:2,pass,nolog,setvar:'tx.header_name_920450_x=/proxy/'"` + "\n"
	_, ix, _, err := withAndWithout(t, rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.records) != 0 {
		t.Errorf("records %v, want none: another rule writes header_name_920450_ keys", ix.records)
	}
	rules = recordRules + `SecRule ARGS:h "@rx (.*)" "id:200,phase:2,pass,nolog,capture,setvar:'tx.restricted_headers_basic=%{tx.1}'"` + "\n"
	with, ix, without, err := withAndWithout(t, rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.records) != 1 || ix.records[0].on {
		t.Fatalf("records %v, want 920450, off: a rule writes its list", ix.records)
	}
	a := runRecord(t, with, ix, "/", []string{"Host"})
	b := runRecord(t, without, nil, "/", []string{"Host"})
	if a != b {
		t.Errorf("with the preselection %+v, without %+v", a, b)
	}
}

// TestRecords_crs pins the CRS's record rules: 920450 and 920451, their
// lists constants of the setup.
func TestRecords_crs(t *testing.T) {
	waf, ix := compile(t, "Include @coraza.conf-recommended\nSecRuleEngine On\nInclude @crs-setup.conf.example\nInclude @owasp_crs/*.conf")
	if _, err := ix.Snapshot(waf); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ix.records {
		if r.on {
			got = append(got, r.prefix)
		}
	}
	if want := []string{"header_name_920450_", "header_name_920451_"}; !slices.Equal(got, want) {
		t.Errorf("record rules on: %v, want %v", got, want)
	}
	// A record rule is judged from its list: never through the union.
	for _, pp := range ix.plans {
		if pp == nil {
			continue
		}
		for _, n := range pp.nodes {
			for _, rs := range n.united {
				for _, r := range rs {
					if r.rec != nil && r.rec.on {
						t.Errorf("record rule %d is judged through the union", r.id)
					}
				}
			}
		}
	}
}
