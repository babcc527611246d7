package filter

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/filter/preselect"
	"github.com/wafguard/wafguard/ftw"
	"github.com/wafguard/wafguard/internal/benchreq"
)

// The differential tests of the rule preselection: the same requests
// through a WAF with the preselection and one without must give the same
// interruption, the same matched rules in the same order with the same
// matched data, the same log lines and the same TX collection. Coraza
// itself is not deterministic in one respect: it reads ARGS, headers and
// cookies from Go maps, whose order changes from run to run, so a rule that
// captures or logs "the last match" (TX.0-9, MATCHED_VAR in a message) can
// differ between two runs of the same WAF. Each request therefore runs
// twice without the preselection: an aspect that differs between those two
// runs is order-dependent, counted and reported, and not compared; every
// other aspect must be equal.

// diffRequest is one request of the differential tests.
type diffRequest struct {
	name    string
	method  string
	uri     string
	headers [][2]string
	body    []byte
}

// trace is what one transaction decided, in comparable form.
type trace struct {
	interruption string
	matched      string // rule IDs in match order
	matchedData  string // per rule, its matched data
	logs         string // error log lines of the logged matches
	tx           string // TX without the capture fields
	captures     string // TX.0-9
}

var traceAspects = []string{"interruption", "matched", "matchedData", "logs", "tx", "captures"}

func (tr trace) aspect(name string) string {
	switch name {
	case "interruption":
		return tr.interruption
	case "matched":
		return tr.matched
	case "matchedData":
		return tr.matchedData
	case "logs":
		return tr.logs
	case "tx":
		return tr.tx
	}
	return tr.captures
}

// runTrace drives r through every phase of a transaction of waf, with a
// fixed transaction ID, and records what Coraza decided.
func runTrace(waf coraza.WAF, r *diffRequest, prelude map[int]bool) trace {
	tx := waf.NewTransactionWithID("diff")
	defer func() { _ = tx.Close() }()
	var tr trace
	interrupted := func(it *types.Interruption, p string) bool {
		if it == nil {
			return false
		}
		tr.interruption = fmt.Sprintf("%s rule=%d action=%s status=%d", p, it.RuleID, it.Action, it.Status)
		return true
	}
	tx.ProcessConnection("10.1.2.3", 43210, "10.0.0.1", 8080)
	tx.ProcessURI(r.uri, r.method, "HTTP/1.1")
	for _, h := range r.headers {
		tx.AddRequestHeader(h[0], h[1])
	}
	done := interrupted(tx.ProcessRequestHeaders(), "phase1")
	if !done && r.body != nil {
		it, _, err := tx.WriteRequestBody(r.body)
		if err != nil {
			tr.interruption = "body error: " + err.Error()
			done = true
		} else {
			done = interrupted(it, "body")
		}
	}
	if !done {
		it, err := tx.ProcessRequestBody()
		if err != nil {
			tr.interruption = "phase2 error: " + err.Error()
			done = true
		} else {
			done = interrupted(it, "phase2")
		}
	}
	if !done {
		tx.AddResponseHeader("Content-Type", "text/html")
		tx.AddResponseHeader("Content-Length", "12")
		done = interrupted(tx.ProcessResponseHeaders(200, "HTTP/1.1"), "phase3")
	}
	if !done && tx.IsResponseBodyAccessible() && tx.IsResponseBodyProcessable() {
		it, _, err := tx.WriteResponseBody([]byte("<p>hello</p>"))
		done = interrupted(it, "response body") || err != nil
	}
	if !done {
		it, err := tx.ProcessResponseBody()
		if err == nil {
			interrupted(it, "phase4")
		}
	}
	tx.ProcessLogging()

	var ids, data, logs []string
	for _, mr := range tx.MatchedRules() {
		l, ok := mr.(loggedRule)
		if ok && !l.Log() && (prelude[mr.Rule().ID()] || preselect.IsJump(mr.Rule().ID())) {
			// A rule of the prelude, which the WAF with it does not
			// evaluate, or an addition of 0 that does not match: it
			// logs nothing, and what it writes is in the TX aspect. Or
			// a marker jump, which only the WAF with the preselection
			// has.
			continue
		}
		ids = append(ids, strconv.Itoa(mr.Rule().ID()))
		var md []string
		for _, d := range mr.MatchedDatas() {
			md = append(md, fmt.Sprintf("%s:%s=%q msg=%q data=%q", d.Variable().Name(), d.Key(), d.Value(), d.Message(), d.Data()))
		}
		sort.Strings(md)
		data = append(data, strconv.Itoa(mr.Rule().ID())+"{"+strings.Join(md, ", ")+"}")
		if !ok || l.Log() {
			logs = append(logs, mr.ErrorLog())
		}
	}
	tr.matched = strings.Join(ids, " ")
	tr.matchedData = strings.Join(data, "\n")
	tr.logs = strings.Join(logs, "\n")
	var vars, caps []string
	for _, md := range tx.(plugintypes.TransactionState).Variables().TX().FindAll() {
		kv := md.Key() + "=" + md.Value()
		if len(md.Key()) == 1 && md.Key()[0] >= '0' && md.Key()[0] <= '9' {
			caps = append(caps, kv)
		} else {
			vars = append(vars, kv)
		}
	}
	sort.Strings(vars)
	sort.Strings(caps)
	tr.tx, tr.captures = strings.Join(vars, "\n"), strings.Join(caps, "\n")
	return tr
}

