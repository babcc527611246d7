package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLatencyOf(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := latencyOf(d)
	want := Latency{N: 100, P50: 50, P90: 90, P95: 95, P99: 99, P999: 100, Max: 100}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := latencyOf(nil); got != (Latency{}) {
		t.Errorf("empty: got %+v, want zero", got)
	}
}

func fakeRun(rps float64, p99 float64, limited int) *Run {
	r := &Run{Mode: "closed", Throughput: rps, Answered: 100}
	r.byClass[BenignGET] = Outcome{Passed: 70 - limited, Limited: limited}
	r.byClass[BenignJSON] = Outcome{Passed: 19, Blocked: 1}
	r.byClass[Attack] = Outcome{Blocked: 10}
	r.finish()
	r.Latency = Latency{N: 100, P50: p99 / 4, P95: p99 / 2, P99: p99, Max: p99 * 2}
	r.Admitted = r.Latency
	r.Shapes = map[string]Latency{
		"benign_get":  {N: 70, P50: p99 / 8, P99: p99 / 2},
		"benign_json": {N: 20, P50: p99 / 2, P99: p99},
		"get_attack":  {N: 10, P50: p99 / 8, P99: p99 / 4},
	}
	return r
}

func TestReport_write(t *testing.T) {
	r := &Report{Workers: 32, OpenShare: 0.5, Closed: "20s", Open: "20s", Pool: PoolInfo{Size: 200, Classes: map[string]int{"benign_get": 140, "benign_json": 40, "attack": 20}}}
	for _, s := range []struct {
		id  string
		rps float64
		lim int
	}{{IDWasmCRS, 20, 0}, {IDCoraza, 28, 0}, {IDNginxModSec, 56, 0}, {IDWasmCRSCap, 30, 35}} {
		res := &ServerResult{ID: s.id, WAF: true, Closed: fakeRun(s.rps, 100, s.lim), Open: fakeRun(s.rps/2, 50, s.lim)}
		res.Tally()
		r.Servers = append(r.Servers, res)
	}
	r.Servers = append(r.Servers, &ServerResult{ID: IDWasmPass, Error: "cmd/wafhost missing\nmore"})
	// The unloaded table: the proxy without rules less the upstream's own
	// latency, a dash where a shape has no answer.
	unloaded := func(get, attack, json float64) *Unloaded {
		u := &Unloaded{Passes: 2, Shapes: map[string]Latency{}}
		for sh, v := range map[string]float64{"benign_get": get, "get_attack": attack, "benign_json": json} {
			if v > 0 {
				u.Shapes[sh] = Latency{N: 10, P50: v}
			}
		}
		return u
	}
	r.server(IDNginxModSec).Unloaded = unloaded(3, 4, 100)
	r.Servers = append(r.Servers, &ServerResult{ID: IDWasmPassV8, Unloaded: unloaded(0.30, 0.32, 0.40)})
	r.UpstreamUnloaded = unloaded(0.12, 0.125, 0)
	// The run of GETs alone: a column for the one shape measured, the
	// ratio beside the WAF, none beside the proxy without rules.
	r.server(IDNginxModSec).UnloadedAlone = unloaded(2, 0, 0)
	r.server(IDWasmCRS).UnloadedAlone = unloaded(0.5, 0, 0)
	r.Servers[len(r.Servers)-1].UnloadedAlone = unloaded(0.25, 0, 0) // wasm-pass-v8
	r.UpstreamUnloadedAlone = unloaded(0.1, 0, 0)
	md := r.Markdown()
	if strings.Count(md, "| server | passes | benign_get | get_attack | benign_json | json_attack | unexpected answers |") != 1 {
		t.Errorf("want one table of every shape (the mix's):\n%s", md)
	}
	for _, want := range []string{
		"| wasm-crs | 20.0 | 0.36x | 0.71x |",
		"| nginx-modsec | 56.0 | 1.00x | 2.00x |",
		"| wasm-pass | not run: cmd/wafhost missing |",
		"| wasm-crs-cap | 30.0 | 0.54x | 1.07x | 0.0 (100) | 12.5 | 25.0 | 50.0 | 100 | 0 | 0.0 | 0.00 | 2 | 0 | 0 | 35.0% / 35.0% |",
		"## Admission cap",
		"## Latency per class at 50% of saturation",
		// No JSON attack was answered: a dash, not zeros.
		"| wasm-crs | 12.5 / 50.0 | 6.25 / 25.0 (70%) | 6.25 / 12.5 (10%) | 25.0 / 50.0 (20%) | - |",
		"| upstream, no proxy | 2 | 0.12 | 0.12 | - | - | 0 |",
		"| wasm-pass-v8 | +0.18 | +0.20 | - | - |",
		"## Unloaded latency, each class alone",
		"| server | passes | benign_get | unexpected answers |",
		"| wasm-crs | 2 | 0.50 (0.25x) | 0 |",
		"| wasm-pass-v8 | 2 | 0.25 | 0 |",
		"| upstream, no proxy | 2 | 0.10 | 0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "latency.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("plot size %v, want at least 800x400", b)
	}
}

func TestServerResult_tally(t *testing.T) {
	s := &ServerResult{Closed: fakeRun(10, 10, 0)}
	s.Closed.byClass[Attack] = Outcome{Blocked: 8, Passed: 1, Errors: 1}
	s.Closed.finish()
	s.Tally()
	if s.FalsePositives != 1 || s.FalseNegatives != 1 || s.Errors != 1 {
		t.Errorf("got FP %d FN %d errors %d, want 1 1 1", s.FalsePositives, s.FalseNegatives, s.Errors)
	}
}

// TestReport_http10: the HTTP/1.0 table has a row per server that ran it,
// with its answers by count and its rate beside nginx + ModSecurity's,
// and no table at all when none ran it.
func TestReport_http10(t *testing.T) {
	r := &Report{Pool: PoolInfo{Classes: map[string]int{}}}
	for _, id := range []string{IDEnvoyCRS, IDNginxModSec, IDCoraza} {
		r.Servers = append(r.Servers, &ServerResult{ID: id, WAF: true, Closed: fakeRun(10, 10, 0)})
	}
	if md := r.Markdown(); strings.Contains(md, "## HTTP/1.0 clients") {
		t.Errorf("a table without a run:\n%s", md)
	}
	r.server(IDEnvoyCRS).HTTP10 = &HTTP10Result{Target: HTTP10Target, Requests: 2000, Conns: 100, Codes: map[int]int{403: 1998, 200: 2}, Errors: 1,
		Rate: 99.5, Answer: Latency{P50: 1.5}, Close: Latency{P50: 1004, P99: 1150}}
	r.server(IDNginxModSec).HTTP10 = &HTTP10Result{Target: HTTP10Target, Requests: 2000, Conns: 100, Codes: map[int]int{403: 2000}, Rate: 199, Answer: Latency{P50: 4.2}, Close: Latency{P50: 4.3, P99: 9}}
	md := r.Markdown()
	for _, want := range []string{
		"`GET /?a=%22%3E%3Cscript HTTP/1.0`, 2000 requests, 100 clients at once",
		"| envoy-crs | 403: 1998, 200: 2 | 1 | 0 | 99.5 | 0.50x | 1.50 | 1004 | 1150 |",
		"| nginx-modsec | 403: 2000 | 0 | 0 | 199 | 1.00x | 4.20 | 4.30 | 9.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| coraza | 403") {
		t.Errorf("a row for a server that did not run it:\n%s", md)
	}
}
