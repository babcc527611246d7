package faults

import (
	"context"
	"github.com/wafguard/wafguard/internal/plugintest"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSoak_ci is the CI form of Soak: 20 s of the traffic mix at 10
// requests a second over two VMs with the small rule set, then 3 s of
// overload (16 clients back to back against an admission cap of 8). Every
// request gets its expected status or a 429, and the open-transaction and
// in-flight gauges are back to 0 at the end.
//
// WAFGUARD_SOAK_SECONDS overrides the steady duration and
// WAFGUARD_SOAK_OVERLOAD_SECONDS the overload duration for a longer run
// ("go run mage.go soak" runs 600 and 60), and WAFGUARD_SOAK_HEAPPROFILE
// names a file for a heap profile taken at the end.
func TestSoak_ci(t *testing.T) {
	b := plugintest.Read(t)
	if testing.Short() {
		t.Skip("soak: skipped in -short mode")
	}
	d := envSeconds(t, "WAFGUARD_SOAK_SECONDS", 20*time.Second)
	over := envSeconds(t, "WAFGUARD_SOAK_OVERLOAD_SECONDS", 3*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), d+over+2*time.Minute)
	defer cancel()
	cfg := SoakConfig{Wasm: b, Duration: d, Rate: 10, OverloadDuration: over}
	if p := os.Getenv("WAFGUARD_SOAK_HEAPPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.HeapProfile = f
	}
	r, err := Soak(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("soak report:\n%s", r)
	if err := r.Check(); err != nil {
		t.Error(err)
	}
	if r.Steady.Sent < int(d.Seconds())*10/2 {
		t.Errorf("steady phase sent %d requests, want at least half of the %d scheduled", r.Steady.Sent, int(d.Seconds())*10)
	}
	if r.Overload.ByStatus[429] == 0 {
		t.Errorf("overload: no 429 with %d clients over a cap of 8: %v", 16, r.Overload.ByStatus)
	}
}

// envSeconds reads a duration in whole seconds (1 to 3600) from the
// environment variable name, or returns def when it is unset.
func envSeconds(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 3600 {
		t.Fatalf("%s: got %q, want 1 to 3600", name, s)
	}
	return time.Duration(n) * time.Second
}