// diffWAFs compiles the directives with and without the preselection.
// preludeIDs returns the rules that log nothing and that the WAF with the
// preselection may leave out of the matched rules (preselect.Index.Quiet:
// the prelude's, the marker jumps, the additions of 0), none for a WAF
// without a prelude.
func preludeIDs(waf coraza.WAF) map[int]bool {
	if pw, ok := waf.(preludeWAF); ok && pw.ix != nil {
		return pw.ix.Quiet()
	}
	return map[int]bool{}
}

func diffWAFs(t testing.TB, directives ...string) (on, off coraza.WAF) {
	t.Helper()
	var err error
	if on, err = compileWAF(directives, true); err != nil {
		t.Fatal(err)
	}
	if off, err = compileWAF(directives, false); err != nil {
		t.Fatal(err)
	}
	return on, off
}

// diffStats counts, per aspect, the requests where two runs without the
// preselection already differed.
type diffStats struct {
	requests       int
	orderDepends   map[string]int
	capturesDiffer int
	// parts counts the aspects compared or skipped (captures aside: they
	// are counted, never compared). reproduced counts those where the
	// run with the preselection differed from the first two without it
	// and a later run without it gave the same; skipped those where two
	// runs without it disagreed and none of 64 more gave what the run
	// with it gave.
	parts, reproduced, skipped int
}

// maxSkippedShare is the share of a comparison's parts that may be
// skipped as order-dependent before the comparison fails: past it, too
// little of what the preselection decides is compared. An aspect that
// two runs without the preselection give differently is still compared
// when the run with it differs from both: it must be found among 64 more
// runs without it; only when it is not is the part skipped.
const maxSkippedShare = 0.05

// logField is one [name "value"] field of a match log line; a rule that
// matched several values adds msg_match_N and data_match_N fields.
var logField = regexp.MustCompile(`\[([a-z]+)(?:_match_\d+)? "((?:[^"\\]|\\.)*)"\]`)

// normalLogs is the log lines with each line's fields sorted and the
// match numbers dropped: the order in which a rule lists the values it
// matched is Coraza's map order.
func normalLogs(logs string) string {
	lines := strings.Split(logs, "\n")
	for i, l := range lines {
		fields := logField.FindAllString(l, -1)
		for j, f := range fields {
			m := logField.FindStringSubmatch(f)
			fields[j] = m[1] + "=" + m[2]
		}
		sort.Strings(fields)
		lines[i] = logField.ReplaceAllString(l, "") + strings.Join(fields, "|")
	}
	return strings.Join(lines, "\n")
}

