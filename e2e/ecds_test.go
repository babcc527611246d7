package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	extensionv3 "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	typesv3 "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/internal/plugintest"
)

// The tests of this file change the plugin's configuration while Envoy
// runs, through Envoy's extension config discovery (ECDS): from the file
// that envoy/envoy-ecds.yaml watches, and from a control plane. Each runs
// its own Envoy (E2E_ENVOY=1) with two workers under a paced load, and
// logs its figures.

// ecdsBootstrap is the shipped bootstrap whose wasm filter is configured
// by ECDS from a watched file (envoy/ecds/wafguard.yaml).
const ecdsBootstrap = "../envoy/envoy-ecds.yaml"

// Names in Envoy's /stats of these tests' Envoy. The plugin's gauges carry
// the shipped metric_labels ({"env": "prod"}).
const (
	// ecdsStats is the prefix of the ECDS counters of the filter named
	// wafguard (config_reload, config_fail, and the subscription's
	// update_* counters).
	ecdsStats     = "extension_config_discovery.http_filter.wafguard."
	configInfo    = "wasmcustom.waf_filter.config_info_env=prod_config="
	inflightGauge = "wasmcustom.wafguard_admission_inflight"
	vmsActive     = "wasm.envoy.wasm.runtime.v8.active"
	vmsCreated    = "wasm.envoy.wasm.runtime.v8.created"
	vmStats       = `^wasm\.envoy\.wasm\.runtime\.v8\.(active|created)$`
	heapGauge     = "wasmcustom.wafguard_memory_heap_live_bytes"
)

// Bounds of these tests, for a busy 2-core CI machine.
const (
	// enforceBound is how long a push may take until every worker
	// enforces it. Each push starts the plugin in a fresh VM on Envoy's
	// main thread first, which compiles the whole CRS: 9 to 25 s
	// measured on a 2-core machine shared with other work.
	enforceBound = 60 * time.Second
	// rssGrowth and heapGrowth are how much the RSS and the plugin's live
	// heap (wafguard_memory_heap_live_bytes, summed over the VMs) may grow
	// from the first push of a new rule set to the last. Measured with 8
	// pushes: RSS +4 MiB, heap +0. A VM that kept every rule set it was
	// given grew 10-14 MiB of RSS and 13 MiB of heap a push; gauges that
	// counted the configuration canary's VM grew 5 MiB of heap a push.
	rssGrowth  = 24 << 20
	heapGrowth = 8 << 20
)

// canaryHeader of the load: a configuration with canaryRule(v) answers
// 418 to requests that carry the value v.
const ecdsCanary = "X-Ecds-Canary"

// canaryRule is a rule that answers 418 to a request whose ecdsCanary
// header is v, with id n.
func canaryRule(v string, n int) string {
	return fmt.Sprintf(`SecRule REQUEST_HEADERS:%s "@streq %s" "id:%d,phase:1,deny,status:418,log"`, ecdsCanary, v, n)
}

// pluginJSON is the shipped plugin configuration with a process-wide cap
// of maxInflight, and extra appended to its rule set.
func pluginJSON(t *testing.T, shipped string, maxInflight int, extra ...string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(shipped), &m); err != nil {
		t.Fatal(err)
	}
	dm := m["directives_map"].(map[string]any)
	set := m["default_directives"].(string)
	dm[set] = append(dm[set].([]any), toAny(extra)...)
	m["admission"].(map[string]any)["max_inflight"] = maxInflight
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// withConfiguration returns a copy of c whose plugin configuration is js,
// at version v.
func withConfiguration(t *testing.T, c *envoy.ExtensionConfig, v, js string) *envoy.ExtensionConfig {
	t.Helper()
	n := c.Clone()
	n.Version = v
	if err := n.EditPlugin(func(pc *wasmv3.PluginConfig) error { return envoy.SetConfiguration(pc, js) }); err != nil {
		t.Fatal(err)
	}
	return n
}

