package ftw

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	schema "github.com/coreruleset/ftw-tests-schema/v2/types"
	"github.com/coreruleset/go-ftw/runner"
	"github.com/coreruleset/go-ftw/test"
)

// Result is the outcome of a run, and the shape of build/ftw/summary.json.
type Result struct {
	CRSVersion string `json:"crs_version"`
	Target     string `json:"target"`
	Include    string `json:"include,omitempty"`
	Shard      string `json:"shard,omitempty"`

	// Passed counts the tests that ran and met their expectation, the one
	// in the CRS test or the corrected one in the overrides file.
	Passed int `json:"passed"`
	// Failed counts unexpected failures: tests that ran and did not meet
	// their expectation, and tests forced to fail by the overrides file.
	Failed int `json:"failed"`
	// Skipped counts the tests that did not run: Ignored plus Excluded.
	Skipped int `json:"skipped"`
	// Ignored counts the tests in the overrides file's ignore list.
	Ignored int `json:"ignored"`
	// Excluded counts the tests Include did not match.
	Excluded int `json:"excluded"`
	// Overridden counts the tests that ran with a corrected expectation
	// from the overrides file (test_overrides). They are also in Passed or
	// Failed.
	Overridden int `json:"overridden"`

	FailedIDs  []string `json:"failed_ids"`
	IgnoredIDs []string `json:"ignored_ids"`
	// StaleIgnores lists the ignored tests that passed, in a run of the
	// ignored tests only (Options.RunIgnored).
	StaleIgnores []string `json:"stale_ignores,omitempty"`
	// Failures says, for each failed test, what it expected and which
	// rules the log showed, stage by stage.
	Failures []Failure `json:"failures"`

	RuntimeSeconds float64 `json:"runtime_seconds"`

	newFailures []Failure // since the last progress update
}

func newResult(t Target, o Options) *Result {
	r := &Result{CRSVersion: CRSVersion, Target: t.Addr(), FailedIDs: []string{}, IgnoredIDs: []string{}, Failures: []Failure{}}
	if o.Include != nil {
		r.Include = o.Include.String()
	}
	if o.Shards > 1 {
		r.Shard = fmt.Sprintf("%d/%d", o.Shard, o.Shards)
	}
	return r
}

// Failure is one failed test.
type Failure struct {
	ID   string `json:"id"`
	File string `json:"file"`
	// Want is the expected output of each stage, after overrides.
	Want []string `json:"want"`
	// Triggered holds the rule IDs found in the log for each stage; a stage
	// with no entry did not get that far.
	Triggered [][]uint `json:"triggered"`
	// Error is set when the test could not run to the end: a request or
	// marker error, reported by go-ftw.
	Error string `json:"error,omitempty"`
}

// addError counts a test whose go-ftw run returned an error.
func (r *Result) addError(ft *test.FTWTest, err error) {
	id := ft.Tests[0].IdString()
	f := Failure{ID: id, File: ft.FileName, Error: err.Error()}
	for _, st := range ft.Tests[0].Stages {
		f.Want = append(f.Want, describeOutput(st.Output))
	}
	r.Failed++
	r.FailedIDs = append(r.FailedIDs, id)
	r.Failures = append(r.Failures, f)
	r.newFailures = append(r.newFailures, f)
}

// add counts the stats of one go-ftw run of one test file.
func (r *Result) add(ft *test.FTWTest, s *runner.RunStats) {
	for _, id := range append(append([]string{}, s.Failed...), s.ForcedFail...) {
		f := Failure{ID: id, File: ft.FileName, Triggered: s.TriggeredRules[id]}
		for i := range ft.Tests {
			if ft.Tests[i].IdString() != id {
				continue
			}
			for _, st := range ft.Tests[i].Stages {
				f.Want = append(f.Want, describeOutput(st.Output))
			}
		}
		r.Failures = append(r.Failures, f)
		r.newFailures = append(r.newFailures, f)
	}
	r.Passed += len(s.Success) + len(s.ForcedPass)
	r.Failed += len(s.Failed) + len(s.ForcedFail)
	r.Ignored += len(s.Ignored)
	r.Excluded += len(s.Skipped)
	r.FailedIDs = append(r.FailedIDs, s.Failed...)
	r.FailedIDs = append(r.FailedIDs, s.ForcedFail...)
	r.IgnoredIDs = append(r.IgnoredIDs, s.Ignored...)
}

