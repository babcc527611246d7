// Command ftwrun runs the OWASP CRS regression suite (go-ftw, log mode)
// against the filter and prints "ftw: N passed, M failed, K skipped".
//
// By default it serves build/main.wasm with ftw/ftw-config.json on the
// wasmhost package (in this process, as cmd/wafhost does) and runs every test
// against it. With -envoy it starts real Envoy with envoy/envoy.yaml and
// that plugin configuration instead (the tests Envoy itself answers or
// rewrites are in ftw/ftw-envoy.yml). With -target and -log-file it runs
// against a proxy that is already running.
//
//	go run ./ftw/cmd/ftwrun                          # whole suite, build/main.wasm
//	go run ./ftw/cmd/ftwrun -include '^9201[0-9]0-'  # a subset (or FTW_INCLUDE=...)
//	go run ./ftw/cmd/ftwrun -envoy -vms 2                # through real Envoy (envoy/envoy.yaml)
//	go run ./ftw/cmd/ftwrun -target http://127.0.0.1:8080 -log-file envoy.log
//
// It writes build/ftw/summary.json and exits 1 when a test failed that
// ftw/ftw.yml does not list, 2 when the run could not complete.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wafguard/wafguard/ftw"
	"github.com/wafguard/wafguard/internal/ociimage"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

type options struct {
	wasm, config, overrides, summary string
	include                          string
	target, logFile                  string
	workers                          int
	vms                              int
	cacheDir                         string
	vmEnv                            stringList
	shard                            string
	debug, runIgnored                bool
	holdHeaders                      bool
	envoy                            bool
	bootstrap, envoyIgnores          string
}

func main() {
	var o options
	flag.StringVar(&o.wasm, "wasm", "build/main.wasm", "plugin to serve (build it with: go run mage.go build)")
	flag.StringVar(&o.config, "config", "ftw/ftw-config.json", "plugin configuration for the run")
	flag.StringVar(&o.overrides, "overrides", "ftw/ftw.yml", "go-ftw configuration with the ignored and overridden tests")
	flag.StringVar(&o.summary, "summary", "build/ftw/summary.json", "where to write the JSON summary")
	flag.StringVar(&o.include, "include", os.Getenv("FTW_INCLUDE"), "run only the tests whose ID (rule-test, e.g. 920100-4) matches this regexp; default $FTW_INCLUDE")
	flag.StringVar(&o.target, "target", "", "base URL of a running proxy (e.g. http://127.0.0.1:8080); needs -log-file; no host is started")
	flag.StringVar(&o.logFile, "log-file", "", "with -target: the file the proxy writes the plugin's log to")
	flag.IntVar(&o.workers, "workers", min(runtime.NumCPU(), 4), "hosts to run in parallel, each with a share of the tests (not with -target); each takes about 1 GB")
	flag.IntVar(&o.vms, "vms", 1, "VMs (Envoy workers) per host")
	flag.Var(&o.vmEnv, "vm-env", "`KEY=VALUE` for the VM's environment, as vm_config.environment_variables (repeatable)")
	flag.StringVar(&o.cacheDir, "cache-dir", "", "wazero compilation cache (default: the wasmhost default); \"off\" turns it off")
	flag.StringVar(&o.shard, "shard", "", "run part i/n of the tests (set by -workers for its child processes)")
	flag.BoolVar(&o.holdHeaders, "hold-headers", false, "run with hold_headers_until_inspected on (added to -config), in a host with allow_on_headers_stop_iteration, as that mode needs")
	flag.BoolVar(&o.envoy, "envoy", false, "serve the plugin in real Envoy (ENVOY_BIN, or the one go run mage.go envoy installs) with -bootstrap instead of the wazero host")
	flag.StringVar(&o.bootstrap, "bootstrap", "envoy/envoy.yaml", "with -envoy: the bootstrap to run; only its addresses, module and plugin configuration (-config) are changed")
	flag.StringVar(&o.envoyIgnores, "envoy-ignores", "ftw/ftw-envoy.yml", "with -envoy: the tests Envoy itself answers or rewrites, ignored besides -overrides")
	flag.BoolVar(&o.debug, "debug", false, "go-ftw debug log on stderr")
	flag.BoolVar(&o.runIgnored, "run-ignored", false, "run only the tests ftw.yml ignores, and list those that pass (stale entries)")
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments %q", flag.Args())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		fatalf("%v", err)
	}
	if err := res.WriteJSON(o.summary); err != nil {
		fatalf("writing the summary: %v", err)
	}
	if o.shard == "" {
		for _, f := range res.Failures {
			if f.Error != "" {
				fmt.Printf("ftw: failed %s (%s): want %s; %s\n", f.ID, f.File, strings.Join(f.Want, " / "), f.Error)
				continue
			}
			fmt.Printf("ftw: failed %s (%s): want %s; logged rules %v\n", f.ID, f.File, strings.Join(f.Want, " / "), f.Triggered)
		}
		fmt.Printf("ftw: %d ignored by %s, %d with a corrected expectation, %d not selected; %.0fs; summary in %s\n",
			res.Ignored, ignoredBy(o), res.Overridden, res.Excluded, res.RuntimeSeconds, o.summary)
		if o.runIgnored {
			fmt.Printf("ftw: %d ignored tests pass and can leave %s: %v\n", len(res.StaleIgnores), o.overrides, res.StaleIgnores)
		}
		fmt.Println(res.SummaryLine())
	}
	if res.Failed > 0 && !o.runIgnored {
		os.Exit(1)
	}
}