// compareOne runs r through both WAFs and reports every aspect that the
// preselection changed. An aspect on which two runs without the
// preselection disagree is order-dependent and not compared. When the run
// with it differs from the first run without it, up to 64 more runs
// without it look for the same value: finding it shows that the
// difference is Coraza's map order, not the preselection; so does, for the
// log lines, finding each line (normalLogs) in one of those runs. TX.0-9 are counted, not compared: CRS
// rules capture from every header name or argument they match, the last
// one written wins, and which one that is follows the map order (seen:
// TX.0 was user-agent in 78% of runs of one request, accept or host in
// the rest, with the preselection and without).
func compareOne(t testing.TB, on, off coraza.WAF, r *diffRequest, st *diffStats) {
	t.Helper()
	prelude := preludeIDs(on)
	want, again, got := runTrace(off, r, prelude), runTrace(off, r, prelude), runTrace(on, r, prelude)
	st.requests++
	for _, a := range traceAspects {
		w, w2, g := want.aspect(a), again.aspect(a), got.aspect(a)
		orderDepends := w != w2
		if orderDepends {
			st.orderDepends[a]++
		}
		if a == "captures" {
			// Which of several matching values a rule captured last
			// follows Coraza's map order, and can be rare enough to
			// escape many runs (one JSON POST captures from about 60
			// arguments): captures are counted, not compared. A
			// removed rule matches no value, so it never captures;
			// that the screen itself writes no capture is
			// TestScreen_noCapture in filter/preselect.
			if g != w && g != w2 {
				st.capturesDiffer++
			}
			continue
		}
		st.parts++
		if g == w || g == w2 {
			continue
		}
		var lines *logLines
		if a == "logs" || a == "tx" || a == "matchedData" {
			lines = newLogLines(a, w, g)
			lines.see(w2)
		}
		reproduced := lines != nil && lines.done()
		start := time.Now()
		for i := 0; i < 128 && !reproduced; i++ {
			if i >= 16 && time.Since(start) > 2*time.Minute {
				// A large request takes a second a run: 16 runs, then
				// what two minutes allow. Three equal values of 27 KB
				// gave one rule's matched data five forms in eight runs,
				// some rare: fewer runs missed them.
				break
			}
			v := runTrace(off, r, prelude).aspect(a)
			reproduced = v == g || (lines != nil && lines.see(v))
		}
		if reproduced {
			st.reproduced++
			continue
		}
		if orderDepends {
			st.skipped++
			continue
		}
		t.Errorf("%s: %s differs with the preselection:\nwithout: %s\nwith:    %s", r.name, a, clip(w), clip(g))
	}
}

// logLines finds, line by line, the log lines, TX variables or matched
// data (one rule a line) of the run with the preselection among runs
// without it: each line's order-dependent parts (which of several
// matching values a rule reported, or set a variable from, last) vary
// independently, so all of them seldom coincide in one run. Three values
// of one request made two TX variables differ at once, each reproduced in
// one run of three, both together in one of nine.
type logLines struct {
	norm    func(string) string
	want    []string // norm of the run with it, per line
	pending map[int]bool
}

func newLogLines(aspect, without, with string) *logLines {
	norm := func(s string) string { return s }
	if aspect == "logs" {
		norm = normalLogs
	}
	l := &logLines{norm: norm, want: strings.Split(norm(with), "\n"), pending: map[int]bool{}}
	for i := range l.want {
		l.pending[i] = true
	}
	l.see(without)
	return l
}

// see marks the lines a run without the preselection reproduced, and
// reports whether every line has been.
func (l *logLines) see(without string) bool {
	got := strings.Split(l.norm(without), "\n")
	if len(got) != len(l.want) {
		return l.done()
	}
	for i := range l.pending {
		if got[i] == l.want[i] {
			delete(l.pending, i)
		}
	}
	return l.done()
}

func (l *logLines) done() bool { return len(l.pending) == 0 }

func newDiffStats() *diffStats { return &diffStats{orderDepends: map[string]int{}} }

