package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// The fleet-wide rate limit test (TestRatelimit_twoEnvoys): two real
// Envoys run envoy/envoy-ratelimit.yaml against one rate limit service
// (github.com/envoyproxy/ratelimit) backed by one Redis.
const (
	// envRatelimit set to 1 runs the test; it needs the Envoy of
	// E2E_ENVOY, network access to the Go module proxy (once) and
	// redis-server.
	envRatelimit = "E2E_RATELIMIT"
	// ratelimitRun is the command that runs the test.
	ratelimitRun = "E2E_RATELIMIT=1 go test -count=1 -v -run Ratelimit ./e2e/ -timeout 30m"
	// ratelimitModule and ratelimitVersion pin the rate limit service:
	// the repository has no release tag the module proxy serves, so the
	// pin is the pseudo-version of a main-branch commit (2026-01-22).
	ratelimitModule  = "github.com/envoyproxy/ratelimit"
	ratelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
	// ratelimitCmd is the service's main package; go install names the
	// binary after it.
	ratelimitCmd = "src/service_cmd"
	// ratelimitBootstrap is the bootstrap under test.
	ratelimitBootstrap = "../envoy/envoy-ratelimit.yaml"
	// ratelimitDomain is the rate limit filter's domain in the bootstrap.
	ratelimitDomain = "wafguard"

	// rlLimitedHost is the one :authority the service limits, to
	// rlLimit requests per minute for the whole fleet; every other
	// authority and every client address are unlimited, so that the
	// other parts of the test are not limited.
	rlLimitedHost = "limited.test"
	rlFreeHost    = "free.test"
	rlLimit       = 10
	// rlBurst is how many requests to rlLimitedHost the test spreads over
	// the two Envoys, one at a time.
	rlBurst = 3 * rlLimit
	// rlMaxInflight replaces the bootstrap's admission.max_inflight (256)
	// so that a few held requests reach it; rlHoldClients concurrent
	// requests go to each Envoy.
	rlMaxInflight = 2
	rlHoldClients = 5
	// rlWorkers is each Envoy's --concurrency.
	rlWorkers = 2
	// rlHoldWait bounds how long the upstream holds a request, and the
	// wait for a burst's answers.
	rlHoldWait = 45 * time.Second
	// rlEnvoyStart bounds each Envoy's start: V8 compiles the whole
	// module before the listener opens (a minute or two with two Envoys
	// compiling at once on a busy 2-core machine).
	rlEnvoyStart = 4 * time.Minute
)

// ratelimitConfig is the service's configuration for the descriptors the
// bootstrap's route sends: {remote_address: <client ip>} and
// {authority: <host>}.
var ratelimitConfig = fmt.Sprintf(`domain: %s
descriptors:
  - key: remote_address
    rate_limit:
      unlimited: true
  - key: authority
    value: %s
    rate_limit:
      unit: minute
      requests_per_unit: %d
  - key: authority
    rate_limit:
      unlimited: true
`, ratelimitDomain, rlLimitedHost, rlLimit)