// ignoredBy names the files whose ignores the run read.
func ignoredBy(o options) string {
	if o.envoy && o.envoyIgnores != "" {
		return o.overrides + " and " + o.envoyIgnores
	}
	return o.overrides
}

// withHoldHeaders adds "hold_headers_until_inspected": true to a plugin
// configuration.
func withHoldHeaders(config []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(config, &m); err != nil {
		return nil, err
	}
	m["hold_headers_until_inspected"] = json.RawMessage("true")
	return json.Marshal(m)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ftwrun: "+format+"\n", args...)
	os.Exit(2)
}

func run(ctx context.Context, o options) (*ftw.Result, error) {
	ro := ftw.Options{OverridesFile: o.overrides, Progress: os.Stderr, Debug: o.debug, RunIgnored: o.runIgnored}
	if o.include != "" {
		re, err := regexp.Compile(o.include)
		if err != nil {
			return nil, fmt.Errorf("-include: %w", err)
		}
		ro.Include = re
	}

	if o.target != "" {
		t, err := ftw.TargetFromURL(o.target, o.logFile)
		if err != nil {
			return nil, fmt.Errorf("-target: %w", err)
		}
		// One log file cannot be shared by parallel runs: each run reads
		// the lines between its own markers.
		return ftw.Run(t, ro)
	}
	if o.logFile != "" {
		return nil, errors.New("-log-file needs -target")
	}

	wasm, err := os.ReadFile(o.wasm)
	if err != nil {
		return nil, fmt.Errorf("-wasm: %w (build it with: go run mage.go build)", err)
	}
	if crs, err := ociimage.CRSFromModule(wasm); err != nil {
		return nil, fmt.Errorf("-wasm %s: %w", o.wasm, err)
	} else if crs != ftw.CRSVersion {
		return nil, fmt.Errorf("-wasm %s embeds CRS %s, and these are the tests of CRS %s: build the module and run the tests with the same CRS= (CRS=%s go run mage.go build ftw)", o.wasm, crs, ftw.CRSVersion, crs)
	}
	config, err := os.ReadFile(o.config)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	if o.holdHeaders {
		if config, err = withHoldHeaders(config); err != nil {
			return nil, fmt.Errorf("-config %s: %w", o.config, err)
		}
	}
	if o.envoy {
		if o.envoyIgnores != "" {
			ro.MoreIgnores = []string{o.envoyIgnores}
		}
		return runEnvoy(ctx, o, config, ro)
	}
	name := "0"
	if o.shard != "" {
		i, n, err := parseShard(o.shard)
		if err != nil {
			return nil, err
		}
		ro.Shard, ro.Shards = i, n
		name = strconv.Itoa(i)
	} else if o.workers > 1 {
		if err := ftw.Precompile(ctx, wasm, o.cacheDir); err != nil {
			return nil, err
		}
		return runShards(ctx, o)
	}

	var env [][2]string
	for _, kv := range o.vmEnv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-vm-env: got %q, want KEY=VALUE", kv)
		}
		env = append(env, [2]string{k, v})
	}
	dir := filepath.Dir(o.summary)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	h, err := ftw.StartWasm(ctx, ftw.WasmOptions{
		Wasm: wasm, Config: config, VMs: o.vms, CacheDir: o.cacheDir, Env: env,
		LogFile:                     filepath.Join(dir, "host-"+name+".log"),
		AllowOnHeadersStopIteration: o.holdHeaders,
	})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fmt.Fprintf(os.Stderr, "ftw: %s started in %s, log in %s\n", o.wasm, h.Started.Round(time.Millisecond), h.Target.LogFile)
	res, err := ftw.Run(h.Target, ro)
	if n, last := h.Critical(); n > 0 {
		// A trap or a failed plugin start explains failed tests better
		// than the tests do.
		msg := fmt.Sprintf("the plugin logged %d critical lines, the last: %s", n, last)
		if err != nil {
			return nil, fmt.Errorf("%w; %s", err, msg)
		}
		return nil, errors.New(msg)
	}
	return res, err
}

