// Package ftw runs the OWASP CRS regression suite against a running proxy
// with the go-ftw runner, in log mode.
//
// The tests are the regression tests of the CRS release the plugin embeds
// (CRSVersion), carried with its rules in filter/rules, so the rules the
// filter compiles and the tests that check them come from the same
// release: a build of these tools with CRS=<version> (build tag
// crs<version>) runs that release's tests.
//
// Log mode works with markers: before and after each test stage go-ftw sends a
// request carrying the header X-CRS-Test: <uuid>. The proxy configuration
// (ftw-config.json) holds a rule that logs that header, so the proxy's log
// file gets one marker line before and one after the stage. go-ftw reads the
// log lines between the two markers and collects every [id "..."] in them.
//
// # Notes
//
// go-ftw keeps package-level state (the rule-ID set in its waflog package and
// zerolog's global level), so Run must not be called from two goroutines at
// once. Parallel runs go through separate processes (see cmd/ftwrun).
package ftw

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	schema "github.com/coreruleset/ftw-tests-schema/v2/types"
	"github.com/coreruleset/go-ftw/config"
	"github.com/coreruleset/go-ftw/output"
	"github.com/coreruleset/go-ftw/runner"
	"github.com/coreruleset/go-ftw/test"
	"github.com/rs/zerolog"

	"github.com/wafguard/wafguard/filter/rules"
)

// CRSVersion is the version of the CRS rules and tests.
const CRSVersion = rules.CRSVersion

// MarkerHeader is the request header go-ftw puts its log markers in. The
// marker rule in ftw-config.json logs it.
const MarkerHeader = "X-CRS-Test"

// Target is a running proxy under test.
type Target struct {
	// Host and Port are where go-ftw connects; every test's dest_addr and
	// port are overridden with them.
	Host string
	Port int
	// LogFile is the file the proxy writes matched rules to.
	LogFile string
	// MarkerRetries is how many marker requests go-ftw sends before it
	// gives up finding one in LogFile (0: go-ftw's default, 20). A log
	// that reaches the file through a pipe, as Envoy's does, may lag
	// behind the answer on a loaded machine by more than 20 requests.
	MarkerRetries uint
}

// TargetFromURL returns the target for a base URL such as
// http://127.0.0.1:8080 and a log file.
func TargetFromURL(baseURL, logFile string) (Target, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return Target{}, fmt.Errorf("target url %q: %w", baseURL, err)
	}
	if u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return Target{}, fmt.Errorf("target url %q: want http://host:port", baseURL)
	}
	port := 80
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return Target{}, fmt.Errorf("target url %q: port: %w", baseURL, err)
		}
	}
	if logFile == "" {
		return Target{}, fmt.Errorf("target url %q: a log file is required", baseURL)
	}
	return Target{Host: u.Hostname(), Port: port, LogFile: logFile}, nil
}

// Addr returns host:port.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// Options select the tests and tune the run. The zero value runs every test
// with no overrides and no progress output.
type Options struct {
	// OverridesFile is the go-ftw configuration with the ignored and
	// overridden tests, normally ftw/ftw.yml. Empty means none.
	OverridesFile string
	// MoreIgnores are more go-ftw configuration files whose
	// testoverride.ignore entries are added to OverridesFile's (the
	// exceptions of one proxy, such as ftw/ftw-envoy.yml). Nothing else
	// is read from them.
	MoreIgnores []string
	// Include, when set, runs only the tests whose ID (<rule>-<test>, e.g.
	// 920100-4) it matches.
	Include *regexp.Regexp
	// Shard and Shards split the tests into Shards parts of about the same
	// cost and run part Shard (0-based). Shards of 0 or 1 runs everything.
	Shard, Shards int
	// Progress receives progress lines and one line per failed test. Nil
	// means no output.
	Progress io.Writer
	// ReadTimeout bounds the wait for each response. Zero means 10s: some
	// tests (many arguments, large bodies at paranoia level 4) take seconds
	// in the wasm build on a loaded machine, and go-ftw's default is 1s.
	ReadTimeout time.Duration
	// RunIgnored runs only the tests the overrides file ignores, as normal
	// tests. A test that passes this way no longer needs its entry.
	RunIgnored bool
	// Debug turns on go-ftw's debug log (on stderr), which shows each
	// request and the log lines it matched. Otherwise it logs warnings only.
	Debug bool
}

// LoadTests returns every test file of the CRS regression suite, sorted by
// path.
func LoadTests() ([]*test.FTWTest, error) {
	var tests []*test.FTWTest
	crstests := rules.RegressionTests()
	err := fs.WalkDir(crstests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Ext(p) != ".yaml" {
			return nil
		}
		data, err := fs.ReadFile(crstests, p)
		if err != nil {
			return err
		}
		// go-ftw takes the rule ID from the base name when rule_id is
		// missing, so it gets the base name, not the directory.
		t, err := test.GetTestFromYaml(data, path.Base(p))
		if err != nil {
			return fmt.Errorf("crs test %s: %w", p, err)
		}
		t.FileName = p
		tests = append(tests, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tests) == 0 {
		return nil, errors.New("crs tests: no test files found in CRS " + CRSVersion)
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].FileName < tests[j].FileName })
	return tests, nil
}