// TestRatelimit_twoEnvoys runs envoy/envoy-ratelimit.yaml as shipped, its
// addresses and module path localized and admission.max_inflight lowered,
// in two Envoy processes that share one rate limit service, and checks
// docs/deployment.md "Beyond one process":
//   - the global limit holds across both Envoys: of rlBurst requests to
//     the limited authority, spread over both, exactly rlLimit pass and
//     the rest get Envoy's 429 with x-envoy-ratelimited;
//   - each Envoy keeps its own admission cap: concurrent held requests
//     get the plugin's 429 with Retry-After above rlMaxInflight in each
//     process, so the fleet admits 2 × rlMaxInflight;
//   - with the rate limit service stopped, requests pass
//     (failure_mode_deny: false) and the admission cap still holds.
func TestRatelimit_twoEnvoys(t *testing.T) {
	if os.Getenv(envRatelimit) != "1" {
		t.Skipf("%s is not 1: this test starts Redis, the rate limit service and two Envoys (minutes); run it with: %s", envRatelimit, ratelimitRun)
	}
	began := time.Now()
	wasm, err := filepath.Abs(plugintest.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wasm); err != nil {
		t.Fatalf("the plugin: %v; build it with: %s", err, buildCommand)
	}
	envoyBin, envoyVersion, err := envoy.Binary()
	if err != nil {
		t.Fatal(err)
	}
	rlBin, err := ratelimitBinary(t)
	if err != nil {
		t.Fatal(err)
	}
	redisBin, err := redisBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	redisAddr := startRlRedis(t, redisBin, dir)
	rls := startRatelimit(t, rlBin, filepath.Join(dir, "test"), redisAddr, ratelimitConfig)
	rls.checkConfig(t, fmt.Sprintf("%s.authority_%s: unit=MINUTE requests_per_unit=%d", ratelimitDomain, rlLimitedHost, rlLimit))

	// The example configuration in docs/deployment.md loads in the same
	// service, with its three limits.
	docs, err := docsRatelimitConfig()
	if err != nil {
		t.Fatal(err)
	}
	example := startRatelimit(t, rlBin, filepath.Join(dir, "docs"), redisAddr, docs)
	example.checkConfig(t,
		"wafguard.remote_address: unit=SECOND requests_per_unit=20",
		"wafguard.authority: unit=SECOND requests_per_unit=2000",
		"wafguard.authority_small.example.com: unit=SECOND requests_per_unit=200")
	example.p.Stop()

	up := newRlHoldUpstream()
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upSrv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
	go upSrv.Serve(upLn)
	t.Cleanup(func() { upSrv.Close() })

	// Both Envoys start at once: V8 compiles the module in each.
	envoys := make([]*rlEnvoy, 2)
	for i := range envoys {
		e, err := startRatelimitEnvoy(t, i, envoyBin, dir, wasm, upLn.Addr().String(), rls.grpc)
		if err != nil {
			t.Fatal(err)
		}
		envoys[i] = e
	}
	for _, e := range envoys {
		ctx, cancel := context.WithTimeout(context.Background(), rlEnvoyStart)
		err := e.p.WaitServing(ctx, rlWorkers+1)
		cancel()
		if err != nil {
			t.Fatalf("%s (Envoy %s, %s): %v", e.name, envoyVersion, envoyBin, err)
		}
		t.Logf("%s (pid %d, Envoy %s) serving on %s after %s", e.name, e.p.PID(), envoyVersion, e.base, time.Since(e.p.Started).Round(time.Millisecond))
	}
	c := &http.Client{Timeout: 60 * time.Second}

	// Warm up: each Envoy opens its gRPC connection to the service and
	// gets one answer from it, so that the first limited requests are
	// not decided by a connect that outlasts the filter's 50 ms timeout.
	for _, e := range envoys {
		e.warmUp(t, c)
	}

	t.Run("global_limit_across_envoys", func(t *testing.T) {
		// The service counts in fixed windows of a calendar minute; a
		// burst must not straddle two.
		if left := time.Minute - time.Since(time.Now().Truncate(time.Minute)); left < 20*time.Second {
			t.Logf("waiting %s for the next minute's window", left.Round(time.Millisecond))
			time.Sleep(left + 500*time.Millisecond)
		}
		before := rlStatsOf(t, envoys)
		res := make([][]rlResult, len(envoys))
		for i := range rlBurst {
			e := envoys[i%len(envoys)]
			res[i%len(envoys)] = append(res[i%len(envoys)], rlSend(c, e.base, rlLimitedHost, "/anything"))
		}
		after := rlStatsOf(t, envoys)
		var passed, limited, ok, over, errs, allowed int
		for i, e := range envoys {
			n200, n429, bare, bareHeaders := 0, 0, 0, ""
			for j, r := range res[i] {
				switch {
				case r.err != nil:
					e.fatalf(t, "request %d to %s: %v", j, e.name, r.err)
				case r.status == http.StatusOK:
					n200++
					// The service's OK for a limited descriptor carries
					// its limit and what is left, like its OVER_LIMIT; a
					// request let through after a failed call has none.
					if r.xLimit == "" || r.xRemaining == "" || r.xReset == "" {
						bare++
						bareHeaders = r.xHeaders()
					}
					if n200 == 1 {
						t.Logf("%s: first 200: %s", e.name, r.xHeaders())
					}
				case r.status == http.StatusTooManyRequests && r.ratelimited == "true":
					n429++
					if r.retryAfter != "" {
						e.fatalf(t, "%s: rate limited 429 with Retry-After %q; the bootstrap does not set enable_retry_after_header, want none", e.name, r.retryAfter)
					}
					if r.xLimit == "" || r.xRemaining != "0" || r.xReset == "" {
						e.fatalf(t, "%s: rate limited 429 with %s; want a limit, 0 remaining and a reset (enable_x_ratelimit_headers: DRAFT_VERSION_03)", e.name, r.xHeaders())
					}
					if n429 == 1 {
						t.Logf("%s: first 429: %s", e.name, r.xHeaders())
					}
				default:
					e.fatalf(t, "%s: %s request %d: got %d (x-envoy-ratelimited %q), want 200 or 429 with x-envoy-ratelimited: true", e.name, rlLimitedHost, j, r.status, r.ratelimited)
				}
			}
			d := after[i].minus(before[i])
			t.Logf("%s: %d × 200, %d × 429 (x-envoy-ratelimited); ratelimit stats: ok %d, over_limit %d, error %d, failure_mode_allowed %d",
				e.name, n200, n429, d.ok, d.overLimit, d.error, d.failureModeAllowed)
			if n429 == 0 {
				e.fatalf(t, "%s: no 429 of %d requests, although the other Envoy's requests count against the same %d per minute", e.name, len(res[i]), rlLimit)
			}
			if bare > d.failureModeAllowed {
				e.fatalf(t, "%s: %d × 200 for %s without all X-RateLimit-* headers (e.g. %s), more than the %d let through after a failed call; want them on every 200 the service allowed (enable_x_ratelimit_headers: DRAFT_VERSION_03)",
					e.name, bare, rlLimitedHost, bareHeaders, d.failureModeAllowed)
			}
			if d.overLimit != n429 {
				e.fatalf(t, "%s: %d × 429 but cluster.upstream.ratelimit.over_limit rose by %d", e.name, n429, d.overLimit)
			}
			if d.ok+d.failureModeAllowed != n200 {
				e.fatalf(t, "%s: %d × 200 but ratelimit.ok (%d) + failure_mode_allowed (%d) rose by %d", e.name, n200, d.ok, d.failureModeAllowed, d.ok+d.failureModeAllowed)
			}
			e.checkRateLimitedLog(t, n429)
			passed, limited = passed+n200, limited+n429
			ok, over, errs, allowed = ok+d.ok, over+d.overLimit, errs+d.error, allowed+d.failureModeAllowed
		}
		// Redis counts every request the service saw, also one whose
		// answer came after the filter's 50 ms timeout (an error, let
		// through): the service's OKs are then fewer than rlLimit.
		if ok > rlLimit || ok < rlLimit-errs {
			t.Fatalf("both Envoys: the service allowed %d requests (ratelimit.ok), want %d per minute (%d errors)", ok, rlLimit, errs)
		}
		if errs > rlBurst/3 {
			t.Fatalf("both Envoys: %d of %d rate limit calls failed (timeout 50 ms): the machine is too busy to show the limit", errs, rlBurst)
		}
		t.Logf("both Envoys: %d × 200 and %d × 429 of %d; the service allowed %d (limit %d per minute) and refused %d; %d calls failed, %d requests let through after one",
			passed, limited, rlBurst, ok, rlLimit, over, errs, allowed)
	})

	t.Run("admission_cap_per_envoy", func(t *testing.T) {
		rlHoldBurst(t, c, envoys, up)
	})

	t.Run("service_down", func(t *testing.T) {
		rls.p.Stop()
		t.Logf("stopped the rate limit service (pid %d)", rls.p.PID())
		before := rlStatsOf(t, envoys)
		const perEnvoy = 3
		res := make([][]rlResult, len(envoys))
		for i := range perEnvoy * len(envoys) {
			e := envoys[i%len(envoys)]
			res[i%len(envoys)] = append(res[i%len(envoys)], rlSend(c, e.base, rlLimitedHost, "/anything"))
		}
		after := rlStatsOf(t, envoys)
		for i, e := range envoys {
			for j, r := range res[i] {
				if r.err != nil || r.status != http.StatusOK || r.ratelimited != "" {
					e.fatalf(t, "%s: %s request %d with the service down: got %d (x-envoy-ratelimited %q, err %v), want 200: failure_mode_deny is false",
						e.name, rlLimitedHost, j, r.status, r.ratelimited, r.err)
				}
			}
			d := after[i].minus(before[i])
			t.Logf("%s, service down: %d × 200; ratelimit stats: ok %d, over_limit %d, error %d, failure_mode_allowed %d",
				e.name, len(res[i]), d.ok, d.overLimit, d.error, d.failureModeAllowed)
			if d.error != perEnvoy || d.failureModeAllowed != perEnvoy || d.ok != 0 || d.overLimit != 0 {
				e.fatalf(t, "%s: with the service down, ratelimit stats rose by ok %d, over_limit %d, error %d, failure_mode_allowed %d; want error and failure_mode_allowed %d, the others 0",
					e.name, d.ok, d.overLimit, d.error, d.failureModeAllowed, perEnvoy)
			}
		}
		// The admission cap does not depend on the service.
		rlHoldBurst(t, c, envoys, up)
	})
	t.Logf("ran in %s", time.Since(began).Round(time.Second))
}

