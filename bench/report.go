package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is everything one bench run measured; results.json holds it.
type Report struct {
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	Command   string    `json:"command"`
	Machine   string    `json:"machine"`
	Versions  []string  `json:"versions"`
	Upstream  string    `json:"upstream"`
	ServerCPU int       `json:"server_cpu"`
	// ServerCPUs and ServerWorkers are the CPUs and workers of the Envoy
	// and nginx rows when they run several (-server-cpus, -server-workers).
	ServerCPUs    string   `json:"server_cpus,omitempty"`
	ServerWorkers int      `json:"server_workers,omitempty"`
	LoadCPU       int      `json:"load_cpu"`
	Workers       int      `json:"workers"`
	OpenShare     float64  `json:"open_share"`
	Closed        string   `json:"closed_duration"`
	Open          string   `json:"open_duration"`
	Pool          PoolInfo `json:"pool"`
	// Verify is the native Coraza server's answer to every request of the
	// pool, checked before any measurement.
	Verify  *Verification   `json:"verify,omitempty"`
	Servers []*ServerResult `json:"servers"`
	// UpstreamUnloaded is the upstream's own unloaded latency, the client
	// straight to it, taken in the same turns as the servers': what a
	// proxy's row holds besides the proxy.
	UpstreamUnloaded *Unloaded `json:"upstream_unloaded,omitempty"`
	// UpstreamUnloadedAlone is the upstream's in the run of some classes
	// alone (ServerResult.UnloadedAlone).
	UpstreamUnloadedAlone *Unloaded `json:"upstream_unloaded_alone,omitempty"`
	Notes                 []string  `json:"notes,omitempty"`
}

// PoolInfo describes the traffic mix.
type PoolInfo struct {
	Seed      uint64         `json:"seed"`
	Size      int            `json:"size"`
	Classes   map[string]int `json:"classes"`
	JSONMinKB float64        `json:"json_min_kb"`
	JSONMaxKB float64        `json:"json_max_kb"`
	MeanKB    float64        `json:"mean_request_body_kb"`
}

// ServerResult is what one server did.
type ServerResult struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	WAF          bool    `json:"waf"`
	Error        string  `json:"error,omitempty"`
	ReadySeconds float64 `json:"ready_seconds"`
	Closed       *Run    `json:"closed,omitempty"`
	Open         *Run    `json:"open,omitempty"`
	// Unloaded is the latency per shape of the idle server, one request
	// at a time, measured before the load runs.
	Unloaded *Unloaded `json:"unloaded,omitempty"`
	// UnloadedAlone is the same for some classes alone (-unloaded-alone):
	// the pool's requests of those classes only, each after one of its own
	// kind.
	UnloadedAlone *Unloaded `json:"unloaded_alone,omitempty"`
	// CPUSeconds is the server's user+system CPU time over both runs;
	// CPUMsPerRequest divides it by the requests of both runs.
	CPUSeconds      float64 `json:"cpu_seconds"`
	CPUMsPerRequest float64 `json:"cpu_ms_per_request"`
	PeakRSSMB       float64 `json:"peak_rss_mb"` // VmHWM summed over the process tree
	Processes       int     `json:"processes"`
	// FalsePositives are benign requests answered neither 2xx nor 429,
	// FalseNegatives attacks answered other than 403 or 429, both over the
	// two runs. Errors are requests without an answer (timeouts, resets).
	FalsePositives int `json:"false_positives"`
	FalseNegatives int `json:"false_negatives"`
	Errors         int `json:"errors"`
	// HTTP10 is the run of HTTP/1.0 clients (-http10), after the loads.
	HTTP10 *HTTP10Result `json:"http10,omitempty"`
}