func (st *diffStats) log(t testing.TB) {
	t.Logf("%d requests compared in %d parts; %d parts skipped as order-dependent (runs without the preselection disagree, and "+
		"none gave what the run with it gave); %d found in a later run without it; order-dependent aspects: %v; "+
		"TX.0-9 different from two runs without it: %d", st.requests, st.parts, st.skipped, st.reproduced, st.orderDepends, st.capturesDiffer)
}

// check fails the comparison when more than maxSkippedShare of its parts
// were skipped as order-dependent.
func (st *diffStats) check(t testing.TB) {
	t.Helper()
	if float64(st.skipped) > maxSkippedShare*float64(st.parts) {
		t.Errorf("%d of %d parts (%.1f%%) skipped as order-dependent, over the %.0f%% allowed: too little was compared",
			st.skipped, st.parts, 100*float64(st.skipped)/float64(st.parts), 100*maxSkippedShare)
	}
}

// clip shortens a long aspect for a failure message: its start and end,
// and how much was left out.
func clip(s string) string {
	const keep = 2000
	if len(s) <= 2*keep {
		return s
	}
	return fmt.Sprintf("%s ...[%d bytes]... %s", s[:keep], len(s)-2*keep, s[len(s)-keep:])
}

// preselectFull reports whether PRESELECT_FULL asks for every request of
// every corpus and every rule set on each.
func preselectFull() bool { return os.Getenv("PRESELECT_FULL") != "" }

// pl4Directives is the CRS at paranoia level 4 in detection-only mode: every
// rule runs and no interruption ends a transaction early, so every rule is
// compared. crsDirectives is the product default, blocking at level 1.
var (
	pl4Directives = crsLevelDirectives(4)
	crsDirectives = []string{"Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"}
)

// sample returns every n-th request, or all of them with
// PRESELECT_FULL=1.
func sample[T any](all []T, n int) []T {
	if preselectFull() || n <= 1 {
		return all
	}
	var out []T
	for i := 0; i < len(all); i += n {
		out = append(out, all[i])
	}
	return out
}

// ftwRequests turns every stage of the CRS regression suite into a request.
func ftwRequests(t testing.TB) []diffRequest {
	t.Helper()
	files, err := ftw.LoadTests()
	if err != nil {
		t.Fatal(err)
	}
	var out []diffRequest
	for _, f := range files {
		for _, tc := range f.Tests {
			for i, st := range tc.Stages {
				if r, ok := ftwRequest(st.Input.Method, st.Input.URI, st.Input.Headers, st.Input.Data, st.Input.EncodedData, st.Input.EncodedRequest); ok {
					r.name = fmt.Sprintf("%s-%d/%d", f.FileName, tc.TestId, i)
					out = append(out, r)
				}
			}
		}
	}
	if len(out) < 4000 {
		t.Fatalf("got %d requests from the CRS regression suite, want over 4000", len(out))
	}
	return out
}

func ftwRequest(method, uri *string, headers map[string]string, data, encodedData *string, encodedRequest string) (diffRequest, bool) {
	if encodedRequest != "" {
		raw, err := base64.StdEncoding.DecodeString(encodedRequest)
		if err != nil {
			return diffRequest{}, false
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return diffRequest{}, false
		}
		r := diffRequest{method: req.Method, uri: req.RequestURI, headers: [][2]string{{"Host", req.Host}}}
		for k, vs := range req.Header {
			for _, v := range vs {
				r.headers = append(r.headers, [2]string{k, v})
			}
		}
		if body, err := io.ReadAll(req.Body); err == nil && len(body) != 0 {
			r.body = body
		}
		return r, true
	}
	r := diffRequest{method: "GET", uri: "/"}
	if method != nil && *method != "" {
		r.method = *method
	}
	if uri != nil && *uri != "" {
		r.uri = *uri
	}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.headers = append(r.headers, [2]string{k, headers[k]})
	}
	switch {
	case data != nil:
		r.body = []byte(*data)
	case encodedData != nil:
		if b, err := base64.StdEncoding.DecodeString(*encodedData); err == nil {
			r.body = b
		}
	}
	return r, true
}