// describeOutput writes an expected stage output in one line.
func describeOutput(o schema.Output) string {
	var parts []string
	if o.Status != 0 {
		parts = append(parts, fmt.Sprintf("status %d", o.Status))
	}
	if o.ExpectError != nil && *o.ExpectError {
		parts = append(parts, "expect_error")
	}
	if o.ResponseContains != "" {
		parts = append(parts, fmt.Sprintf("response_contains %q", o.ResponseContains))
	}
	if len(o.Log.ExpectIds) > 0 {
		parts = append(parts, fmt.Sprintf("expect_ids %v", o.Log.ExpectIds))
	}
	if len(o.Log.NoExpectIds) > 0 {
		parts = append(parts, fmt.Sprintf("no_expect_ids %v", o.Log.NoExpectIds))
	}
	if o.Log.MatchRegex != "" {
		parts = append(parts, fmt.Sprintf("match_regex %q", o.Log.MatchRegex))
	}
	if o.Log.NoMatchRegex != "" {
		parts = append(parts, fmt.Sprintf("no_match_regex %q", o.Log.NoMatchRegex))
	}
	if len(parts) == 0 {
		return "(nothing)"
	}
	return strings.Join(parts, ", ")
}

// finish derives the totals once every test ran.
func (r *Result) finish(d time.Duration) {
	r.Skipped = r.Ignored + r.Excluded
	r.RuntimeSeconds = d.Round(10 * time.Millisecond).Seconds()
	sortIDs(r.FailedIDs)
	sortIDs(r.IgnoredIDs)
	sortIDs(r.StaleIgnores)
}

// Merge adds the results of other shards of the same run into r. The
// runtime becomes the longest one, since shards run at the same time.
func (r *Result) Merge(o *Result) {
	r.Passed += o.Passed
	r.Failed += o.Failed
	r.Ignored += o.Ignored
	r.Excluded += o.Excluded
	r.Overridden += o.Overridden
	r.FailedIDs = append(r.FailedIDs, o.FailedIDs...)
	r.IgnoredIDs = append(r.IgnoredIDs, o.IgnoredIDs...)
	r.Failures = append(r.Failures, o.Failures...)
	r.StaleIgnores = append(r.StaleIgnores, o.StaleIgnores...)
	sortIDs(r.StaleIgnores)
	r.Shard = ""
	r.Skipped = r.Ignored + r.Excluded
	r.RuntimeSeconds = max(r.RuntimeSeconds, o.RuntimeSeconds)
	sortIDs(r.FailedIDs)
	sortIDs(r.IgnoredIDs)
}

// SummaryLine is the last line a run prints.
func (r *Result) SummaryLine() string {
	return fmt.Sprintf("ftw: %d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// WriteJSON writes the result to path, creating its directory.
func (r *Result) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadResult reads a file written by WriteJSON.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

var idRE = regexp.MustCompile(`^(\d+)-(\d+)$`)

// sortIDs sorts test IDs numerically by rule, then test.
func sortIDs(ids []string) {
	key := func(s string) (int, int) {
		m := idRE.FindStringSubmatch(s)
		if m == nil {
			return 0, 0
		}
		var a, b int
		fmt.Sscan(m[1], &a)
		fmt.Sscan(m[2], &b)
		return a, b
	}
	sort.Slice(ids, func(i, j int) bool {
		ai, aj := key(ids[i])
		bi, bj := key(ids[j])
		if ai != bi {
			return ai < bi
		}
		if aj != bj {
			return aj < bj
		}
		return ids[i] < ids[j]
	})
}

// progress writes one status line: rewritten in place on a terminal, and at
// most every few seconds otherwise (CI logs). Failures get a line each.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	now := time.Now()
	p := &progress{w: w, total: total, start: now, last: now}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(file string, r *Result) {
	failed := r.newFailures
	r.newFailures = nil
	if p.w == nil {
		return
	}
	if p.tty && len(failed) > 0 {
		fmt.Fprint(p.w, "\r\033[K")
	}
	for _, f := range failed {
		if f.Error != "" {
			fmt.Fprintf(p.w, "ftw: FAIL %s (%s): %s\n", f.ID, f.File, f.Error)
		} else {
			fmt.Fprintf(p.w, "ftw: FAIL %s (%s)\n", f.ID, f.File)
		}
	}
	now := time.Now()
	if !p.tty && now.Sub(p.last) < 5*time.Second {
		return
	}
	p.last = now
	done := r.Passed + r.Failed + r.Ignored
	line := fmt.Sprintf("ftw: %d/%d tests, %d failed, %s, %s", done, p.total, r.Failed,
		now.Sub(p.start).Round(time.Second), file)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) done() {
	if p.w != nil && p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