// shippedConfiguration returns the plugin configuration of an extension
// config file.
func shippedConfiguration(t *testing.T, c *envoy.ExtensionConfig) string {
	t.Helper()
	var js string
	if err := c.EditPlugin(func(pc *wasmv3.PluginConfig) error {
		var err error
		js, err = envoy.Configuration(pc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return js
}

// launchFrom starts Envoy as s says (a shipped bootstrap, its module,
// workers, upstream, base ID, filter configuration folder), as launch
// does, with exact connection balance, and copies its log to log.
func launchFrom(t *testing.T, s envoy.Setup, edit func(b *bootstrapv3.Bootstrap) error, log io.Writer) *envoy.Launched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), envoyStartTimeout)
	defer cancel()
	s.Wait, s.Log = envoyStartTimeout, log
	s.Edit = func(b *bootstrapv3.Bootstrap) error {
		balanced(b)
		if edit != nil {
			return edit(b)
		}
		return nil
	}
	e, err := envoy.Launch(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// lineKeeper keeps the lines written to it that contain one of its
// words: Envoy's log under load is mostly access log, which the
// process's own tail would let the lines that matter scroll out of.
type lineKeeper struct {
	*envoy.LineWriter
	mu    sync.Mutex
	lines []string
}

func newLineKeeper(words ...string) *lineKeeper {
	k := &lineKeeper{}
	k.LineWriter = envoy.NewLineWriter(func(l string) {
		for _, w := range words {
			if strings.Contains(l, w) {
				k.mu.Lock()
				k.lines = append(k.lines, l)
				k.mu.Unlock()
				return
			}
		}
	})
	return k
}

// find returns the kept lines that contain every one of words.
func (k *lineKeeper) find(words ...string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, l := range k.lines {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// waitLine waits until a kept line holds every one of words.
func (k *lineKeeper) waitLine(d time.Duration, words ...string) string {
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if l := k.find(words...); len(l) > 0 {
			return l[len(l)-1]
		}
		if time.Now().After(end) {
			return ""
		}
	}
}

// started returns when, after t0, the plugin logged its start with the
// configuration digest, and on which thread: one line for each VM that
// started it (Envoy's check of the configuration, the main thread's VM,
// each worker's), as "+1.234s@thread".
func (k *lineKeeper) started(digest string, t0 time.Time) []string {
	var out []string
	for _, l := range k.find("waf: started", "configuration "+digest) {
		// [2026-01-02 15:04:05.000][thread][info][wasm] ...
		parts := strings.SplitN(strings.TrimPrefix(l, "["), "][", 3)
		if len(parts) < 3 {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02 15:04:05.000", parts[0], time.Local)
		if err != nil {
			continue
		}
		out = append(out, fmt.Sprintf("+%.3fs@%s", at.Sub(t0).Seconds(), parts[1]))
	}
	return out
}

// adminStats returns the counters and gauges of Envoy's /stats whose
// names match the regex filter.
func adminStats(t *testing.T, admin, filter string) map[string]int {
	t.Helper()
	m, err := readStats(admin, filter)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readStats is adminStats for any goroutine.
func readStats(admin, filter string) (map[string]int, error) {
	return envoy.AdminStats(&http.Client{Timeout: 60 * time.Second}, admin, filter)
}

// stat returns one counter or gauge of /stats, -1 when it is not there.
func stat(t *testing.T, admin, name string) int {
	t.Helper()
	n, ok := adminStats(t, admin, "^"+regexp.QuoteMeta(name)+"$")[name]
	if !ok {
		return -1
	}
	return n
}

// waitStat waits until a stat satisfies ok, and returns its last value.
func waitStat(t *testing.T, admin, name string, d time.Duration, ok func(int) bool) (int, bool) {
	t.Helper()
	v := -1
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		v = stat(t, admin, name)
		if ok(v) {
			return v, true
		}
		if time.Now().After(end) {
			return v, false
		}
	}
}

// shot is one request of the paced load.
type shot struct {
	conn   int
	kind   string // benign, attack, canary
	value  string // the canary header's value
	sent   time.Time
	took   time.Duration
	status int
	err    error
}

// pacedLoad sends, every tick, one request on each of its connections
// (persistent, one client each, so that with exact balance they spread
// evenly over the workers), in the order canary, benign, canary, attack
// per connection, until stopped or for at most max. It records every
// answer.
type pacedLoad struct {
	base  string
	tick  time.Duration
	conns int

	mu     sync.Mutex
	canary string // the value the canary requests carry now
	shots  []shot
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startLoad(base string, conns int, tick, max time.Duration) *pacedLoad {
	l := &pacedLoad{base: base, tick: tick, conns: conns, canary: "none", stop: make(chan struct{})}
	end := time.Now().Add(max)
	for c := range conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
			defer cl.CloseIdleConnections()
			kinds := []string{"canary", "benign", "canary", "attack"}
			next := time.Now()
			for i := 0; time.Now().Before(end); i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(time.Until(next)):
				}
				l.mu.Lock()
				value := l.canary
				l.mu.Unlock()
				s := l.one(cl, c, kinds[(i+c)%len(kinds)], value)
				l.mu.Lock()
				l.shots = append(l.shots, s)
				l.mu.Unlock()
				// The next tick that has not passed: a slow answer
				// skips ticks instead of bunching them.
				for next = next.Add(tick); time.Until(next) < 0; next = next.Add(tick) {
				}
			}
		}()
	}
	return l
}

func (l *pacedLoad) one(cl *http.Client, conn int, kind, value string) shot {
	path := "/anything/ecds?q=hello"
	if kind == "attack" {
		path = "/anything/ecds?q=" + url.QueryEscape("<script>alert(1)</script>")
	}
	req, _ := http.NewRequest(http.MethodGet, l.base+path, nil)
	if kind == "canary" {
		req.Header.Set(ecdsCanary, value)
	}
	s := shot{conn: conn, kind: kind, value: value, sent: time.Now()}
	resp, err := cl.Do(req)
	s.took = time.Since(s.sent)
	if err != nil {
		s.err = err
		return s
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.status = resp.StatusCode
	return s
}

// setCanary makes the canary requests carry v from now on.
func (l *pacedLoad) setCanary(v string) {
	l.mu.Lock()
	l.canary = v
	l.mu.Unlock()
}

// halt stops the load and waits for its requests to end.
func (l *pacedLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// since returns the answers to requests sent at or after t0.
func (l *pacedLoad) since(t0 time.Time) []shot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return from(l.shots, t0, func(s shot) time.Time { return s.sent })
}

// from returns the items of xs whose time (at) is t0 or later.
func from[T any](xs []T, t0 time.Time, at func(T) time.Time) []T {
	var out []T
	for _, x := range xs {
		if !at(x).Before(t0) {
			out = append(out, x)
		}
	}
	return out
}

// enforced reports, for the canary value v pushed at t0, how long after
// t0 each connection's canary requests got 418 for good: the send time of
// the first 418 after the last other answer. ok is false while a
// connection has not answered 418 last, or has sent no canary yet.
func (l *pacedLoad) enforced(t0 time.Time, v string) (per []time.Duration, ok bool) {
	per = make([]time.Duration, l.conns)
	last := make([]*shot, l.conns)
	firstOK := make([]time.Time, l.conns)
	for _, s := range l.since(t0) {
		if s.kind != "canary" || s.value != v {
			continue
		}
		s := s
		last[s.conn] = &s
		if s.status != 418 {
			firstOK[s.conn] = time.Time{}
		} else if firstOK[s.conn].IsZero() {
			firstOK[s.conn] = s.sent
		}
	}
	for c := range l.conns {
		if last[c] == nil || last[c].status != 418 {
			return nil, false
		}
		per[c] = firstOK[c].Sub(t0)
	}
	return per, true
}

// waitEnforced waits until every connection enforces the canary value v
// pushed at t0, and returns the slowest connection's time and all.
func (l *pacedLoad) waitEnforced(t *testing.T, t0 time.Time, v string, d time.Duration) (time.Duration, []time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if per, ok := l.enforced(t0, v); ok {
			return slices.Max(per), per
		}
		if time.Now().After(end) {
			t.Fatalf("canary %q not enforced on every connection %s after the push", v, d)
		}
	}
}

// tally counts answers by kind and status, and lists the unexpected ones:
// a benign request not answered 200, an attack not answered 403 (served
// unprotected, or refused for another reason), a canary answered anything
// but 200 or 418, any transport error.
type tally struct {
	counts     map[string]int // "kind status"
	unexpected []shot
	maxTook    time.Duration
	total      int
}

func count(shots []shot) tally {
	tl := tally{counts: map[string]int{}}
	for _, s := range shots {
		tl.total++
		tl.counts[fmt.Sprintf("%s %d", s.kind, s.status)]++
		tl.maxTook = max(tl.maxTook, s.took)
		bad := s.err != nil
		switch s.kind {
		case "benign":
			bad = bad || s.status != 200
		case "attack":
			bad = bad || s.status != 403
		case "canary":
			bad = bad || (s.status != 200 && s.status != 418)
		}
		if bad {
			tl.unexpected = append(tl.unexpected, s)
		}
	}
	return tl
}

func (tl tally) String() string {
	keys := make([]string, 0, len(tl.counts))
	for k := range tl.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, tl.counts[k])
	}
	return fmt.Sprintf("%d answers (%s), slowest %s, %d unexpected", tl.total, strings.Join(parts, ", "), tl.maxTook.Round(time.Millisecond), len(tl.unexpected))
}

