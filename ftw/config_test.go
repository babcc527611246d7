package ftw

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestOverrides_file checks ftw.yml without running anything: every ignore
// is anchored (go-ftw matches unanchored, so '920100-4' would also ignore
// 920100-40) and names a test that exists, and every corrected expectation
// names existing tests.
func TestOverrides_file(t *testing.T) {
	cfg, err := newConfig(Target{Host: "127.0.0.1", Port: 1}, "ftw.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := LoadTests()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, ft := range tests {
		for i := range ft.Tests {
			ids[ft.Tests[i].IdString()] = true
		}
	}
	for re := range cfg.TestOverride.Ignore {
		s := (*regexp.Regexp)(re).String()
		if !strings.HasPrefix(s, "^") || !strings.HasSuffix(s, "$") {
			t.Errorf("ignore %q: want an anchored regexp, ^...$", s)
		}
		n := 0
		for id := range ids {
			if re.MatchString(id) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("ignore %q: matches no test", s)
		}
	}
	for _, o := range cfg.PlatformOverrides.TestOverrides {
		for _, id := range o.TestIds {
			if name := strings.Join([]string{itoa(o.RuleId), itoa(id)}, "-"); !ids[name] {
				t.Errorf("test_overrides: %s is not a test", name)
			}
		}
	}
}

func itoa(u uint) string { return strconv.Itoa(int(u)) }

func TestNewConfig_missingReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ftw.yml")
	if err := os.WriteFile(path, []byte("testoverride:\n  ignore:\n    '^920100-4$': ''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := newConfig(Target{}, path)
	want := path + `: testoverride.ignore["^920100-4$"]: got an empty reason, want one line saying why`
	if err == nil || err.Error() != "overrides file "+want {
		t.Fatalf("got %v, want %q", err, "overrides file "+want)
	}
}

func TestTargetFromURL(t *testing.T) {
	got, err := TargetFromURL("http://127.0.0.1:8080", "envoy.log")
	if err != nil || got != (Target{Host: "127.0.0.1", Port: 8080, LogFile: "envoy.log"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	_, err = TargetFromURL("https://x", "l")
	if want := `target url "https://x": want http://host:port`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestShard_partition(t *testing.T) {
	tests, err := LoadTests()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	total := 0
	for i := 0; i < 3; i++ {
		for _, ft := range shard(tests, i, 3) {
			for j := range ft.Tests {
				seen[ft.Tests[j].IdString()]++
			}
		}
	}
	for _, ft := range tests {
		total += len(ft.Tests)
	}
	if len(seen) != total {
		t.Fatalf("shards hold %d distinct tests, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s is in %d shards, want 1", id, n)
		}
	}
}

// TestNewConfig_markerRetries: a target's marker retries reach go-ftw;
// none leaves go-ftw's default.
func TestNewConfig_markerRetries(t *testing.T) {
	for retries, want := range map[uint]uint{0: 20, envoyMarkerRetries: envoyMarkerRetries} {
		cfg, err := newConfig(Target{Host: "127.0.0.1", Port: 1, MarkerRetries: retries}, "ftw.yml")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxMarkerRetries != want {
			t.Errorf("MarkerRetries %d: go-ftw retries %d, want %d", retries, cfg.MaxMarkerRetries, want)
		}
	}
}