// ratelimitBinary returns the rate limit service's binary, installing it
// with go install when it is not in its cache folder yet.
func ratelimitBinary(t *testing.T) (string, error) {
	dir, err := ratelimitDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(ratelimitCmd))
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("ratelimit: no go on PATH to install %s@%s: put its %s binary at %s", ratelimitModule, ratelimitVersion, filepath.Base(ratelimitCmd), bin)
	}
	pkg := ratelimitModule + "/" + ratelimitCmd + "@" + ratelimitVersion
	t.Logf("installing the rate limit service: GOBIN=%s go install %s (a few minutes, once)", dir, pkg)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", pkg)
	cmd.Dir = os.TempDir() // outside this module: go install pkg@version ignores its go.mod anyway
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("ratelimit: GOBIN=%s go install %s failed (%v): %s; without access to the Go module proxy, build that version elsewhere and copy the binary to %s",
			dir, pkg, err, lastLineOf(out), bin)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("ratelimit: go install %s succeeded but %w", pkg, err)
	}
	return bin, nil
}

// ratelimitDir is where the service's binary is installed: a folder
// that a rebuild of the project leaves alone, next to the installed
// Envoy ($WAFGUARD_CACHE, or the user's cache folder/wafguard).
func ratelimitDir() (string, error) {
	base := os.Getenv(envoy.CacheEnv)
	if base == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("ratelimit: no cache folder (%w): set %s to a folder for the installed rate limit service", err, envoy.CacheEnv)
		}
		base = filepath.Join(d, "wafguard")
	}
	return filepath.Join(base, "ratelimit-"+ratelimitVersion, "bin"), nil
}