func poolRequests(t testing.TB) []diffRequest {
	t.Helper()
	pool, err := benchreq.DefaultPool()
	if err != nil {
		t.Fatal(err)
	}
	var out []diffRequest
	for i, p := range pool {
		r := diffRequest{name: fmt.Sprintf("pool-%d-%s", i, p.Name), method: p.Method, uri: p.Path, body: p.Body,
			headers: append([][2]string{{"Host", "shop.example.com"}}, p.Headers...)}
		out = append(out, r)
	}
	return out
}

// fuzzCorpusRequests reads the committed corpora of the request fuzzers
// and turns each entry into a request, as the fuzz target does.
func fuzzCorpusRequests(t testing.TB) []diffRequest {
	t.Helper()
	var out []diffRequest
	for _, dir := range []string{"FuzzRequest", "FuzzRequest_crs", "FuzzPreselection"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
		for _, p := range paths {
			args, err := readFuzzEntry(p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			var ex exchange
			switch {
			case dir == "FuzzPreselection" && len(args) == 5:
				ex = preselectionRequest(args[0].(byte), args[1].(string), args[2].(string), args[3].([]byte), args[4].([]byte))
			case len(args) == 7:
				ex = fuzzRequest(args[0].(byte), args[1].(byte), args[2].(string), args[3].(string), args[4].([]byte), args[5].([]byte), 16<<10)
			default:
				t.Fatalf("%s: %d values, an unknown shape", p, len(args))
			}
			out = append(out, exchangeRequest(filepath.Base(dir)+"/"+filepath.Base(p), ex))
		}
	}
	return out
}

func exchangeRequest(name string, ex exchange) diffRequest {
	r := diffRequest{name: name, method: ex.method, uri: ex.path, headers: append([][2]string{{"Host", "localhost"}}, ex.headers...)}
	if r.method == "" {
		r.method = "GET"
	}
	if r.uri == "" {
		r.uri = "/"
	}
	if ex.body != nil {
		r.body = bytes.Join(ex.body, nil)
	}
	return r
}

// readFuzzEntry parses one file of a Go fuzz corpus ("go test fuzz v1"
// and one value a line) for the types the request fuzzers take.
func readFuzzEntry(path string) ([]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a fuzz corpus file")
	}
	var out []any
	for _, l := range lines[1:] {
		typ, lit, ok := strings.Cut(l, "(")
		if !ok || !strings.HasSuffix(lit, ")") {
			return nil, fmt.Errorf("line %q", l)
		}
		lit = lit[:len(lit)-1]
		switch typ {
		case "byte", "uint8":
			if len(lit) >= 3 && lit[0] == '\'' {
				r, _, _, err := strconv.UnquoteChar(lit[1:len(lit)-1], '\'')
				if err != nil || r > 0xff {
					return nil, fmt.Errorf("line %q: %v", l, err)
				}
				out = append(out, byte(r))
				continue
			}
			n, err := strconv.ParseUint(lit, 0, 8)
			if err != nil {
				return nil, fmt.Errorf("line %q: %v", l, err)
			}
			out = append(out, byte(n))
		case "string", "[]byte":
			v, err := strconv.Unquote(lit)
			if err != nil {
				return nil, fmt.Errorf("line %q: %v", l, err)
			}
			if typ == "string" {
				out = append(out, v)
			} else {
				out = append(out, []byte(v))
			}
		default:
			return nil, fmt.Errorf("line %q: type %s", l, typ)
		}
	}
	return out, nil
}

var (
	diffOnce sync.Once
	// diffSets are the rule sets compared: the CRS at paranoia levels 2,
	// 3 and 4 in detection-only mode (the compile leaves different rules
	// out at each level), and the product default, blocking at level 1.
	diffSets []diffSet
)

func diffRuleSets(t testing.TB) []diffSet {
	diffOnce.Do(func() {
		for _, pl := range []int{4, 3, 2} {
			s := diffSet{name: fmt.Sprintf("pl%d", pl)}
			s.on, s.off = diffWAFs(t, crsLevelDirectives(pl)...)
			diffSets = append(diffSets, s)
		}
		s := diffSet{name: "crs"}
		s.on, s.off = diffWAFs(t, crsDirectives...)
		diffSets = append(diffSets, s)
	})
	if len(diffSets) != 4 {
		t.Fatal("the differential rule sets did not compile")
	}
	return diffSets
}