// Run runs the suite against the target and returns its results. Failed
// tests, including those whose request failed twice, are in the result; an
// error means the run could not start.
func Run(t Target, o Options) (*Result, error) {
	start := time.Now()
	tests, err := LoadTests()
	if err != nil {
		return nil, err
	}
	tests = shard(tests, o.Shard, o.Shards)

	level := zerolog.WarnLevel
	if o.Debug {
		level = zerolog.DebugLevel
	}
	zerolog.SetGlobalLevel(level)
	cfg, err := newConfig(t, o.OverridesFile)
	if err != nil {
		return nil, err
	}
	if err := addIgnores(cfg, o.MoreIgnores); err != nil {
		return nil, err
	}
	if o.RunIgnored {
		if o.Include, err = ignoredOnly(cfg, o.Include); err != nil {
			return nil, err
		}
	}

	rc := &runner.RunnerConfig{
		ShowOnlyFailed: true,
		ReadTimeout:    o.ReadTimeout,
	}
	if rc.ReadTimeout == 0 {
		rc.ReadTimeout = 10 * time.Second
	}

	res := newResult(t, o)
	prog := newProgress(o.Progress, countCases(tests, o.Include))
	quiet := output.NewOutput("quiet", io.Discard)
	// One go-ftw run per test, so that progress can be reported as it goes
	// and a request error (a timeout, a reset) fails that test alone: go-ftw
	// aborts the whole run on one. Each run reopens the log file, which
	// costs microseconds.
	for _, ft := range tests {
		for i := range ft.Tests {
			id := ft.Tests[i].IdString()
			if o.Include != nil && !o.Include.MatchString(id) {
				res.Excluded++
				continue
			}
			one := *ft
			one.Tests = ft.Tests[i : i+1]
			trc := *rc
			trc.ReadTimeout = readTimeout(rc.ReadTimeout, &ft.Tests[i])
			var rctx *runner.TestRunContext
			for try := 0; try < 2; try++ {
				if rctx, err = runner.Run(cfg, []*test.FTWTest{&one}, &trc, quiet); err == nil {
					break
				}
			}
			if err != nil {
				res.addError(&one, err)
			} else {
				res.add(&one, rctx.Stats)
				if len(rctx.Stats.Ignored) == 0 && overridden(cfg, &ft.Tests[i]) {
					res.Overridden++
				}
				if o.RunIgnored {
					res.StaleIgnores = append(res.StaleIgnores, rctx.Stats.Success...)
				}
			}
			prog.update(ft.FileName, res)
		}
	}
	res.finish(time.Since(start))
	prog.done()
	return res, nil
}

// newConfig loads the overrides file and points every test at the target.
func newConfig(t Target, overridesFile string) (*config.FTWConfiguration, error) {
	cfg := config.NewDefaultConfig()
	if overridesFile != "" {
		if _, err := os.Stat(overridesFile); err != nil {
			// go-ftw falls back to ~/.ftw.yaml when the file is missing;
			// a typo must not silently run with someone's home config.
			return nil, fmt.Errorf("overrides file: %w", err)
		}
		var err error
		if cfg, err = config.NewConfigFromFile(overridesFile); err != nil {
			return nil, fmt.Errorf("overrides file %s: %w", overridesFile, err)
		}
		// The same file may also hold test_overrides (corrected
		// expectations), which go-ftw loads with a separate call.
		if err := cfg.LoadPlatformOverrides(overridesFile); err != nil {
			return nil, fmt.Errorf("overrides file %s: test_overrides: %w", overridesFile, err)
		}
	}
	if err := checkReasons(cfg); err != nil {
		return nil, fmt.Errorf("overrides file %s: %w", overridesFile, err)
	}
	cfg.LogFile = t.LogFile
	cfg.LogMarkerHeaderName = MarkerHeader
	if t.MarkerRetries != 0 {
		cfg.WithMaxMarkerRetries(t.MarkerRetries)
	}
	cfg.TestOverride.Overrides.DestAddr = &t.Host
	cfg.TestOverride.Overrides.Port = &t.Port
	return cfg, nil
}

// addIgnores adds the testoverride.ignore entries of files to cfg's,
// each with its reason.
func addIgnores(cfg *config.FTWConfiguration, files []string) error {
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("ignores file: %w", err)
		}
		more, err := config.NewConfigFromFile(f)
		if err != nil {
			return fmt.Errorf("ignores file %s: %w", f, err)
		}
		if err := checkReasons(more); err != nil {
			return fmt.Errorf("ignores file %s: %w", f, err)
		}
		if len(more.TestOverride.ForcePass)+len(more.TestOverride.ForceFail) > 0 {
			return fmt.Errorf("ignores file %s: only testoverride.ignore is read from it; move forcepass and forcefail to the overrides file", f)
		}
		if cfg.TestOverride.Ignore == nil {
			cfg.TestOverride.Ignore = map[*config.FTWRegexp]string{}
		}
		for re, reason := range more.TestOverride.Ignore {
			cfg.TestOverride.Ignore[re] = reason
		}
	}
	return nil
}