// redisBinary returns redis-server from PATH, installing Debian's package
// when it is missing.
func redisBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", errors.New("redis: no redis-server on PATH and no apt-get to install it: install Redis 6 or newer and put redis-server on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, apt, "install", "-y", "redis-server")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("redis: no redis-server on PATH, and apt-get install -y redis-server failed (%v: %s): install it as root (apt-get update && apt-get install -y redis-server) or put a redis-server on PATH", err, lastLineOf(out))
	}
	return exec.LookPath("redis-server")
}

func lastLineOf(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// startRlRedis starts redis-server on a free loopback port, without
// persistence, and returns its host:port once it answers PING.
func startRlRedis(t *testing.T, bin, dir string) string {
	addr := envoy.FreePort()
	_, port, _ := net.SplitHostPort(addr)
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", data, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
	p, err := envoy.StartProc(cmd, nil)
	if err != nil {
		t.Fatalf("starting redis-server (%s): %v", cmd.Path, err)
	}
	t.Cleanup(p.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rlRedisPing(addr) == nil {
			t.Logf("redis-server (pid %d) on %s", p.PID(), addr)
			return addr
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer PING within 30 s (exited: %v); its output:\n%s", addr, exited, p.LastLines(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rlRedisPing(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

// rlService is the running rate limit service.
type rlService struct {
	p     *envoy.Proc
	grpc  string // host:port of its gRPC API
	debug string // host:port of its debug interface (/rlconfig)
}

// startRatelimit writes config, the service's configuration, under dir
// and starts it on free loopback ports against Redis at redisAddr. It
// returns once the service reports healthy with the configuration
// loaded.
func startRatelimit(t *testing.T, bin, dir, redisAddr, config string) *rlService {
	root := filepath.Join(dir, "runtime")
	conf := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, ratelimitDomain+".yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, debugAddr := envoy.FreePort(), envoy.FreePort(), envoy.FreePort()
	port := func(a string) string { _, p, _ := net.SplitHostPort(a); return p }
	cmd := exec.Command(bin)
	// Only what the service reads (src/settings/settings.go at the pinned
	// version), so that nothing in the caller's environment changes it.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true",
		"BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_TYPE=SINGLE",
		"REDIS_URL=" + redisAddr,
		"USE_STATSD=false",
		"LOG_LEVEL=warn",
		"HOST=127.0.0.1", "PORT=" + port(httpAddr),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(grpcAddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(debugAddr),
	}
	p, err := envoy.StartProc(cmd, nil)
	if err != nil {
		t.Fatalf("starting ratelimit (%s): %v", cmd.Path, err)
	}
	t.Cleanup(p.Stop)
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := c.Get("http://" + httpAddr + "/healthcheck"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("ratelimit %s (pid %d): gRPC on %s, domain %s", ratelimitVersion, p.PID(), grpcAddr, ratelimitDomain)
				return &rlService{p: p, grpc: grpcAddr, debug: debugAddr}
			}
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) {
			t.Fatalf("the rate limit service did not report healthy on http://%s/healthcheck within 60 s (exited: %v); its output:\n%s", httpAddr, exited, p.LastLines(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkConfig checks that the service's /rlconfig lists each of want.
func (s *rlService) checkConfig(t *testing.T, want ...string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.debug + "/rlconfig")
	if err != nil {
		t.Fatalf("the rate limit service's /rlconfig: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the rate limit service's /rlconfig: status %d, %v", resp.StatusCode, err)
	}
	for _, w := range want {
		if !strings.Contains(string(b), w+",") {
			t.Fatalf("the rate limit service's /rlconfig lacks %q; it has:\n%s", w, b)
		}
	}
}

// docsRatelimitConfig returns the example configuration of the rate limit
// service in docs/deployment.md: the first yaml block after "The rate
// limit service.".
func docsRatelimitConfig() (string, error) {
	const file, mark = "../docs/deployment.md", "**The rate limit service.**"
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(b), mark)
	if ok {
		_, rest, ok = strings.Cut(rest, "```yaml\n")
	}
	if ok {
		rest, _, ok = strings.Cut(rest, "```")
	}
	if !ok {
		return "", fmt.Errorf("%s: no yaml block after %q: keep the rate limit service's example configuration there", file, mark)
	}
	return rest, nil
}

// rlEnvoy is one Envoy running envoy-ratelimit.yaml.
type rlEnvoy struct {
	name, base string
	p          *envoy.Process
	// admission429 counts the plugin's 429s this Envoy sent so far.
	admission429 int
}

// startRatelimitEnvoy starts Envoy number i with envoy-ratelimit.yaml,
// localized to free loopback ports, the upstream at upstream, the
// ratelimit cluster at rls and admission.max_inflight rlMaxInflight.
// It does not wait for it to serve.
func startRatelimitEnvoy(t *testing.T, i int, bin, dir, wasm, upstream, rls string) (*rlEnvoy, error) {
	b, _, err := envoy.LoadBootstrap(ratelimitBootstrap)
	if err != nil {
		return nil, err
	}
	listen, admin := envoy.FreePort(), envoy.FreePort()
	if err := envoy.Localize(b, envoy.Local{Listen: listen, Admin: admin, Upstream: upstream, Module: wasm}); err != nil {
		return nil, err
	}
	// Localize moves one cluster per call; the second moves the rate
	// limit service's.
	if err := envoy.Localize(b, envoy.Local{Upstream: rls, UpstreamCluster: "ratelimit"}); err != nil {
		return nil, err
	}
	if err := setMaxInflight(b, rlMaxInflight); err != nil {
		return nil, err
	}
	js, err := envoy.JSON(b)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, fmt.Sprintf("envoy-%d.json", i))
	if err := os.WriteFile(cfg, js, 0o644); err != nil {
		return nil, err
	}
	// Distinct from the other e2e Envoys' base IDs (100 + PID mod 10000) and from each other.
	baseID := 20000 + 2*(os.Getpid()%10000) + i
	p, err := envoy.Start(envoy.Options{Binary: bin, Config: cfg, Admin: admin, Concurrency: rlWorkers, BaseID: baseID})
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Stop)
	return &rlEnvoy{name: fmt.Sprintf("envoy%d", i), base: "http://" + listen, p: p}, nil
}

// setMaxInflight sets admission.max_inflight in the plugin configuration
// of every wasm HTTP filter of the bootstrap's listeners.
func setMaxInflight(b *bootstrapv3.Bootstrap, n int) error {
	edited := 0
	for _, ln := range b.GetStaticResources().GetListeners() {
		for _, fc := range ln.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if !f.GetTypedConfig().MessageIs(&hcm) {
					continue
				}
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					return fmt.Errorf("%s: %w", f.GetName(), err)
				}
				for _, hf := range hcm.GetHttpFilters() {
					var w wasmfilterv3.Wasm
					if !hf.GetTypedConfig().MessageIs(&w) {
						continue
					}
					if err := hf.GetTypedConfig().UnmarshalTo(&w); err != nil {
						return fmt.Errorf("%s: %w", hf.GetName(), err)
					}
					var s wrapperspb.StringValue
					if err := w.GetConfig().GetConfiguration().UnmarshalTo(&s); err != nil {
						return fmt.Errorf("%s: the plugin configuration is not a StringValue: %w", hf.GetName(), err)
					}
					var m map[string]any
					if err := json.Unmarshal([]byte(s.GetValue()), &m); err != nil {
						return fmt.Errorf("%s: the plugin configuration is not JSON: %w", hf.GetName(), err)
					}
					adm, ok := m["admission"].(map[string]any)
					if !ok {
						return fmt.Errorf("%s: the plugin configuration has no admission object to set max_inflight in", hf.GetName())
					}
					adm["max_inflight"] = n
					js, err := json.Marshal(m)
					if err != nil {
						return err
					}
					s.Value = string(js)
					if err := w.GetConfig().GetConfiguration().MarshalFrom(&s); err != nil {
						return err
					}
					if err := hf.GetTypedConfig().MarshalFrom(&w); err != nil {
						return err
					}
					edited++
				}
				if err := f.GetTypedConfig().MarshalFrom(&hcm); err != nil {
					return err
				}
			}
		}
	}
	if edited == 0 {
		return errors.New("setMaxInflight: no wasm HTTP filter in the bootstrap's listeners")
	}
	return nil
}