// crsSet is the product default of diffRuleSets.
func crsSet(t testing.TB) diffSet { return diffRuleSets(t)[3] }

// levelSets is the CRS at paranoia levels 1 to 4 in detection-only mode.
func levelSets(t testing.TB) []diffSet {
	// A copy: appending to the shared slice would overwrite its crs set.
	sets := slices.Clone(diffRuleSets(t)[:3])
	s := diffSet{name: "pl1"}
	s.on, s.off = diffWAFs(t, crsLevelDirectives(1)...)
	return append(sets, s)
}

// TestPreselection_equivalent compares the preselection against the full
// rule set on every stage of the CRS regression suite, the bench pool
// (every second request; all with PRESELECT_FULL=1) and the committed
// fuzz corpora (all of them),
// under each rule set of diffRuleSets. Each corpus and rule set fails
// when more than maxSkippedShare of its parts were skipped as
// order-dependent.
func TestPreselection_equivalent(t *testing.T) {
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig) // a host for what the WAFs log
	defer reset()
	sets := diffRuleSets(t)
	corpora := []struct {
		name string
		reqs func(testing.TB) []diffRequest
		step int
	}{
		{"crs_suite", ftwRequests, 1},
		{"bench_pool", poolRequests, 2},
		{"fuzz_corpora", fuzzCorpusRequests, 1},
	}
	for _, c := range corpora {
		all := c.reqs(t)
		for k, s := range sets {
			// Each rule set takes its own share of a sampled corpus.
			reqs := all
			if !preselectFull() && c.step > 1 {
				reqs = sample(all[min(k, len(all)):], c.step)
			}
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				st := newDiffStats()
				for i := range reqs {
					compareOne(t, s.on, s.off, &reqs[i], st)
					if t.Failed() && st.requests > 50 {
						break
					}
				}
				st.log(t)
				st.check(t)
			})
		}
	}
}

// preselectionRequest builds a structured request from fuzzer input: kind
// picks the body (none, JSON, urlencoded, multipart, XML) and how value is
// encoded in the query string (plain, percent-encoded, %u, HTML entities,
// base64); cookie becomes a Cookie header; rawHeaders more headers.
func preselectionRequest(kind byte, value, cookie string, rawHeaders, body []byte) exchange {
	enc := value
	switch (kind >> 3) % 5 {
	case 1:
		enc = pctEncode(value, "%%%02x")
	case 2:
		enc = pctEncode(value, "%%u00%02x")
	case 3:
		enc = pctEncode(value, "&#x%02x;")
	case 4:
		enc = base64.StdEncoding.EncodeToString([]byte(value))
	}
	ex := exchange{method: "GET", path: "/app/" + pctEncode(cookie, "%%%02x") + "?q=" + enc + "&v=" + pctEncode(value, "%%%02x")}
	if cookie != "" {
		ex.headers = append(ex.headers, [2]string{"cookie", "session=" + cookie + "; pref=" + value})
	}
	for i, line := range bytes.Split(rawHeaders, []byte{'\n'}) {
		if i >= 16 {
			break
		}
		if name, v, ok := bytes.Cut(line, []byte{':'}); ok && len(name) != 0 {
			ex.headers = append(ex.headers, [2]string{string(name), string(v)})
		}
	}
	var b []byte
	switch kind % 5 {
	case 0:
		return ex
	case 1:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/json"})
		b = []byte(`{"name":` + strconv.Quote(value) + `,"items":[` + strconv.Quote(string(body)) + `,{"k":` +
			strconv.Quote(cookie) + `}],` + strconv.Quote(string(body)) + `:1}`)
	case 2:
		ex.headers = append(ex.headers, [2]string{"content-type", "application/x-www-form-urlencoded"})
		b = []byte("name=" + pctEncode(value, "%%%02x") + "&" + string(body) + "&c=" + cookie)
	case 3:
		ex.headers = append(ex.headers, [2]string{"content-type", "multipart/form-data; boundary=b0undary"})
		b = []byte("--b0undary\r\nContent-Disposition: form-data; name=\"" + cookie + "\"\r\n\r\n" + value +
			"\r\n--b0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"" + value + "\"\r\nContent-Type: text/plain\r\n\r\n" +
			string(body) + "\r\n--b0undary--\r\n")
	case 4:
		ex.headers = append(ex.headers, [2]string{"content-type", "text/xml"})
		b = []byte("<a x=\"" + cookie + "\"><b>" + value + "</b>" + string(body) + "</a>")
	}
	ex.method = "POST"
	ex.body = [][]byte{b}
	return ex
}

