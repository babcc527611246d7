// Command bench measures the WAF filter side by side with nginx +
// ModSecurity v3 and native Coraza, one server after the other, each pinned
// to the same CPU, on the same seeded traffic mix. It writes
// build/bench/results.md, results.json and latency.png.
//
// Run it from the repository root after `go run mage.go build`:
//
//	go run ./bench/cmd/bench            # full run, about 6 minutes
//	go run ./bench/cmd/bench -quick     # one to two minutes, a smoke test
//	go run ./bench/cmd/bench -servers coraza,nginx-modsec,nginx
//
// docs/bench.md explains the setup and how to read the results.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wafguard/wafguard/bench"
	"github.com/wafguard/wafguard/filter/rules"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve-coraza" {
		os.Exit(serveCoraza(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "serve-v8" {
		os.Exit(serveV8(os.Args[2:]))
	}
	os.Exit(run())
}

// serveCoraza is the native Coraza server the bench starts as a subprocess.
func serveCoraza(args []string) int {
	fs := flag.NewFlagSet("serve-coraza", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	upstream := fs.String("upstream", "", "base URL every request is proxied to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := bench.ServeCoraza(ctx, *listen, *upstream, nil); err != nil {
		fmt.Fprintln(os.Stderr, "serve-coraza:", err)
		return 1
	}
	return 0
}

// serveV8 is the V8 server (the plugin on Node 26's V8) the bench starts as
// a subprocess.
func serveV8(args []string) int {
	fs := flag.NewFlagSet("serve-v8", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	upstream := fs.String("upstream", "", "base URL every request is proxied to")
	wasm := fs.String("wasm", "build/main.wasm", "the plugin")
	config := fs.String("config", "", "plugin configuration file (JSON)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := os.ReadFile(*config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve-v8:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := bench.ServeV8(ctx, *listen, *upstream, *wasm, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "serve-v8:", err)
		return 1
	}
	return 0
}

type options struct {
	servers            string
	closed, open, warm time.Duration
	quick              bool
	workers            int
	openShare          float64
	capInflight        int
	capVMs             int
	seed               uint64
	poolSize           int
	serverCPU, loadCPU int
	serverCPUs         string
	serverWorkers      int
	out                string
	wasm, pass         string
	timeout, deadline  time.Duration
	drain              time.Duration
	readyWait          time.Duration
	verify             bool
	vmEnv              string
	unloaded           int
	unloadedAlone      string
	http10, http10Conn int
}

func run() int {
	var o options
	all := []string{bench.IDEnvoyCRS, bench.IDEnvoyHold, bench.IDEnvoyBase, bench.IDEnvoyPass, bench.IDEnvoy, bench.IDCoraza, bench.IDNginxModSec, bench.IDNginx,
		bench.IDWasmCRS, bench.IDWasmPass, bench.IDWasmCRSCap, bench.IDWasmCRS128, bench.IDWasmCRSV8, bench.IDWasmPassV8}
	flag.StringVar(&o.servers, "servers", strings.Join(all, ","), "comma-separated servers to run, in this order: "+strings.Join(all, ", "))
	flag.DurationVar(&o.closed, "closed", 20*time.Second, "closed-loop (saturation) run per server")
	flag.DurationVar(&o.open, "open", 20*time.Second, "open-loop (fixed rate) run per server")
	flag.DurationVar(&o.warm, "warmup", 2*time.Second, "unmeasured closed-loop warm-up per server (2 workers, so a slow server drains it fast)")
	flag.BoolVar(&o.quick, "quick", false, "short runs (4s closed, 4s open, 1s warm-up, at most 10s drain) for a smoke test of one to two minutes")
	flag.IntVar(&o.workers, "workers", 32, "closed loop: concurrent requests (vegeta workers and connections)")
	flag.Float64Var(&o.openShare, "open-share", 0.5, "open-loop rate as a share of the server's closed-loop req/s")
	flag.IntVar(&o.capInflight, "cap", 8, "admission max_inflight of the "+bench.IDWasmCRSCap+" run")
	flag.IntVar(&o.capVMs, "cap-vms", 1, "Go host VMs (--concurrency) of the "+bench.IDWasmCRSCap+" run")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the traffic pool")
	flag.IntVar(&o.poolSize, "pool", 200, "requests in the traffic pool (replayed in a loop)")
	flag.IntVar(&o.serverCPU, "server-cpu", 1, "CPU every server is pinned to")
	flag.IntVar(&o.loadCPU, "load-cpu", 0, "CPU the load generator and the upstream are pinned to; -1: not pinned")
	flag.StringVar(&o.serverCPUs, "server-cpus", "", "CPU list (taskset -c, e.g. 0,1) of the Envoy and nginx rows instead of -server-cpu")
	flag.IntVar(&o.serverWorkers, "server-workers", 1, "workers of the Envoy and nginx rows (--concurrency, worker_processes); the other rows keep one")
	flag.StringVar(&o.out, "out", "build/bench", "output directory")
	flag.StringVar(&o.wasm, "wasm", "build/main.wasm", "the WAF plugin (go run mage.go build)")
	flag.StringVar(&o.pass, "passthrough", "wasmhost/testdata/passthrough", "pass-through plugin: a .wasm file or a Go package directory to build")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	flag.DurationVar(&o.drain, "drain", 30*time.Second, "how long requests in flight may still take after a loop ends; then they are aborted (not counted)")
	flag.DurationVar(&o.deadline, "deadline", 10*time.Minute, "the whole run stops after this")
	flag.DurationVar(&o.readyWait, "ready-wait", 3*time.Minute, "how long a server may take to answer after its start")
	flag.StringVar(&o.vmEnv, "vm-env", "", "comma-separated NAME=value environment variables of the WAF's VMs, e.g. GOGC=200 (the pass-through plugin gets none)")
	flag.IntVar(&o.unloaded, "unloaded", 2, "passes over the pool one request at a time, each block of "+strconv.Itoa(bench.UnloadedBlock)+" requests to every server in turn, before the load runs, for the unloaded latency per class (0: none; no new pass after a minute per server)")
	flag.StringVar(&o.unloadedAlone, "unloaded-alone", "", "comma-separated classes ("+strings.Join(bench.Shapes, ", ")+") measured once more after the unloaded run: the pool's requests of those classes only, each following requests of those classes, not the mix's others (\"\": none)")
	flag.IntVar(&o.http10, "http10", 0, "after each server's load runs, this many HTTP/1.0 requests of the XSS probe "+bench.HTTP10Target+" made as ApacheBench makes them (a connection each, read until the server closes it; 0: none)")
	flag.IntVar(&o.http10Conn, "http10-conns", 100, "HTTP/1.0 clients at once in the -http10 run (ab -c)")
	flag.BoolVar(&o.verify, "verify", true, "check the pool against native Coraza first and stop on any false positive or negative")
	flag.Parse()
	if o.quick {
		o.closed, o.open, o.warm = 4*time.Second, 4*time.Second, time.Second
		o.unloaded = min(o.unloaded, 1)
		o.drain = min(o.drain, 10*time.Second)
	}
	selected := strings.Split(o.servers, ",")
	for _, s := range selected {
		if !slices.Contains(all, s) {
			fmt.Fprintf(os.Stderr, "bench: -servers: unknown server %q, want some of %s\n", s, strings.Join(all, ","))
			return 2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Every server started goes down with the bench, on any return or panic,
	// and as soon as the deadline passes or a signal arrives: requests in
	// flight then fail at once instead of waiting for their timeout.
	defer bench.StopAll()
	stopServers := context.AfterFunc(ctx, bench.StopAll)
	defer stopServers()

	r, err := runBench(ctx, o, selected)
	if r != nil {
		if werr := r.Write(o.out); werr != nil {
			fmt.Fprintln(os.Stderr, "bench: writing results:", werr)
			return 1
		}
		fmt.Println()
		fmt.Println(r.Markdown())
		fmt.Printf("wrote %s\n", strings.Join([]string{filepath.Join(o.out, "results.md"), filepath.Join(o.out, "results.json"), filepath.Join(o.out, "latency.png")}, ", "))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "\r\033[K"+format+"\n", args...)
}

func runBench(ctx context.Context, o options, selected []string) (*bench.Report, error) {
	began := time.Now()
	pool, err := bench.NewPool(o.seed, o.poolSize, bench.DefaultMix)
	if err != nil {
		return nil, err
	}
	var alone *bench.Pool
	if o.unloadedAlone != "" {
		if alone, err = bench.PoolOfShapes(pool, strings.Split(o.unloadedAlone, ",")); err != nil {
			return nil, fmt.Errorf("-unloaded-alone: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	work := filepath.Join(o.out, "work")
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	if work, err = filepath.Abs(work); err != nil {
		return nil, err
	}
	env := &bench.Env{WorkDir: work, ServerCPU: o.serverCPU, ServerCPUs: o.serverCPUs, ServerWorkers: o.serverWorkers, Self: self, ReadyWait: o.readyWait, Log: func(s string) { logf("%s", s) }}
	if o.vmEnv != "" {
		env.VMEnv = strings.Split(o.vmEnv, ",")
	}

	r := &bench.Report{
		Started: began, Command: "go run ./bench/cmd/bench " + strings.Join(os.Args[1:], " "),
		Machine: machine(), ServerCPU: o.serverCPU, ServerCPUs: o.serverCPUs, ServerWorkers: o.serverWorkers, LoadCPU: o.loadCPU, Workers: o.workers, OpenShare: o.openShare,
		Closed: o.closed.String(), Open: o.open.String(),
		Upstream: "one in-process Go net/http server on 127.0.0.1 (with the load generator) answering 200 text/html " + strconv.Itoa(len(bench.UpstreamBody)) + " bytes to every request; every server proxies to it over kept-alive connections",
		Notes: []string{
			"The machine is shared with other builds and tests while the bench runs: treat the numbers as noisy; compare servers within one run, not across runs.",
			"One load-generator core: for the servers without a WAF (nginx, wasm-pass) the load generator, not the server, may be the limit.",
			"CRS for ModSecurity is written from the release the plugin embeds (filter/rules); chained rules 949111 and 959111 get an explicit \"t:none\" action list because ModSecurity 3.0.9 does not parse a chained SecRule without one; its parser refuses the target XML://@* in a ctl removal, so rule 901181's removals (made only while XML attribute inspection is off, which the setup turns on) are written with XML:/*.",
		},
	}
	defer func() {
		r.Seconds = time.Since(began).Seconds()
		// After the runs: nginx and its ModSecurity module may have been
		// installed by one of them.
		r.Versions = versions()
	}()
	counts := pool.Counts()
	total, lo, hi := pool.JSONBytes()
	r.Pool = bench.PoolInfo{Seed: o.seed, Size: len(pool.Requests), Classes: map[string]int{},
		JSONMinKB: float64(lo) / 1024, JSONMaxKB: float64(hi) / 1024, MeanKB: float64(total) / 1024 / float64(len(pool.Requests))}
	for c, n := range counts {
		r.Pool.Classes[bench.Class(c).String()] = n
	}

	// Build what the Go host servers need before pinning: the builds use
	// both CPUs.
	buildErrs := map[string]error{}
	mainRows := []string{bench.IDWasmCRS, bench.IDWasmCRSCap, bench.IDWasmCRS128, bench.IDWasmCRSV8, bench.IDEnvoyCRS, bench.IDEnvoyHold, bench.IDEnvoyBase}
	passRows := []string{bench.IDWasmPass, bench.IDWasmPassV8, bench.IDEnvoyPass}
	if slices.ContainsFunc(selected, func(s string) bool { return strings.HasPrefix(s, "wasm-") }) {
		if hostErr := buildHost(ctx, o, env); hostErr != nil {
			for _, id := range []string{bench.IDWasmCRS, bench.IDWasmPass, bench.IDWasmCRSCap, bench.IDWasmCRS128, bench.IDWasmCRSV8, bench.IDWasmPassV8} {
				buildErrs[id] = hostErr
			}
		}
	}
	if _, err := os.Stat(o.wasm); err != nil {
		for _, id := range mainRows {
			if buildErrs[id] == nil {
				buildErrs[id] = fmt.Errorf("%s missing: run `go run mage.go build` first", o.wasm)
			}
		}
	} else if abs, err := filepath.Abs(o.wasm); err == nil {
		env.MainWasm = abs
	}
	if slices.ContainsFunc(selected, func(s string) bool { return slices.Contains(passRows, s) }) {
		if env.PassWasm, err = buildPassthrough(ctx, o); err != nil {
			for _, id := range passRows {
				buildErrs[id] = err
			}
		}
	}

	up, err := bench.StartUpstream()
	if err != nil {
		return r, err
	}
	defer up.Close()
	env.UpstreamURL = up.URL
	if o.loadCPU < 0 {
		// Not pinned: the load shares the CPUs with the servers.
	} else if err := pinSelf(o.loadCPU); err != nil {
		return r, fmt.Errorf("pinning the load generator to CPU %d: %w", o.loadCPU, err)
	}

	servers := bench.Servers(o.capInflight, o.capVMs)
	if o.verify {
		v, err := verify(ctx, servers, env, pool, o.timeout)
		if err != nil {
			return r, err
		}
		r.Verify = v
		if err := v.Err("native Coraza"); err != nil {
			return r, err
		}
		logf("pool checked against native Coraza: %d requests, 0 false positives, 0 false negatives", len(pool.Requests))
	}

	results := map[string]*bench.ServerResult{}
	resOf := map[string]*bench.ServerResult{}
	for _, id := range selected {
		s := serverOf(servers, id)
		res := &bench.ServerResult{ID: s.ID, Name: s.Name, Path: s.Path, WAF: s.WAF}
		r.Servers = append(r.Servers, res)
		resOf[id] = res
		if err := buildErrs[id]; err != nil {
			res.Error = err.Error()
		}
	}
	var running map[string]*bench.Running
	if o.unloaded > 0 {
		running, r.UpstreamUnloaded, r.UpstreamUnloadedAlone = unloadedStage(ctx, servers, env, pool, alone, o, selected, resOf)
	}
	for i, id := range selected {
		s, res := serverOf(servers, id), resOf[id]
		tag := fmt.Sprintf("[%d/%d %s]", i+1, len(selected), id)
		if res.Error != "" {
			logf("%s skipped: %s", tag, res.Error)
			continue
		}
		rate := 0.0
		if base := results[s.CapOf]; base != nil && base.Open != nil {
			rate = base.Open.TargetRate
		}
		err := measure(ctx, s, running[id], env, pool, o, rate, res, tag)
		if err != nil {
			res.Error = err.Error()
			logf("%s failed: %v", tag, err)
			if ctx.Err() != nil {
				return r, fmt.Errorf("stopped during %s: %w", id, context.Cause(ctx))
			}
			continue
		}
		results[id] = res
	}
	return r, nil
}

func serverOf(servers []*bench.Server, id string) *bench.Server {
	return servers[slices.IndexFunc(servers, func(s *bench.Server) bool { return s.ID == id })]
}

// unloadedStage starts every selected server that can run (the cap
// variants of wasm-crs, which would repeat its figures, aside), warms each
// up, and measures their unloaded latency together: each block of the
// pool goes to every server in turn (bench.MeasureUnloaded), so that the
// ratios to nginx + ModSecurity hold however the shared machine's speed
// drifts. The servers stay up for their load runs (an idle server pinned
// beside a busy one takes nothing from it); it returns them by ID. A
// server that fails here is left to its load run, which starts it anew
// and reports the error. The upstream itself takes its turns too, the
// client straight to it: it returns that latency, the part of every
// proxy's row that is not the proxy's. With alone (-unloaded-alone), the
// same servers and the upstream then take that pool the same way
// (ServerResult.UnloadedAlone).
func unloadedStage(ctx context.Context, servers []*bench.Server, env *bench.Env, pool, alone *bench.Pool, o options, selected []string, resOf map[string]*bench.ServerResult) (map[string]*bench.Running, *bench.Unloaded, *bench.Unloaded) {
	running := map[string]*bench.Running{}
	var ids []string
	var targets []bench.UnloadedTarget
	for i, id := range selected {
		s, res := serverOf(servers, id), resOf[id]
		if res.Error != "" || s.CapOf != "" || s.Workers != 0 {
			continue
		}
		tag := fmt.Sprintf("[%d/%d %s]", i+1, len(selected), id)
		logf("%s starting: %s", tag, s.Name)
		t0 := time.Now()
		run, err := s.Start(ctx, env)
		if err != nil {
			logf("%s did not start for the unloaded run: %v", tag, err)
			continue
		}
		res.ReadySeconds = time.Since(t0).Seconds()
		if err := warmUp(ctx, run, pool, o, tag); err != nil {
			logf("%s left out of the unloaded run: %v", tag, err)
			run.Proc.Stop(3 * time.Second)
			continue
		}
		running[id] = run
		ids = append(ids, id)
		targets = append(targets, bench.UnloadedTarget{BaseURL: run.URL, WAF: s.WAF})
	}
	if len(targets) == 0 {
		return running, nil, nil
	}
	targets = append(targets, bench.UnloadedTarget{BaseURL: env.UpstreamURL})
	logf("unloaded: the pool one request at a time, %d passes, each block of %d requests to the %d servers and the upstream in turn", o.unloaded, bench.UnloadedBlock, len(targets)-1)
	upstream := unloadedRound(ctx, pool, targets, ids, o, "unloaded", func(id string, u *bench.Unloaded) { resOf[id].Unloaded = u })
	if alone == nil || ctx.Err() != nil {
		return running, upstream, nil
	}
	logf("unloaded, each class alone (%s): %d requests, %d passes", o.unloadedAlone, len(alone.Requests), o.unloaded)
	upstreamAlone := unloadedRound(ctx, alone, targets, ids, o, "unloaded alone", func(id string, u *bench.Unloaded) { resOf[id].UnloadedAlone = u })
	return running, upstream, upstreamAlone
}

// unloadedRound measures the unloaded latency of the servers at targets
// (their IDs in ids; the upstream last) on pool, gives each server's to
// set, and returns the upstream's: nil when it failed.
func unloadedRound(ctx context.Context, pool *bench.Pool, targets []bench.UnloadedTarget, ids []string, o options, what string, set func(string, *bench.Unloaded)) *bench.Unloaded {
	us, errs, err := bench.MeasureUnloaded(ctx, pool, targets, o.unloaded, time.Duration(max(2, len(targets)))*time.Minute, o.timeout)
	if err != nil {
		return nil
	}
	for k, id := range ids {
		if errs[k] != nil {
			logf("[%s] %s: %v", id, what, errs[k])
			continue
		}
		set(id, us[k])
		logf("[%s] %s p50 ms: %s", id, what, shapesP50(us[k]))
	}
	last := len(targets) - 1
	if errs[last] != nil {
		logf("[upstream] %s: %v", what, errs[last])
		return nil
	}
	logf("[upstream] %s p50 ms, no proxy: %s", what, shapesP50(us[last]))
	return us[last]
}

// shapesP50 is the p50 of each shape u measured, for the log.
func shapesP50(u *bench.Unloaded) string {
	var parts []string
	for _, sh := range bench.Shapes {
		if l, ok := u.Shapes[sh]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", sh, l.P50))
		}
	}
	return strings.Join(parts, ", ")
}

// warmUp sends the server unmeasured traffic for o.warm with two workers.
func warmUp(ctx context.Context, run *bench.Running, pool *bench.Pool, o options, tag string) error {
	if o.warm <= 0 {
		return nil
	}
	if _, err := bench.Load(ctx, pool, bench.LoadOptions{BaseURL: run.URL, Workers: min(o.workers, 2), Duration: o.warm, Timeout: o.timeout, Drain: min(o.drain, 5*time.Second), Progress: progress(tag, "warm-up", o.warm)}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// progress returns the progress line writer of one phase of a server's run.
func progress(tag, phase string, d time.Duration) func(int, float64) {
	start := time.Now()
	return func(done int, rps float64) {
		el := time.Since(start)
		state := fmt.Sprintf("%3.0f/%.0fs", el.Seconds(), d.Seconds())
		if el > d {
			state = fmt.Sprintf("waiting for requests in flight (%.0fs past)", (el - d).Seconds())
		}
		fmt.Fprintf(os.Stderr, "\r\033[K%s %s %s  %d done  %.1f/s", tag, phase, state, done, rps)
	}
}

func verify(ctx context.Context, servers []*bench.Server, env *bench.Env, pool *bench.Pool, timeout time.Duration) (*bench.Verification, error) {
	s := serverOf(servers, bench.IDCoraza)
	logf("checking the pool against native Coraza (%d requests, one at a time)", len(pool.Requests))
	run, err := s.Start(ctx, env)
	if err != nil {
		return nil, err
	}
	defer run.Proc.Stop(3 * time.Second)
	return bench.Verify(ctx, run.URL, pool, timeout)
}

// measure starts one server (unless run is the server started already),
// warms it up, runs the closed loop and then the open loop at openRate
// (0: the configured share of the closed-loop rate), reads its resource
// use and stops it.
func measure(ctx context.Context, s *bench.Server, run *bench.Running, env *bench.Env, pool *bench.Pool, o options, openRate float64, res *bench.ServerResult, tag string) error {
	if run == nil {
		logf("%s starting: %s", tag, s.Name)
		t0 := time.Now()
		var err error
		if run, err = s.Start(ctx, env); err != nil {
			return err
		}
		res.ReadySeconds = time.Since(t0).Seconds()
	}
	defer run.Proc.Stop(3 * time.Second)
	if err := warmUp(ctx, run, pool, o, tag); err != nil {
		return err
	}
	u0, err := run.Proc.Usage()
	if err != nil {
		return err
	}
	workers := o.workers
	if s.Workers > 0 {
		workers = s.Workers
	}
	closed, err := bench.Load(ctx, pool, bench.LoadOptions{BaseURL: run.URL, Workers: workers, Duration: o.closed, Timeout: o.timeout, Drain: o.drain, Progress: progress(tag, "closed loop", o.closed)})
	if err != nil {
		return fmt.Errorf("closed loop: %w", err)
	}
	res.Closed = closed
	if openRate <= 0 {
		admitted := closed.Throughput * (1 - closed.LimitedShare())
		openRate = max(0.1, admitted*o.openShare)
	}
	open, err := bench.Load(ctx, pool, bench.LoadOptions{BaseURL: run.URL, Workers: max(1, min(workers, int(openRate))), Rate: openRate, Duration: o.open, Timeout: o.timeout, Drain: o.drain, Progress: progress(tag, fmt.Sprintf("open loop %.1f/s", openRate), o.open)})
	if err != nil {
		return fmt.Errorf("open loop: %w", err)
	}
	res.Open = open
	u1, err := run.Proc.Usage()
	if err != nil {
		return err
	}
	res.CPUSeconds = u1.CPUSeconds - u0.CPUSeconds
	if n := closed.Requests + open.Requests; n > 0 {
		res.CPUMsPerRequest = res.CPUSeconds * 1000 / float64(n)
	}
	res.PeakRSSMB = float64(u1.PeakRSSKB) / 1024
	res.Processes = u1.PIDs
	res.Tally()
	if o.http10 > 0 {
		u, err := url.Parse(run.URL)
		if err != nil {
			return err
		}
		logf("%s HTTP/1.0: %d requests of %s, %d clients at once, each read until the server closes", tag, o.http10, bench.HTTP10Target, o.http10Conn)
		h, err := bench.RunHTTP10(ctx, bench.HTTP10Options{Addr: u.Host, Host: "localhost", Requests: o.http10, Conns: o.http10Conn, Timeout: o.timeout})
		if err != nil {
			return fmt.Errorf("HTTP/1.0 run: %w", err)
		}
		res.HTTP10 = h
		logf("%s HTTP/1.0: %.1f req/s; answers %v, no answer %d, not closed %d; p50 until the answer %.2f ms, until the close %.2f ms", tag, h.Rate, h.Codes, h.Errors, h.Unclosed, h.Answer.P50, h.Close.P50)
	}
	fn := "n/a"
	if s.WAF {
		fn = strconv.Itoa(res.FalseNegatives)
	}
	logf("%s %.1f req/s closed; open %.1f/s: %d answers, p50 %.2f p99 %.2f ms; RSS %.0f MB; CPU %.1f s; FP %d FN %s; no answer %d; aborted %d",
		tag, closed.Throughput, open.TargetRate, open.Answered, open.Latency.P50, open.Latency.P99, res.PeakRSSMB, res.CPUSeconds, res.FalsePositives, fn, res.Errors, closed.Aborted+open.Aborted)
	return nil
}

// buildHost builds cmd/wafhost into the output directory.
func buildHost(ctx context.Context, o options, env *bench.Env) error {
	if _, err := os.Stat("cmd/wafhost"); err != nil {
		return fmt.Errorf("cmd/wafhost missing: run the bench from the repository root")
	}
	bin, err := filepath.Abs(filepath.Join(o.out, "bin", "wafhost"))
	if err != nil {
		return err
	}
	logf("building cmd/wafhost")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wafhost")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/wafhost: %w\n%s", err, out)
	}
	env.WafhostBin = bin
	return nil
}

// buildPassthrough returns the pass-through plugin, built from its Go
// package unless o.pass names a .wasm file.
func buildPassthrough(ctx context.Context, o options) (string, error) {
	if strings.HasSuffix(o.pass, ".wasm") {
		return filepath.Abs(o.pass)
	}
	st, err := os.Stat(o.pass)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("pass-through plugin %s missing (want a .wasm file or a Go package directory)", o.pass)
	}
	out, err := filepath.Abs(filepath.Join(o.out, "bin", "passthrough.wasm"))
	if err != nil {
		return "", err
	}
	logf("building %s", o.pass)
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-o", out, "./"+filepath.Clean(o.pass))
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", o.pass, err, b)
	}
	return out, nil
}

// pinSelf binds every thread of the bench to cpu and runs Go code on one
// thread at a time: the load generator gets one core, as each server does.
// New threads inherit the affinity of the thread that creates them.
func pinSelf(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	for pass := 0; pass < 2; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
	}
	runtime.GOMAXPROCS(1)
	return nil
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s %s/%s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func versions() []string {
	var v []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			switch m.Path {
			case "github.com/corazawaf/coraza/v3", "github.com/tsenart/vegeta/v12":
				v = append(v, m.Path+" "+m.Version)
			}
		}
	}
	v = append(v, "OWASP CRS "+rules.CRSVersion+" ("+rules.CRSCommit+")")
	if out, err := exec.Command("nginx", "-v").CombinedOutput(); err == nil {
		v = append(v, strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: ")))
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "libmodsecurity3 ${Version}, libnginx-mod-http-modsecurity ", "libmodsecurity3").CombinedOutput(); err == nil {
		s := string(out)
		if out2, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "libnginx-mod-http-modsecurity").CombinedOutput(); err == nil {
			s += string(out2)
		}
		v = append(v, s)
	}
	return v
}