// runEnvoy runs the suite through real Envoy: one process, its workers
// sharing the log file go-ftw reads (one test at a time).
func runEnvoy(ctx context.Context, o options, config []byte, ro ftw.Options) (*ftw.Result, error) {
	if o.shard != "" || len(o.vmEnv) > 0 {
		return nil, errors.New("-envoy: -shard and -vm-env are for the wazero host")
	}
	dir := filepath.Dir(o.summary)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "ftw: starting Envoy with %s and %d workers (V8 compiles the module first: 10-20 s)\n", o.bootstrap, max(o.vms, 1))
	e, err := ftw.StartEnvoy(ctx, ftw.EnvoyOptions{
		Wasm: o.wasm, Config: config, Bootstrap: o.bootstrap,
		LogFile: filepath.Join(dir, "envoy.log"), Workers: o.vms,
	})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	fmt.Fprintf(os.Stderr, "ftw: Envoy %s (pid %d) serving after %s, log in %s\n", e.Envoy.Version, e.Envoy.PID(), e.Envoy.Serving.Round(time.Millisecond), e.Target.LogFile)
	res, err := ftw.Run(e.Target, ro)
	if n, last := e.Critical(); n > 0 {
		msg := fmt.Sprintf("Envoy logged %d critical lines, the last: %s", n, last)
		if err != nil {
			return nil, fmt.Errorf("%w; %s", err, msg)
		}
		return nil, errors.New(msg)
	}
	if exited, xerr := e.Envoy.Exited(); exited {
		return nil, fmt.Errorf("Envoy exited during the run (%v)", xerr)
	}
	return res, err
}

// runShards runs this command once per worker, each with its own host and a
// share of the test files, and merges their summaries.
func runShards(ctx context.Context, o options) (*ftw.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	n := o.workers
	results := make([]*ftw.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		summary := filepath.Join(filepath.Dir(o.summary), fmt.Sprintf("shard-%d.json", i))
		os.Remove(summary)
		args := []string{
			"-shard", fmt.Sprintf("%d/%d", i, n),
			"-wasm", o.wasm, "-config", o.config, "-overrides", o.overrides,
			"-summary", summary, "-include", o.include,
			"-vms", strconv.Itoa(o.vms), "-cache-dir", o.cacheDir,
		}
		for _, kv := range o.vmEnv {
			args = append(args, "-vm-env", kv)
		}
		if o.debug {
			args = append(args, "-debug")
		}
		if o.runIgnored {
			args = append(args, "-run-ignored")
		}
		if o.holdHeaders {
			args = append(args, "-hold-headers")
		}
		cmd := exec.CommandContext(ctx, self, args...)
		stdout, waitOut := prefixWriter(os.Stdout, i, n)
		stderr, waitErr := prefixWriter(os.Stderr, i, n)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Run()
			stdout.Close()
			stderr.Close()
			waitOut()
			waitErr()
			var ee *exec.ExitError
			if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
				errs[i] = fmt.Errorf("worker %d/%d: %w", i, n, err)
				return
			}
			results[i], errs[i] = ftw.ReadResult(summary)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := results[0]
	for _, r := range results[1:] {
		res.Merge(r)
	}
	res.Target = fmt.Sprintf("%s (%d workers)", o.wasm, n)
	res.RuntimeSeconds = time.Since(start).Round(10 * time.Millisecond).Seconds()
	return res, nil
}

func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("-shard: got %q, want i/n with 0 <= i < n", s)
	}
	return i, n, nil
}

// prefixWriter writes each line of a worker's output with "[i/n] " in front.
// Close the writer, then call wait to flush the last line.
func prefixWriter(w io.Writer, i, n int) (io.WriteCloser, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintf(w, "[%d/%d] %s\n", i, n, sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	return pw, func() { <-done }
}