// check fails the test for each unexpected answer (the first few).
func (tl tally) check(t *testing.T, what string) {
	t.Helper()
	for i, s := range tl.unexpected {
		if i == 5 {
			t.Errorf("%s: %d more unexpected answers", what, len(tl.unexpected)-5)
			break
		}
		t.Errorf("%s: %s request (canary %q) on connection %d sent at %s: status %d, error %v", what, s.kind, s.value, s.conn, s.sent.Format("15:04:05.000"), s.status, s.err)
	}
}

// percentile returns the p-th percentile (0-100) of the durations.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// latencies returns how long the answers took.
func latencies(shots []shot) []time.Duration {
	out := make([]time.Duration, len(shots))
	for i, s := range shots {
		out[i] = s.took
	}
	return out
}

// copyModule copies the module to dir/name and returns its path.
func copyModule(t *testing.T, data []byte, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readModule reads the built plugin once, so that a test's copies of it
// are the same bytes even when it is rebuilt meanwhile.
func readModule(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(plugintest.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// digest is the plugin's name for a configuration (its start line, the
// config_info gauge).
func digest(js string) string { return filter.ConfigDigest([]byte(js)) }

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// TestEnvoy_ecdsFile runs envoy/envoy-ecds.yaml as shipped (its module and
// addresses localized, its watched directory a folder of the test's
// own), with two workers and the shipped filter configuration at a
// process cap of 4, under a paced load of 4 requests per 50 ms over 4
// connections (2 per worker): benign requests, XSS attacks and canary
// requests. It changes the configuration by moving a new file into the
// watched directory, as an operator would:
//
//   - a new rule (a canary answering 418): the time until every
//     connection, so every worker, enforces it, and when each VM started
//     the new configuration; config_info shows the new digest at 1 and
//     the old at 0;
//   - a rule set that does not compile, then an unknown key: Envoy
//     rejects each (its update_rejected counter rises), logs the plugin's
//     critical line, and the old rules stay: no 5xx, no attack passes;
//   - the same bad file again: Envoy skips it, counting it a success;
//   - E2E_ECDS_PUSHES (default 5) more new rules, each enforced before the
//     next, with the RSS and the plugin's heap after each.
//
// At the end the load stops, the shared-data count is back at 0, and a
// burst of 12 requests at once is admitted exactly up to the cap.
func TestEnvoy_ecdsFile(t *testing.T) {
	needEnvoy(t)
	const (
		limit   = 4
		workers = 2
		conns   = 4
		tick    = 50 * time.Millisecond
	)
	pushes := 5
	if v, err := strconv.Atoi(os.Getenv("E2E_ECDS_PUSHES")); err == nil && v > 0 {
		pushes = v
	}
	up := startUpstream(t, time.Second)
	logs := newLineKeeper("][critical]", "][error]", "][warning]", "waf: started")
	shipped, err := envoy.LoadExtensionConfig(filepath.Join(envoy.ExtensionConfigDir(ecdsBootstrap), "wafguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := shippedConfiguration(t, shipped)
	// The shipped rules with the cap of the test, from the start.
	cur := pluginJSON(t, base, limit)
	dir := t.TempDir()
	data, err := withConfiguration(t, shipped, "1", cur).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wafguard.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	e := launchFrom(t, envoy.Setup{Bootstrap: ecdsBootstrap, ExtensionConfigs: dir, Module: plugintest.Path(), Upstream: up.addr, Workers: workers, BaseID: 400 + os.Getpid()%1000}, nil, logs)
	file := filepath.Join(e.ExtensionConfigDir, "wafguard.yaml")
	staged, err := envoy.LoadExtensionConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	admin := e.AdminURL()
	t.Logf("Envoy %s from %s, %d workers: serving after %s; the ECDS stats: %v", e.Version, ecdsBootstrap, workers, e.Serving.Round(time.Millisecond), adminStats(t, admin, "^"+regexp.QuoteMeta(ecdsStats)))
	if v := stat(t, admin, configInfo+digest(cur)); v != 1 {
		t.Fatalf("config_info of the first configuration %s: %d, want 1", digest(cur), v)
	}

	push := func(version, js string) time.Time {
		t.Helper()
		data, err := withConfiguration(t, staged, version, js).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if err := envoy.ReplaceFile(file, data); err != nil {
			t.Fatal(err)
		}
		return t0
	}
	load := startLoad("http://"+e.Listen, conns, tick, 3*time.Minute+time.Duration(pushes)*time.Minute)
	defer load.halt()
	time.Sleep(time.Second)
	rss0, _ := e.RSS()
	heap0 := stat(t, admin, heapGauge)

	// A new rule.
	load.setCanary("v1")
	prev := cur
	cur = pluginJSON(t, base, limit, canaryRule("v1", 1000101))
	t0 := push("v1", cur)
	took, per := load.waitEnforced(t, t0, "v1", enforceBound)
	time.Sleep(time.Second)
	t.Logf("push of a new rule: enforced on every connection %s after the file moved in (per connection %v); the VMs started it at %v",
		took.Round(time.Millisecond), roundAll(per), logs.started(digest(cur), t0))
	if v, ok := waitStat(t, admin, configInfo+digest(prev), 10*time.Second, func(v int) bool { return v == 0 }); !ok {
		t.Errorf("config_info of the old configuration %s: %d, want 0", digest(prev), v)
	}
	if v := stat(t, admin, configInfo+digest(cur)); v != 1 {
		t.Errorf("config_info of the new configuration %s: %d, want 1", digest(cur), v)
	}
	tl := count(load.since(t0))
	tl.check(t, "during the push of a new rule")
	t.Logf("answers from the push until enforced and config_info checked: %s", tl)

	// Bad pushes: each rejected, the old rules stay.
	bad := []struct{ name, js, want string }{
		{"a rule set that does not compile", pluginJSON(t, base, limit, canaryRule("v1", 1000101), `SecRule ARGS "@rx (" "id:1000102,phase:2,deny"`), `directives_map["crs"]`},
		{"an unknown key", strings.Replace(cur, `"admission"`, `"admision_typo": {}, "admission"`, 1), `unknown key "admision_typo"`},
	}
	counters := func() map[string]int { return adminStats(t, admin, "^"+regexp.QuoteMeta(ecdsStats)) }
	for _, b := range bad {
		before := counters()
		tb := push("bad", b.js)
		n, ok := waitStat(t, admin, ecdsStats+"update_rejected", enforceBound, func(v int) bool { return v > before[ecdsStats+"update_rejected"] })
		if !ok {
			t.Errorf("%s: update_rejected stayed at %d", b.name, n)
		}
		rejectedAfter := time.Since(tb)
		line := logs.waitLine(5*time.Second, "][critical][wasm]", b.want)
		if line == "" {
			t.Errorf("%s: no critical wasm line naming %s; kept lines:\n%s", b.name, b.want, strings.Join(logs.find(""), "\n"))
		}
		time.Sleep(2 * time.Second)
		tl := count(load.since(tb))
		tl.check(t, b.name)
		t.Logf("%s: rejected %s after the file moved in; the plugin logged %q, Envoy %q; the old rules in force: %s",
			b.name, rejectedAfter.Round(time.Millisecond), criticalText(line), criticalText(logs.waitLine(time.Second, "Filesystem config update rejected")), tl)
		t.Logf("%s: ECDS counters that changed: %s", b.name, changed(before, counters(), ecdsStats))
	}
	// The same bad file again: Envoy has seen its hash, and skips it.
	before := counters()
	tb := push("bad", bad[1].js)
	time.Sleep(3 * time.Second)
	after := counters()
	tl = count(load.since(tb))
	tl.check(t, "the same bad file again")
	if after[ecdsStats+"update_rejected"] != before[ecdsStats+"update_rejected"] {
		t.Errorf("the same bad file again: update_rejected %d -> %d, want it unchanged (Envoy skips a configuration it has seen)", before[ecdsStats+"update_rejected"], after[ecdsStats+"update_rejected"])
	}
	t.Logf("the same bad file again: ECDS counters that changed: %s; the old rules in force: %s", changed(before, after, ecdsStats), tl)
	t.Logf("what Envoy reports as in force now: /config_dump's ECDS version_info %q, the plugin's config_info gauge at 1 for %s (the configuration of version %q)",
		ecdsDumpVersion(t, admin), digest(cur), "v1")

	// More pushes of new rules, each enforced before the next.
	rss := []int64{rss0}
	heap := []int{heap0}
	var tooks []time.Duration
	tn := time.Now()
	for i := range pushes {
		v := fmt.Sprintf("n%d", i)
		load.setCanary(v)
		cur = pluginJSON(t, base, limit, canaryRule(v, 1000200+i))
		t0 := push(v, cur)
		took, _ := load.waitEnforced(t, t0, v, enforceBound)
		tooks = append(tooks, took)
		time.Sleep(time.Second)
		r, _ := e.RSS()
		rss = append(rss, r)
		heap = append(heap, stat(t, admin, heapGauge))
		t.Logf("push %d: enforced after %s, RSS %s, the plugin's heap (all VMs) %s", i+1, took.Round(time.Millisecond), mib(r), mib(int64(heap[len(heap)-1])))
	}
	tl = count(load.since(tn))
	tl.check(t, fmt.Sprintf("%d pushes", pushes))
	load.halt()
	t.Logf("%d pushes of a new rule: enforced everywhere after %s (median), %s (slowest); %s", pushes, percentile(tooks, 50).Round(time.Millisecond), slices.Max(tooks).Round(time.Millisecond), tl)
	t.Logf("RSS before the pushes and after each: %s; the plugin's heap: %s", mibs(rss), mibs(toInt64(heap)))
	all := count(load.since(time.Time{}))
	t.Logf("the whole run: %s", all)
	if grew := rss[len(rss)-1] - rss[1]; grew > rssGrowth {
		t.Errorf("RSS grew by %s from the first of %d pushes to the last, want at most %s", mib(grew), pushes, mib(rssGrowth))
	}
	if grew := heap[len(heap)-1] - heap[1]; grew > heapGrowth {
		t.Errorf("%s grew by %s from the first of %d pushes to the last, want at most %s: each VM keeps what it compiled for a replaced configuration, or a VM that is gone still counts", heapGauge, mib(int64(grew)), pushes, mib(heapGrowth))
	}

	// The admission count is back at 0, and the cap holds exactly.
	if v, ok := waitStat(t, admin, inflightGauge, 10*time.Second, func(v int) bool { return v == 0 }); !ok {
		t.Errorf("%s: %d with no request in flight, want 0", inflightGauge, v)
	}
	codes := map[int]int{}
	for _, a := range together(t, 12, func(i int) string { return fmt.Sprintf("http://%s/slow/%d", e.Listen, i) }) {
		codes[a.code]++
	}
	if p := up.peak.Load(); p != limit || codes[200] < limit || codes[429] == 0 || codes[200]+codes[429] != 12 {
		t.Errorf("12 requests at once after the pushes: %v, the upstream held at most %d at once; want the cap %d there exactly and the rest 429", codes, p, limit)
	}
	if v, ok := waitStat(t, admin, inflightGauge, 10*time.Second, func(v int) bool { return v == 0 }); !ok {
		t.Errorf("%s after the burst: %d, want 0", inflightGauge, v)
	}
	t.Logf("after %d configurations: 12 requests at once got %v, the upstream held at most %d (the cap %d); %s back at 0", pushes+2, codes, up.peak.Load(), limit, inflightGauge)

	// An empty configuration ({}) is the plugin's defaults, not a refusal:
	// the whole CRS blocks, the operator's own rules (the canary) are gone.
	before = counters()
	t0 = push("empty", "{}")
	// Without metric_labels the gauge carries no env label.
	emptyInfo := "wasmcustom.waf_filter.config_info_config=" + digest("{}")
	if _, ok := waitStat(t, admin, emptyInfo, enforceBound, func(v int) bool { return v >= 1 }); !ok {
		t.Fatalf("an empty configuration: %s never reached 1; ECDS counters that changed: %s", emptyInfo, changed(before, counters(), ecdsStats))
	}
	// Each request on a new connection: with the exact balance they take
	// turns over the workers, and 4 in a row without the canary rule
	// cover both. Benign and attack answers must be right throughout.
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	lastCanary := fmt.Sprintf("n%d", pushes-1) // the last push's canary rule answered it 418
	var benign, attack, canary shot
	for gone, end := 0, time.Now().Add(enforceBound); gone < 4; time.Sleep(50 * time.Millisecond) {
		benign, attack, canary = load.one(cl, 0, "benign", ""), load.one(cl, 0, "attack", ""), load.one(cl, 0, "canary", lastCanary)
		if benign.status != 200 || attack.status != 403 {
			t.Errorf("after an empty configuration: benign %d (%v), attack %d (%v); want 200 and 403 (the default CRS)", benign.status, benign.err, attack.status, attack.err)
			break
		}
		if gone++; canary.status != 200 {
			gone = 0
		}
		if time.Now().After(end) {
			t.Errorf("after an empty configuration: the canary rule still answers (%d, %v) %s after the push", canary.status, canary.err, enforceBound)
			break
		}
	}
	emptyTook := time.Since(t0)
	after = counters()
	if after[ecdsStats+"update_success"] != before[ecdsStats+"update_success"]+1 || after[ecdsStats+"update_rejected"] != before[ecdsStats+"update_rejected"] {
		t.Errorf("an empty configuration: ECDS counters that changed: %s; want it accepted", changed(before, after, ecdsStats))
	}
	t.Logf("an empty configuration: accepted, in force after %s (%s at 1), the defaults: benign %d, attack %d, canary %d",
		emptyTook.Round(time.Millisecond), emptyInfo, benign.status, attack.status, canary.status)
}

// ecdsDumpVersion returns the version_info of the ECDS filter
// configurations in Envoy's /config_dump.
func ecdsDumpVersion(t *testing.T, admin string) string {
	t.Helper()
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Get(admin + "/config_dump?resource=ecds_filters")
	if err != nil {
		t.Fatalf("/config_dump: %v", err)
	}
	defer resp.Body.Close()
	var dump struct {
		Configs []struct {
			VersionInfo string `json:"version_info"`
		} `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&dump); err != nil {
		t.Fatalf("/config_dump: %v", err)
	}
	var v []string
	for _, c := range dump.Configs {
		v = append(v, c.VersionInfo)
	}
	return strings.Join(v, ",")
}

// changed lists the stats that differ between two samples, their names
// without the prefix trim (the time of the last update left out).
func changed(before, after map[string]int, trim string) string {
	var out []string
	for k, v := range after {
		if before[k] != v && !strings.HasSuffix(k, ".update_time") {
			out = append(out, fmt.Sprintf("%s %d -> %d", strings.TrimPrefix(k, trim), before[k], v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func toInt64(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// criticalText is the plugin's message in an Envoy log line.
func criticalText(line string) string {
	if i := strings.Index(line, "wasm log"); i >= 0 {
		return strings.TrimSpace(line[i:])
	}
	return line
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, v := range d {
		out[i] = v.Round(time.Millisecond)
	}
	return out
}

func mibs(b []int64) string {
	parts := make([]string, len(b))
	for i, v := range b {
		parts[i] = strconv.FormatInt(v>>20, 10)
	}
	return strings.Join(parts, " ") + " MiB"
}

// controlPlane serves the wafguard filter's configuration over Envoy's
// ExtensionConfigDiscoveryService (go-control-plane's snapshot cache and
// server) on a loopback port, and records every request Envoy sends
// (ACKs, and NACKs with their error_detail).
type controlPlane struct {
	addr  string
	node  string
	cache cachev3.SnapshotCache

	mu       sync.Mutex
	requests []cpRequest
}

// cpRequest is one discovery request Envoy sent.
type cpRequest struct {
	at      time.Time
	version string // the version Envoy last accepted
	nonce   string
	err     string // the NACK's error_detail message, empty for an ACK
}

func startControlPlane(t *testing.T, node string) *controlPlane {
	t.Helper()
	cp := &controlPlane{node: node, cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, cp.cache, serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			cp.mu.Lock()
			cp.requests = append(cp.requests, cpRequest{at: time.Now(), version: req.GetVersionInfo(), nonce: req.GetResponseNonce(), err: req.GetErrorDetail().GetMessage()})
			cp.mu.Unlock()
			return nil
		},
	})
	gs := grpc.NewServer()
	extensionv3.RegisterExtensionConfigDiscoveryServiceServer(gs, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp.addr = ln.Addr().String()
	go gs.Serve(ln)
	t.Cleanup(func() {
		gs.Stop()
		cancel()
	})
	return cp
}

// push makes the control plane serve c as version v, and returns when.
func (cp *controlPlane) push(t *testing.T, v string, c *corev3.TypedExtensionConfig) time.Time {
	t.Helper()
	snap, err := cachev3.NewSnapshot(v, map[resourcev3.Type][]typesv3.Resource{resourcev3.ExtensionConfigType: {c}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cp.cache.SetSnapshot(context.Background(), cp.node, snap); err != nil {
		t.Fatal(err)
	}
	return t0
}

// since returns the requests Envoy sent at or after t0.
func (cp *controlPlane) since(t0 time.Time) []cpRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return from(cp.requests, t0, func(r cpRequest) time.Time { return r.at })
}

// wait waits until Envoy sent, at or after t0, a request that ok accepts.
func (cp *controlPlane) wait(t0 time.Time, d time.Duration, ok func(cpRequest) bool) (cpRequest, bool) {
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		for _, r := range cp.since(t0) {
			if ok(r) {
				return r, true
			}
		}
		if time.Now().After(end) {
			return cpRequest{}, false
		}
	}
}

// pointAt makes every config_discovery filter of the bootstrap ask the
// control plane at addr over gRPC (cluster "xds", HTTP/2) instead of
// reading a file.
func pointAt(b *bootstrapv3.Bootstrap, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		return err
	}
	h2, err := anypb.New(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}},
	}})
	if err != nil {
		return err
	}
	b.StaticResources.Clusters = append(b.StaticResources.Clusters, &clusterv3.Cluster{
		Name:                 "xds",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "xds", Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}}}},
			}}}},
		}}},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": h2},
	})
	n, err := envoy.EditDiscoveredFilters(b, func(_ string, src *corev3.ExtensionConfigSource) error {
		src.ConfigSource = &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
				ApiType:             corev3.ApiConfigSource_GRPC,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices:        []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds"}}}},
			}},
		}
		return nil
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("no config_discovery filter in the bootstrap")
	}
	return err
}

// vmSample is the VM gauges and the admin's answer time at one moment.
type vmSample struct {
	at              time.Duration // since the push
	active, created int
	admin           time.Duration // how long /stats took to answer
}

// sampleVMs samples the VM stats every interval until stop is closed (a
// sample whose /stats failed has -1 for both).
func sampleVMs(admin string, t0 time.Time, interval time.Duration, stop <-chan struct{}) <-chan []vmSample {
	out := make(chan []vmSample, 1)
	go func() {
		var s []vmSample
		for {
			a := time.Now()
			m, err := readStats(admin, vmStats)
			if err != nil {
				m = map[string]int{vmsActive: -1, vmsCreated: -1}
			}
			s = append(s, vmSample{at: a.Sub(t0), active: m[vmsActive], created: m[vmsCreated], admin: time.Since(a)})
			select {
			case <-stop:
				out <- s
				return
			case <-time.After(interval):
			}
		}
	}()
	return out
}

// TestEnvoy_ecdsControlPlane runs envoy/envoy-ecds.yaml with its filter's
// config_discovery pointed at a control plane built here
// (go-control-plane's ExtensionConfigDiscoveryService over gRPC), two
// workers, under the paced load of TestEnvoy_ecdsFile:
//
//   - a new rule: the time until every connection enforces it;
//   - a rule set that does not compile: Envoy NACKs it, the control plane
//     sees the error_detail, and the old rules stay;
//   - a new module version with a new rule: the same bytes under another
//     file name, and a VM configuration of its own (the plugin reads
//     none), since Envoy keys its VMs by the module's bytes, not its
//     file: Envoy compiles the module again and starts new VMs. What the
//     load sees meanwhile, the time until the new VMs serve, the VM
//     counts and the RSS.
func TestEnvoy_ecdsControlPlane(t *testing.T) {
	needEnvoy(t)
	const (
		workers = 2
		conns   = 4
		tick    = 50 * time.Millisecond
	)
	up := startUpstream(t, 0)
	dir := t.TempDir()
	module := readModule(t)
	modA := copyModule(t, module, dir, "main.wasm")
	modB := copyModule(t, module, dir, "main-next.wasm")
	shipped, err := envoy.LoadExtensionConfig(filepath.Join(envoy.ExtensionConfigDir(ecdsBootstrap), "wafguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := shipped.SetModule(modA); err != nil {
		t.Fatal(err)
	}
	base := shippedConfiguration(t, shipped)
	b, _, err := envoy.LoadBootstrap(ecdsBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t, b.GetNode().GetId())
	cp.push(t, "1", withConfiguration(t, shipped, "1", base).Config)
	logs := newLineKeeper("][critical]", "][error]", "][warning]", "waf: started")
	e := launchFrom(t, envoy.Setup{Bootstrap: ecdsBootstrap, Module: modA, Upstream: up.addr, Workers: workers, BaseID: 600 + os.Getpid()%1000},
		func(b *bootstrapv3.Bootstrap) error { return pointAt(b, cp.addr) }, logs)
	admin := e.AdminURL()
	if r, ok := cp.wait(time.Time{}, 10*time.Second, func(r cpRequest) bool { return r.version == "1" && r.err == "" }); !ok {
		t.Fatalf("Envoy did not ACK version 1; requests: %v", cp.since(time.Time{}))
	} else {
		t.Logf("Envoy %s, %d workers, configured by the control plane at %s: serving after %s, version 1 ACKed %s after the start", e.Version, workers, cp.addr, e.Serving.Round(time.Millisecond), r.at.Sub(e.Started).Round(time.Millisecond))
	}
	load := startLoad("http://"+e.Listen, conns, tick, 6*time.Minute)
	defer load.halt()
	time.Sleep(time.Second)

	// A new rule.
	load.setCanary("v2")
	v2 := pluginJSON(t, base, 256, canaryRule("v2", 1000101))
	t0 := cp.push(t, "2", withConfiguration(t, shipped, "2", v2).Config)
	took, per := load.waitEnforced(t, t0, "v2", enforceBound)
	ack, _ := cp.wait(t0, 10*time.Second, func(r cpRequest) bool { return r.version == "2" && r.err == "" })
	time.Sleep(time.Second)
	t.Logf("push of a new rule: ACKed %s after the push, enforced on every connection after %s (per connection %v); the VMs started it at %v",
		ack.at.Sub(t0).Round(time.Millisecond), took.Round(time.Millisecond), roundAll(per), logs.started(digest(v2), t0))
	tl := count(load.since(t0))
	tl.check(t, "the push of a new rule")

	// A rule set that does not compile: NACKed.
	v3 := pluginJSON(t, base, 256, canaryRule("v2", 1000101), `SecRule ARGS "@rx (" "id:1000102,phase:2,deny"`)
	t0 = cp.push(t, "3", withConfiguration(t, shipped, "3", v3).Config)
	nack, ok := cp.wait(t0, enforceBound, func(r cpRequest) bool { return r.err != "" })
	if !ok {
		t.Fatalf("no NACK of version 3; requests since the push: %+v", cp.since(t0))
	}
	line := logs.waitLine(5*time.Second, "][critical][wasm]", `directives_map["crs"]`)
	if line == "" {
		t.Errorf("no critical wasm line naming the rule set; kept lines:\n%s", strings.Join(logs.find(""), "\n"))
	}
	time.Sleep(3 * time.Second)
	tl = count(load.since(t0))
	tl.check(t, "the NACKed push")
	t.Logf("a rule set that does not compile: NACKed %s after the push (the version Envoy names in it stays %q), error_detail %q; the plugin logged %q",
		nack.at.Sub(t0).Round(time.Millisecond), nack.version, nack.err, criticalText(line))
	t.Logf("what Envoy sent the control plane in the 3 s after the push: %s", cpTrace(cp.since(t0), t0))
	t.Logf("the old rules in force: %s", tl)
	if !strings.Contains(nack.err, "wafguard") {
		t.Errorf("the NACK's error_detail %q does not name the plugin", nack.err)
	}

	// A new module version and a new rule.
	load.setCanary("v4")
	rss0, _ := e.RSS()
	wasm0 := adminStats(t, admin, `^wasm\.`)
	next := shipped.Clone()
	if err := next.SetModule(modB); err != nil {
		t.Fatal(err)
	}
	if err := next.EditPlugin(func(pc *wasmv3.PluginConfig) error {
		c, err := anypb.New(wrapperspb.String("module main-next.wasm"))
		pc.GetVmConfig().Configuration = c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	v4 := pluginJSON(t, base, 256, canaryRule("v4", 1000104))
	before := load.since(time.Now().Add(-5 * time.Second))
	stop := make(chan struct{})
	t0 = time.Now()
	samples := sampleVMs(admin, t0, 500*time.Millisecond, stop)
	t0 = cp.push(t, "4", withConfiguration(t, next, "4", v4).Config)
	took, per = load.waitEnforced(t, t0, "v4", 3*time.Minute)
	ack, _ = cp.wait(t0, time.Minute, func(r cpRequest) bool { return r.version == "4" && r.err == "" })
	// The old VMs go once their configuration has no more streams.
	time.Sleep(5 * time.Second)
	close(stop)
	vs := <-samples
	during := load.since(t0)
	tl = count(during)
	tl.check(t, "the new module")
	rss1, _ := e.RSS()
	wasm1 := adminStats(t, admin, `^wasm\.`)
	lat0, lat := latencies(before), latencies(during)
	t.Logf("a new module: ACKed %s after the push, the new VMs serve (the new rule enforced on every connection) after %s (per connection %v); the VMs started it at %v",
		ack.at.Sub(t0).Round(time.Millisecond), took.Round(time.Millisecond), roundAll(per), logs.started(digest(v4), t0))
	t.Logf("a new module: latency in the 5 s before the push p50 %s p99 %s max %s; from the push to 5 s after the new VMs served p50 %s p99 %s max %s; %s",
		percentile(lat0, 50).Round(time.Millisecond), percentile(lat0, 99).Round(time.Millisecond), slices.Max(lat0).Round(time.Millisecond),
		percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond), slices.Max(lat).Round(time.Millisecond), tl)
	var slowAdmin time.Duration
	for _, s := range vs {
		slowAdmin = max(slowAdmin, s.admin)
	}
	t.Logf("a new module: VM samples since the push (active/created, /stats answer time): %s; the slowest /stats answer %s", vmTrace(vs), slowAdmin.Round(time.Millisecond))
	t.Logf("a new module: wasm stats that changed: %s", changed(wasm0, wasm1, ""))
	t.Logf("a new module: RSS %s before, %s 5 s after the new VMs served", mib(rss0), mib(rss1))
	if wasm1[vmsCreated]-wasm0[vmsCreated] < workers+1 {
		t.Errorf("VMs created: %d before the new module, %d after; want at least %d new (the main thread's and one per worker)", wasm0[vmsCreated], wasm1[vmsCreated], workers+1)
	}
	if v := stat(t, admin, configInfo+digest(v4)); v != 1 {
		t.Errorf("config_info of the new configuration: %d, want 1", v)
	}
	// The replaced configuration's gauge reads 0, or is gone with the
	// old module's VMs (stat's -1); 1 would mean a VM still runs it.
	if v := stat(t, admin, configInfo+digest(v2)); v > 0 {
		t.Errorf("config_info of the replaced configuration: %d, want 0 or absent", v)
	}
}

// cpTrace formats the control plane's requests, times since t0.
func cpTrace(rs []cpRequest, t0 time.Time) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		kind := "ACK"
		if r.err != "" {
			kind = fmt.Sprintf("NACK %q", r.err)
		}
		parts[i] = fmt.Sprintf("+%.3fs %s of version %q (nonce %s)", r.at.Sub(t0).Seconds(), kind, r.version, r.nonce)
	}
	return strings.Join(parts, "; ")
}

// vmTrace formats the VM samples.
func vmTrace(vs []vmSample) string {
	parts := make([]string, len(vs))
	for i, s := range vs {
		parts[i] = fmt.Sprintf("%.1fs %d/%d %s", s.at.Seconds(), s.active, s.created, s.admin.Round(time.Millisecond))
	}
	return strings.Join(parts, ", ")
}

// TestEnvoy_ecdsStart: what requests get before the first valid
// configuration of envoy-ecds.yaml's filter. With the file missing, Envoy
// does not start, and its log names the path. With a file whose plugin
// configuration the plugin refuses, Envoy starts without the plugin and
// answers every request 500 (the attack too; the access log says
// why), until a valid file is moved in: then benign requests pass and
// the attack is blocked.
func TestEnvoy_ecdsStart(t *testing.T) {
	needEnvoy(t)
	up := startUpstream(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*envoyStartTimeout)
	defer cancel()
	baseID := 800 + os.Getpid()%1000
	t0 := time.Now()
	e, err := envoy.Launch(ctx, envoy.Setup{
		Bootstrap: ecdsBootstrap, Module: plugintest.Path(), Upstream: up.addr, Workers: 1, BaseID: baseID, Wait: envoyStartTimeout,
		Edit: func(b *bootstrapv3.Bootstrap) error {
			_, err := envoy.EditDiscoveredFilters(b, func(_ string, src *corev3.ExtensionConfigSource) error {
				pcs := src.GetConfigSource().GetPathConfigSource()
				pcs.Path = filepath.Join(filepath.Dir(pcs.GetPath()), "missing.yaml")
				return nil
			})
			return err
		},
	})
	if err == nil {
		e.Stop()
		t.Fatal("Envoy served with the filter's file missing")
	}
	if !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("the file missing: %v; want Envoy to exit naming missing.yaml", err)
	}
	t.Logf("the file missing: Envoy exited after %s: %s", time.Since(t0).Round(time.Millisecond), lastLineWith(err.Error(), "missing.yaml"))

	shipped, err := envoy.LoadExtensionConfig(filepath.Join(envoy.ExtensionConfigDir(ecdsBootstrap), "wafguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := shippedConfiguration(t, shipped)
	dir := t.TempDir()
	badJS := pluginJSON(t, base, 256, `SecRule ARGS "@rx (" "id:1000102,phase:2,deny"`)
	data, err := withConfiguration(t, shipped, "bad", badJS).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wafguard.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	crit := newLineKeeper("][critical]")
	e, err = envoy.Launch(ctx, envoy.Setup{
		Bootstrap: ecdsBootstrap, ExtensionConfigs: dir, Module: plugintest.Path(), Upstream: up.addr,
		Workers: 2, BaseID: baseID + 1, Wait: envoyStartTimeout, VMs: -1, Log: crit,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	line := crit.waitLine(10*time.Second, "][critical][wasm]", `directives_map["crs"]`)
	if line == "" {
		t.Errorf("no critical wasm line naming the rule set; kept lines:\n%s", strings.Join(crit.find(""), "\n"))
	}
	get := func(path string) int {
		resp, err := client.Get("http://" + e.Listen + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	attack := "/anything/start?q=" + url.QueryEscape("<script>alert(1)</script>")
	id := fmt.Sprintf("ecds-start-%d", time.Now().UnixNano())
	for _, p := range []string{"/anything/" + id, attack} {
		if code := get(p); code != 500 {
			t.Errorf("GET %s with the refused configuration: %d, want 500", p, code)
		}
	}
	entry := accessEntry(e, id)
	if entry == nil {
		t.Errorf("no access log entry for /anything/%s; log:\n%s", id, e.LastLines(20))
	}
	t.Logf("a refused first configuration: Envoy served after %s (VMs active: %d); a benign request and an attack got 500, the access log entry: response_code_details %v, response_flags %v; the plugin logged %q",
		e.Serving.Round(time.Millisecond), stat(t, e.AdminURL(), vmsActive), entry["response_code_details"], entry["response_flags"], criticalText(line))
	if up.received(id) {
		t.Error("a request reached the upstream without the plugin")
	}

	good, err := envoy.LoadExtensionConfig(filepath.Join(e.ExtensionConfigDir, "wafguard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err = withConfiguration(t, good, "good", base).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := envoy.ReplaceFile(filepath.Join(e.ExtensionConfigDir, "wafguard.yaml"), data); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(2 * time.Minute); get("/anything/after") != 200; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no 200 two minutes after a valid file moved in")
		}
	}
	took := time.Since(t0)
	if code := get(attack); code != 403 {
		t.Errorf("the attack after the valid file: %d, want 403", code)
	}
	t.Logf("a valid file moved in: requests pass and the attack is blocked after %s", took.Round(time.Millisecond))
}

// lastLineWith returns the last line of s that contains w.
func lastLineWith(s, w string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], w) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