// pctEncode writes every byte of s that is not a letter or digit with
// format.
func pctEncode(s, format string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, format, c)
	}
	return sb.String()
}

// maxFuzzPreselectionInput bounds FuzzPreselection's input: past the
// screen's bound on kept results (64 KiB) with room to spare, as
// TestPreselection_largeValues' values are.
const maxFuzzPreselectionInput = 512 << 10

// FuzzPreselection compares the preselection against the full rule set on
// structured requests, under largeValueRulesAll, the CRS at paranoia
// levels 2 to 4 and the product default:
//
//	go test ./filter -run '^$' -fuzz '^FuzzPreselection$' -fuzztime 60s -parallel 1
func FuzzPreselection(f *testing.F) {
	for _, s := range []struct {
		kind          byte
		value, cookie string
		headers, body string
	}{
		{0, "hello", "", "", ""},
		{1, "1' or '1'='1", "abc", "user-agent:Mozilla/5.0", `{"x":"<script>"}`},
		{2 | 1<<3, "<script>alert(1)</script>", "../../etc/passwd", "referer:http://x/", "a=1&b=2"},
		{3 | 2<<3, "; cat /etc/passwd", "${jndi:ldap://x}", "", "file content"},
		{4 | 3<<3, "ſelect * from users", "\u212aill", "accept:*/*", "<c>1 union select</c>"},
		{1 | 4<<3, "eval(base64_decode('x'))", "php://input", "x-forwarded-for:127.0.0.1", "[1,2,3]"},
		// Enough values for a kept rule to skip keys (preselect/keyrx.go).
		{2, "x", "c", "", "a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=<script>alert(1)</script>&H=8&i=<svg onload=x>"},
		{1, "<img src=x onerror=alert(1)>", "c", "", `{"a":1,"b":2,"c":3,"d":[4,5,6,7],"e":"1 union select 1"}`},
	} {
		f.Add(s.kind, s.value, s.cookie, []byte(s.headers), []byte(s.body))
	}
	// Large values (TestPreselection_largeValues): the fuzzer grows them
	// from these, and its input cap lets it.
	f.Add(byte(2), evilValue(35000), "c", []byte(""), []byte("x="+strings.Repeat("A%20", 20000)+"EVIL"))
	f.Add(byte(1|1<<3), repeatTo("<sCrIpT>%3c", 70000), "c", []byte("x-data:"+repeatTo("A ", 30000)), []byte(repeatTo("\\u0041 ", 40000)))
	quietLogs(f)
	discardMatchLines(f)
	_, reset := startPluginWith(f, phaseConfig)
	defer reset()
	sets := diffRuleSets(f)
	custom := diffSet{name: "custom"}
	custom.on, custom.off = diffWAFs(f, largeValueRulesAll...)
	f.Fuzz(func(t *testing.T, kind byte, value, cookie string, rawHeaders, body []byte) {
		if len(value)+len(cookie)+len(rawHeaders)+len(body) > maxFuzzPreselectionInput {
			return
		}
		r := exchangeRequest("fuzz", preselectionRequest(kind, value, cookie, rawHeaders, body))
		st := newDiffStats()
		compareOne(t, custom.on, custom.off, &r, st)
		for _, s := range sets {
			compareOne(t, s.on, s.off, &r, st)
		}
	})
}