// Tally fills the false positive and negative counts from the runs.
func (s *ServerResult) Tally() {
	s.FalsePositives, s.FalseNegatives, s.Errors = 0, 0, 0
	for _, r := range []*Run{s.Closed, s.Open} {
		if r == nil {
			continue
		}
		for c := Class(0); c < numClasses; c++ {
			o := r.Classes[c.String()]
			if c.Benign() {
				s.FalsePositives += o.Blocked + o.Other
			} else {
				s.FalseNegatives += o.Passed + o.Other
			}
			s.Errors += o.Errors
		}
	}
}

func (r *Report) server(id string) *ServerResult {
	for _, s := range r.Servers {
		if s.ID == id && s.Closed != nil {
			return s
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	x := a / b
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	default:
		return fmt.Sprintf("%.2fx", x)
	}
}

func ms(v float64) string {
	switch {
	case v <= 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func rps(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Markdown renders the report as results.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench results\n\n")
	fmt.Fprintf(&b, "Run %s, %.0f s, `%s`.  \n", r.Started.UTC().Format(time.RFC3339), r.Seconds, r.Command)
	load := fmt.Sprintf("on CPU %d", r.LoadCPU)
	if r.LoadCPU < 0 {
		load = "not pinned"
	}
	if r.ServerWorkers > 1 {
		fmt.Fprintf(&b, "Machine: %s. The Envoy and nginx rows with %d workers (--concurrency, worker_processes) on CPUs %s; the other servers one worker on CPU %d; load generator (vegeta, in process, GOMAXPROCS=1) and upstream %s.  \n", r.Machine, r.ServerWorkers, r.ServerCPUs, r.ServerCPU, load)
	} else {
		fmt.Fprintf(&b, "Machine: %s. Each server pinned to CPU %d (one worker: GOMAXPROCS=1 or worker_processes 1); load generator (vegeta, in process, GOMAXPROCS=1) and upstream %s.  \n", r.Machine, r.ServerCPU, load)
	}
	fmt.Fprintf(&b, "Upstream: %s.  \n", r.Upstream)
	fmt.Fprintf(&b, "Traffic: %d requests replayed in a loop (seed %d): %d benign GETs, %d benign JSON POSTs (%.1f-%.1f KB), %d attacks (SQLi, XSS in query and JSON).  \n",
		r.Pool.Size, r.Pool.Seed, r.Pool.Classes[BenignGET.String()], r.Pool.Classes[BenignJSON.String()], r.Pool.JSONMinKB, r.Pool.JSONMaxKB, r.Pool.Classes[Attack.String()])
	fmt.Fprintf(&b, "Closed loop: %d workers, %s, rate unbounded. Open loop: %s at %.0f%% of the server's own closed-loop rate.\n\n", r.Workers, r.Closed, r.Open, r.OpenShare*100)
	if len(r.Versions) > 0 {
		fmt.Fprintf(&b, "Versions: %s.\n\n", strings.Join(r.Versions, "; "))
	}
	if r.Verify != nil {
		fmt.Fprintf(&b, "Pool checked against native Coraza before measuring: %d mismatches.\n\n", len(r.Verify.Mismatches))
	}

	ms1, cz := r.server(IDNginxModSec), r.server(IDCoraza)
	var msRPS, czRPS float64
	if ms1 != nil {
		msRPS = ms1.Closed.Throughput
	}
	if cz != nil {
		czRPS = cz.Closed.Throughput
	}
	b.WriteString("| server | req/s (closed) | vs nginx+ModSec | vs Coraza | open rate (answers) | p50 ms | p95 ms | p99 ms | max ms | peak RSS MB | CPU s | CPU ms/req | FP | FN | no answer | 429 share |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Servers {
		if s.Closed == nil {
			fmt.Fprintf(&b, "| %s | not run: %s |%s\n", s.ID, strings.ReplaceAll(firstLine(s.Error), "|", "/"), strings.Repeat(" |", 14))
			continue
		}
		o := s.Open
		if o == nil {
			o = &Run{}
		}
		lat := o.Latency
		share := "-"
		if s.MaxInflightRun() {
			share = fmt.Sprintf("%.1f%% / %.1f%%", s.Closed.LimitedShare()*100, o.LimitedShare()*100)
			lat = o.Admitted
		}
		fp, fn := fmt.Sprint(s.FalsePositives), fmt.Sprint(s.FalseNegatives)
		if !s.WAF {
			fn = "n/a"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f | %.2f | %s | %s | %d | %s |\n",
			s.ID, rps(s.Closed.Throughput), ratio(s.Closed.Throughput, msRPS), ratio(s.Closed.Throughput, czRPS), fmt.Sprintf("%s (%d)", rps(o.TargetRate), o.Answered),
			ms(lat.P50), ms(lat.P95), ms(lat.P99), ms(lat.Max), s.PeakRSSMB, s.CPUSeconds, s.CPUMsPerRequest, fp, fn, s.Errors, share)
	}
	b.WriteString("\nLatency columns are from the open-loop run. FP: benign requests answered with a status other than 2xx or 429; FN: attacks answered with a status other than 403 or 429; no answer: timeouts and resets (all three over both runs; requests aborted when the drain time ran out count nowhere, see aborted in results.json). ")
	b.WriteString("Closed-loop req/s: all answers divided by the time from the start to the last answer (requests in flight when sending stops included). Ratios divide closed-loop req/s. Peak RSS is VmHWM summed over the server's processes (nginx: master + worker). CPU s is the server's user+system time over both runs.\n\n")

	r.unloadedTable(&b)
	r.openShapesTable(&b)

	if base, capped := r.server(IDWasmCRS), r.server(IDWasmCRSCap); base != nil && capped != nil {
		b.WriteString("## Admission cap\n\n")
		b.WriteString("| run | closed answers/s | closed admitted/s | closed p99 admitted ms | closed 429 share | open rate | open p99 admitted ms | open 429 share |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range []*ServerResult{base, capped} {
			o := s.Open
			if o == nil {
				o = &Run{}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f%% | %s | %s | %.1f%% |\n", s.ID, rps(s.Closed.Throughput), rps(s.Closed.Throughput*(1-s.Closed.LimitedShare())),
				ms(s.Closed.Admitted.P99), s.Closed.LimitedShare()*100, rps(o.TargetRate), ms(o.Admitted.P99), o.LimitedShare()*100)
		}
		b.WriteString("\n")
	}

	r.http10Table(&b)

	b.WriteString("## Per class (both runs)\n\n| server | class | passed | blocked | 429 | other | errors |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Servers {
		if s.Closed == nil {
			continue
		}
		for c := Class(0); c < numClasses; c++ {
			var o Outcome
			for _, run := range []*Run{s.Closed, s.Open} {
				if run != nil {
					o.add(run.Classes[c.String()])
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d |\n", s.ID, c, o.Passed, o.Blocked, o.Limited, o.Other, o.Errors)
		}
	}
	b.WriteString("\n## Servers\n\n")
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "- `%s`: %s; %s; ready in %.1f s.\n", s.ID, s.Name, s.Path, s.ReadySeconds)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// http10Table writes the runs of HTTP/1.0 clients (-http10), with the
// rate beside nginx + ModSecurity's.
func (r *Report) http10Table(b *strings.Builder) {
	var modsec *HTTP10Result
	if s := r.server(IDNginxModSec); s != nil {
		modsec = s.HTTP10
	}
	header := false
	for _, s := range r.Servers {
		h := s.HTTP10
		if h == nil {
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(b, "## HTTP/1.0 clients\n\n`GET %s HTTP/1.0`, %d requests, %d clients at once, each on a connection of its own read until the server closes it, as ApacheBench (`ab -c %d -n %d`) sends them; after the load runs. Rate: requests completed (closed) per second. A server that waits for the client to close after its answer (Envoy after a reply of its own: `delayed_close_timeout`, 1 s by default) completes each such request only when that wait ends.\n\n", h.Target, h.Requests, h.Conns, h.Conns, h.Requests)
			b.WriteString("| server | answers | no answer | not closed | req/s | vs nginx+ModSec | p50 ms to the answer | p50 ms to the close | p99 ms to the close |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		}
		vs := "-"
		if modsec != nil {
			vs = ratio(h.Rate, modsec.Rate)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", s.ID, codesOf(h.Codes), h.Errors, h.Unclosed, rps(h.Rate), vs, ms(h.Answer.P50), ms(h.Close.P50), ms(h.Close.P99))
	}
	if header {
		b.WriteString("\n")
	}
}

// codesOf formats status counts as "403: 2000, 200: 3", most first.
func codesOf(c map[int]int) string {
	codes := make([]int, 0, len(c))
	for code := range c {
		codes = append(codes, code)
	}
	slices.SortFunc(codes, func(a, b int) int {
		if c[a] != c[b] {
			return c[b] - c[a]
		}
		return a - b
	})
	parts := make([]string, len(codes))
	for i, code := range codes {
		parts[i] = fmt.Sprintf("%d: %d", code, c[code])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// unloadedTable writes the latency of the idle servers per shape: the p50
// of each, and beside the WAFs' the ratio to nginx + ModSecurity's; then
// what each proxy without rules adds, and the run of classes alone.
func (r *Report) unloadedTable(b *strings.Builder) {
	intro := fmt.Sprintf("## Unloaded latency per class\n\nOne request at a time over one kept-alive connection per server, the pool in order, each block of %d of its requests to every server in turn, before the load runs (p50 ms; in brackets the ratio to nginx + ModSecurity's):\n\n", UnloadedBlock)
	if !r.latencyTable(b, intro, Shapes, func(s *ServerResult) *Unloaded { return s.Unloaded }, r.UpstreamUnloaded) {
		return
	}
	b.WriteString("\n`wasm-pass` and `wasm-pass-v8` run the pass-through plugin: what the hosts themselves add.\n\n")
	r.frontTable(b)
	intro = "## Unloaded latency, each class alone\n\nThe same, taken after the table above, with the pool's requests of these classes only (`-unloaded-alone`): each request follows requests of these classes, not the mix's others. Beside the table above, it shows whether what a request of the mix leaves behind in a server (the collector's work, caches) changes what a request of these classes costs.\n\n"
	alone := func(s *ServerResult) *Unloaded { return s.UnloadedAlone }
	if r.latencyTable(b, intro, r.measuredShapes(alone), alone, r.UpstreamUnloadedAlone) {
		b.WriteString("\n")
	}
}

// measuredShapes returns the shapes, in the order of Shapes, that of
// gives some server a latency of.
func (r *Report) measuredShapes(of func(*ServerResult) *Unloaded) []string {
	var shapes []string
	for _, sh := range Shapes {
		if slices.ContainsFunc(r.Servers, func(s *ServerResult) bool {
			if u := of(s); u != nil {
				_, ok := u.Shapes[sh]
				return ok
			}
			return false
		}) {
			shapes = append(shapes, sh)
		}
	}
	return shapes
}

// latencyTable writes intro and a table of the p50 of each of shapes that
// of gives each server (nil: no row), with the upstream's (up) last, and
// reports whether it wrote anything: nothing when no server has a row.
func (r *Report) latencyTable(b *strings.Builder, intro string, shapes []string, of func(*ServerResult) *Unloaded, up *Unloaded) bool {
	if !slices.ContainsFunc(r.Servers, func(s *ServerResult) bool { return of(s) != nil }) || len(shapes) == 0 {
		return false
	}
	var ref *Unloaded
	if s := r.server(IDNginxModSec); s != nil {
		ref = of(s)
	}
	b.WriteString(intro)
	b.WriteString("| server | passes |")
	for _, sh := range shapes {
		fmt.Fprintf(b, " %s |", sh)
	}
	b.WriteString(" unexpected answers |\n|---|---:|" + strings.Repeat("---:|", len(shapes)+1) + "\n")
	for _, s := range r.Servers {
		u := of(s)
		if u == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %d |", s.ID, u.Passes)
		for _, sh := range shapes {
			v := u.Shapes[sh].P50
			cell := ms(v)
			if ref != nil && s.ID != IDNginxModSec && s.WAF {
				cell += " (" + ratio(v, ref.Shapes[sh].P50) + ")"
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		fmt.Fprintf(b, " %d |\n", u.Unexpected)
	}
	if up != nil {
		fmt.Fprintf(b, "| upstream, no proxy | %d |", up.Passes)
		for _, sh := range shapes {
			fmt.Fprintf(b, " %s |", ms(up.Shapes[sh].P50))
		}
		fmt.Fprintf(b, " %d |\n", up.Unexpected)
	}
	return true
}

// frontTable writes what each proxy without rules adds to the upstream's
// own latency, per shape: its p50 less the upstream's, measured in the
// same turns. For wasm-pass-v8 that is the V8 front's own cost (Node's
// HTTP handling, the VM's calls, the hop to the upstream).
func (r *Report) frontTable(b *strings.Builder) {
	up := r.UpstreamUnloaded
	if up == nil {
		return
	}
	var rows []*ServerResult
	for _, s := range r.Servers {
		if !s.WAF && s.Unloaded != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("What each proxy without rules adds to the upstream's own latency (p50 less the upstream's, ms):\n\n| proxy |")
	for _, sh := range Shapes {
		fmt.Fprintf(b, " %s |", sh)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(Shapes)) + "\n")
	for _, s := range rows {
		fmt.Fprintf(b, "| %s |", s.ID)
		for _, sh := range Shapes {
			own, base := s.Unloaded.Shapes[sh], up.Shapes[sh]
			if own.N == 0 || base.N == 0 {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(b, " %+.2f |", own.P50-base.P50)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// openShapesTable writes the open loop's latency per shape (p50 / p99):
// a slow shape sets the tail of the whole, and every request queued
// behind one waits for it.
func (r *Report) openShapesTable(b *strings.Builder) {
	any := false
	for _, s := range r.Servers {
		any = any || (s.WAF && s.Open != nil && len(s.Open.Shapes) != 0)
	}
	if !any {
		return
	}
	fmt.Fprintf(b, "## Latency per class at %.0f%% of saturation\n\nThe open-loop run of each WAF, p50 / p99 ms per class, with the share of the answers:\n\n", r.OpenShare*100)
	b.WriteString("| server | all |")
	for _, sh := range Shapes {
		fmt.Fprintf(b, " %s |", sh)
	}
	b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(Shapes)) + "\n")
	for _, s := range r.Servers {
		o := s.Open
		if !s.WAF || o == nil || len(o.Shapes) == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %s / %s |", s.ID, ms(o.Latency.P50), ms(o.Latency.P99))
		for _, sh := range Shapes {
			l := o.Shapes[sh]
			if l.N == 0 {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(b, " %s / %s (%.0f%%) |", ms(l.P50), ms(l.P99), 100*float64(l.N)/float64(max(o.Latency.N, 1)))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// MaxInflightRun reports whether the server ran with the admission cap.
func (s *ServerResult) MaxInflightRun() bool { return s.ID == IDWasmCRSCap || s.ID == IDWasmCRS128 }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Write writes results.md, results.json and latency.png into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	var labels []string
	for _, q := range Quantiles {
		labels = append(labels, q.Label)
	}
	var series []Series
	for _, s := range r.Servers {
		if s.Open == nil {
			continue
		}
		lat := s.Open.Latency
		if s.MaxInflightRun() {
			lat = s.Open.Admitted
		}
		name := fmt.Sprintf("%s %s/s", s.ID, rps(s.Open.TargetRate))
		if lat.N == 0 {
			name += " (no answers)"
		}
		series = append(series, Series{Name: name, Values: lat.Values()})
	}
	return PlotLines(filepath.Join(dir, "latency.png"),
		fmt.Sprintf("latency, open loop at %.0f%% of each server's saturation", r.OpenShare*100), "ms, log scale", labels, series)
}