// fatalf ends the test with the end of this Envoy's log.
func (e *rlEnvoy) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(e.p.Log(), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	t.Fatalf("%s\n%s log (last lines):\n%s", fmt.Sprintf(format, args...), e.name, strings.Join(lines, "\n"))
}

// warmUp sends requests to an unlimited authority until the rate limit
// service has answered one (ratelimit.ok), at most 20.
func (e *rlEnvoy) warmUp(t *testing.T, c *http.Client) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	for attempt := 0; attempt < 20; attempt++ {
		r := rlSend(c, e.base, rlFreeHost, "/anything")
		if r.err != nil || r.status != http.StatusOK {
			e.fatalf(t, "%s: warm-up GET /anything: status %d, err %v; want 200", e.name, r.status, r.err)
		}
		if s, err := rlStat(hc, e.p, "cluster.upstream.ratelimit.ok"); err == nil && s > 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	e.fatalf(t, "%s: no answer from the rate limit service (cluster.upstream.ratelimit.ok) after 20 requests", e.name)
}

// rlStats are the rate limit filter's counters for the route's cluster.
type rlStats struct{ ok, overLimit, error, failureModeAllowed int }

func (s rlStats) minus(o rlStats) rlStats {
	return rlStats{s.ok - o.ok, s.overLimit - o.overLimit, s.error - o.error, s.failureModeAllowed - o.failureModeAllowed}
}