// checkReasons requires a reason for every ignored, forced or overridden
// test, so that each exception can be reviewed and dropped when it is fixed.
func checkReasons(cfg *config.FTWConfiguration) error {
	lists := []struct {
		key string
		m   map[*config.FTWRegexp]string
	}{
		{"testoverride.ignore", cfg.TestOverride.Ignore},
		{"testoverride.forcepass", cfg.TestOverride.ForcePass},
		{"testoverride.forcefail", cfg.TestOverride.ForceFail},
	}
	for _, l := range lists {
		for re, reason := range l.m {
			if strings.TrimSpace(reason) == "" {
				return fmt.Errorf("%s[%q]: got an empty reason, want one line saying why", l.key, (*regexp.Regexp)(re).String())
			}
		}
	}
	for i, o := range cfg.PlatformOverrides.TestOverrides {
		if strings.TrimSpace(o.Reason) == "" {
			return fmt.Errorf("test_overrides[%d] (rule %d): got an empty reason, want one line saying why", i, o.RuleId)
		}
	}
	return nil
}

// ignoredOnly empties the ignore list of cfg and returns a regexp that
// selects the tests it held (and that include, if set, also selects).
func ignoredOnly(cfg *config.FTWConfiguration, include *regexp.Regexp) (*regexp.Regexp, error) {
	var alts []string
	for re := range cfg.TestOverride.Ignore {
		alts = append(alts, "(?:"+(*regexp.Regexp)(re).String()+")")
	}
	cfg.TestOverride.Ignore = nil
	if len(alts) == 0 {
		return nil, errors.New("the overrides file ignores no test")
	}
	if include != nil {
		return nil, fmt.Errorf("running the ignored tests: got include %q too, want no include", include)
	}
	sort.Strings(alts)
	return regexp.MustCompile(strings.Join(alts, "|")), nil
}

// overridden reports whether the overrides file corrects the expectation of
// a test.
func overridden(cfg *config.FTWConfiguration, tc *schema.Test) bool {
	for _, o := range cfg.PlatformOverrides.OverridesMap[tc.RuleId] {
		// go-ftw v1.3.0 applies an entry only to the test IDs it lists.
		if slices.Contains(o.TestIds, tc.TestId) {
			return true
		}
	}
	return false
}

// shard keeps, in every test file, the tests of part i of n. Parts are
// balanced by estimated cost (see weight), biggest tests first, each to the
// lightest part; the split only depends on the test files, so every process
// computes the same one.
func shard(tests []*test.FTWTest, i, n int) []*test.FTWTest {
	if n <= 1 {
		return tests
	}
	type ref struct{ f, t, w int }
	var refs []ref
	for f, ft := range tests {
		for t := range ft.Tests {
			refs = append(refs, ref{f, t, weight(&ft.Tests[t])})
		}
	}
	sort.SliceStable(refs, func(a, b int) bool { return refs[a].w > refs[b].w })
	load := make([]int, n)
	mine := make(map[[2]int]bool)
	for _, r := range refs {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] {
				best = s
			}
		}
		load[best] += r.w
		if best == i {
			mine[[2]int{r.f, r.t}] = true
		}
	}
	var out []*test.FTWTest
	for f, ft := range tests {
		one := *ft
		one.Tests = nil
		for t := range ft.Tests {
			if mine[[2]int{f, t}] {
				one.Tests = append(one.Tests, ft.Tests[t])
			}
		}
		if len(one.Tests) > 0 {
			out = append(out, &one)
		}
	}
	return out
}

// payloadBytes is the size of what a test sends: URIs, headers and bodies.
func payloadBytes(tc *schema.Test) int {
	n := 0
	for _, st := range tc.Stages {
		in := st.Input
		if in.URI != nil {
			n += len(*in.URI)
		}
		if in.Data != nil {
			n += len(*in.Data)
		}
		n += len(in.EncodedRequest) * 3 / 4
		for k, v := range in.Headers {
			n += len(k) + len(v)
		}
	}
	return n
}

// weight estimates the cost of a test in the wasm build: a fixed cost for
// its three requests (two markers) and a cost per payload byte, which
// dominates for the two 64 KB tests (920390-1, 920410-1): Coraza's time at
// paranoia level 4 grows with the size of every argument.
func weight(tc *schema.Test) int {
	return 1000 + payloadBytes(tc)/2
}

// readTimeout is the response timeout for a test: the base, plus 5 ms per
// payload byte for the few big tests. Measured on the wasm build on 2
// loaded cores: about 4 ms per byte of a long argument at paranoia level 4.
func readTimeout(base time.Duration, tc *schema.Test) time.Duration {
	return base + time.Duration(payloadBytes(tc))*5*time.Millisecond
}

func countCases(tests []*test.FTWTest, include *regexp.Regexp) int {
	n := 0
	for _, ft := range tests {
		for i := range ft.Tests {
			if include == nil || include.MatchString(ft.Tests[i].IdString()) {
				n++
			}
		}
	}
	return n
}