func rlStatsOf(t *testing.T, envoys []*rlEnvoy) []rlStats {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	out := make([]rlStats, len(envoys))
	for i, e := range envoys {
		for _, f := range []struct {
			name string
			v    *int
		}{
			{"ok", &out[i].ok}, {"over_limit", &out[i].overLimit}, {"error", &out[i].error}, {"failure_mode_allowed", &out[i].failureModeAllowed},
		} {
			v, err := rlStat(hc, e.p, "cluster.upstream.ratelimit."+f.name)
			if err != nil {
				t.Fatalf("%s: %v", e.name, err)
			}
			*f.v = v
		}
	}
	return out
}

// stat reads a counter; Envoy creates the rate limit filter's counters on
// their first increment, so a missing one is 0.
func rlStat(c *http.Client, p *envoy.Process, name string) (int, error) {
	v, err := p.Stat(c, name)
	if err != nil && strings.HasPrefix(err.Error(), "envoy: no stat ") {
		return 0, nil
	}
	return v, err
}

// checkRateLimitedLog checks the access log: n lines for rate limited
// requests, with response_code 429, response_flags RL and
// response_code_details request_rate_limited (docs/deployment.md). Envoy
// flushes its access log in the background, so it waits up to 20 s.
func (e *rlEnvoy) checkRateLimitedLog(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, bad := 0, ""
		for _, l := range rlAccessLog(e.p.Log()) {
			if fmt.Sprint(l["authority"]) != rlLimitedHost || fmt.Sprint(l["response_code"]) != "429" {
				continue
			}
			if fmt.Sprint(l["response_code_details"]) == "request_rate_limited" && strings.Contains(fmt.Sprint(l["response_flags"]), "RL") {
				got++
			} else {
				bad = fmt.Sprint(l)
			}
		}
		if bad != "" {
			e.fatalf(t, "%s: a 429 for %s in the access log without response_flags RL and response_code_details request_rate_limited: %s", e.name, rlLimitedHost, bad)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			e.fatalf(t, "%s: %d rate limited lines (429, RL, request_rate_limited) in the access log after 20 s, want %d", e.name, got, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkAdmissionLog checks the access log: e.admission429 lines for the
// plugin's 429s to GET /hold, with no upstream_host and without the rate
// limit filter's response_flags RL (docs/deployment.md). It waits up to
// 20 s for Envoy to flush the log.
func (e *rlEnvoy) checkAdmissionLog(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, example := 0, ""
		for _, l := range rlAccessLog(e.p.Log()) {
			if fmt.Sprint(l["path"]) != "/hold" || fmt.Sprint(l["response_code"]) != "429" {
				continue
			}
			if h := fmt.Sprint(l["upstream_host"]); (h != "-" && h != "" && h != "<nil>") || strings.Contains(fmt.Sprint(l["response_flags"]), "RL") {
				e.fatalf(t, "%s: the plugin's 429 in the access log with upstream_host %q and response_flags %q; want no upstream and no RL: %v", e.name, h, l["response_flags"], l)
			}
			got++
			example = fmt.Sprintf("response_code_details %q, response_flags %q, upstream_host %v", l["response_code_details"], l["response_flags"], l["upstream_host"])
		}
		if got == e.admission429 {
			t.Logf("%s: the plugin's 429s in the access log: %d, e.g. %s", e.name, got, example)
			return
		}
		if time.Now().After(deadline) {
			e.fatalf(t, "%s: %d lines for the plugin's 429 to /hold in the access log after 20 s, want %d", e.name, got, e.admission429)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// rlAccessLog returns the JSON access log lines of an Envoy log.
func rlAccessLog(log string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(log, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["response_code"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// rlResult is what a client saw.
type rlResult struct {
	status                  int
	ratelimited, retryAfter string
	// xLimit, xRemaining and xReset are the X-RateLimit-* headers
	// (enable_x_ratelimit_headers: DRAFT_VERSION_03).
	xLimit, xRemaining, xReset string
	err                        error
}

// xHeaders formats the X-RateLimit-* headers for messages.
func (r rlResult) xHeaders() string {
	return fmt.Sprintf("X-RateLimit-Limit %q, X-RateLimit-Remaining %q, X-RateLimit-Reset %q", r.xLimit, r.xRemaining, r.xReset)
}

func rlSend(c *http.Client, base, host, path string) rlResult {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return rlResult{err: err}
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return rlResult{err: err}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return rlResult{
		status:      resp.StatusCode,
		ratelimited: resp.Header.Get("X-Envoy-Ratelimited"),
		retryAfter:  resp.Header.Get("Retry-After"),
		xLimit:      resp.Header.Get("X-RateLimit-Limit"),
		xRemaining:  resp.Header.Get("X-RateLimit-Remaining"),
		xReset:      resp.Header.Get("X-RateLimit-Reset"),
	}
}

// rlHoldUpstream is the e2e echo upstream, except that GET /hold waits
// until the test releases it (at most rlHoldWait): the slow requests
// that keep admission slots taken.
type rlHoldUpstream struct {
	echo http.Handler
	mu   sync.Mutex
	gate chan struct{}
	held int
}

func newRlHoldUpstream() *rlHoldUpstream {
	g := make(chan struct{})
	close(g)
	return &rlHoldUpstream{echo: wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, 16<<20), gate: g}
}

func (u *rlHoldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/hold" {
		u.echo.ServeHTTP(w, r)
		return
	}
	u.mu.Lock()
	u.held++
	g := u.gate
	u.mu.Unlock()
	select {
	case <-g:
	case <-r.Context().Done():
	case <-time.After(rlHoldWait):
	}
	io.WriteString(w, "released\n")
}

// arm makes the next /hold requests wait; release lets them go.
func (u *rlHoldUpstream) arm() (release func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.held = 0
	g := make(chan struct{})
	u.gate = g
	return sync.OnceFunc(func() { close(g) })
}

func (u *rlHoldUpstream) heldNow() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.held
}

// rlHoldBurst sends rlHoldClients concurrent GET /hold to each Envoy at
// once, waits until the upstream holds the requests the admission caps let
// through and every other request has its answer, then releases the held
// ones. Each Envoy must admit exactly rlMaxInflight and answer the rest
// with the plugin's 429 with Retry-After (not Envoy's rate limit 429).
func rlHoldBurst(t *testing.T, c *http.Client, envoys []*rlEnvoy, up *rlHoldUpstream) {
	t.Helper()
	release := up.arm()
	defer release()
	res := make([][]rlResult, len(envoys))
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i, e := range envoys {
		res[i] = make([]rlResult, rlHoldClients)
		for j := range rlHoldClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i][j] = rlSend(c, e.base, rlFreeHost, "/hold")
				answered.Add(1)
			}()
		}
	}
	wantHeld := len(envoys) * rlMaxInflight
	wantAnswered := len(envoys) * (rlHoldClients - rlMaxInflight)
	deadline := time.Now().Add(rlHoldWait - 5*time.Second)
	for int(answered.Load()) < wantAnswered || up.heldNow() < wantHeld {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	held, early := up.heldNow(), int(answered.Load())
	release()
	wg.Wait()
	if held != wantHeld || early != wantAnswered {
		t.Fatalf("%d concurrent GET /hold to each of %d Envoys (admission.max_inflight %d): the upstream held %d and %d were answered while it held them; want %d held and %d answered",
			rlHoldClients, len(envoys), rlMaxInflight, held, early, wantHeld, wantAnswered)
	}
	for i, e := range envoys {
		n200, n429 := 0, 0
		for j, r := range res[i] {
			switch {
			case r.err != nil:
				e.fatalf(t, "%s: GET /hold %d: %v", e.name, j, r.err)
			case r.status == http.StatusOK:
				n200++
			case r.status == http.StatusTooManyRequests && r.ratelimited == "":
				if secs, err := strconv.Atoi(r.retryAfter); err != nil || secs < 1 {
					e.fatalf(t, "%s: the plugin's 429 has Retry-After %q, want a positive integer", e.name, r.retryAfter)
				}
				n429++
			default:
				e.fatalf(t, "%s: GET /hold %d: got %d (x-envoy-ratelimited %q), want 200 or the plugin's 429", e.name, j, r.status, r.ratelimited)
			}
		}
		t.Logf("%s: %d concurrent held requests: %d × 200, %d × 429 with Retry-After (admission.max_inflight %d)", e.name, rlHoldClients, n200, n429, rlMaxInflight)
		if n200 != rlMaxInflight || n429 != rlHoldClients-rlMaxInflight {
			e.fatalf(t, "%s: %d × 200 and %d × 429, want %d and %d", e.name, n200, n429, rlMaxInflight, rlHoldClients-rlMaxInflight)
		}
		e.admission429 += n429
		e.checkAdmissionLog(t)
	}
}
