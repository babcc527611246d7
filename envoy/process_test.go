package envoy

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStartProc: a process started with StartProc keeps the end of its
// output, reports that it runs, and Stop ends it (SIGTERM) and waits.
func TestStartProc(t *testing.T) {
	var also strings.Builder
	p, err := StartProc(exec.Command("sh", "-c", "echo one; echo two; echo three; exec sleep 60"), &also)
	if err != nil {
		t.Skipf("no sh to run: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Log(), "three") {
		if time.Now().After(deadline) {
			p.Stop()
			t.Fatalf("no output after 10 s: %q", p.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if done, _ := p.Exited(); done {
		t.Fatal("Exited reports the sleeping process as ended")
	}
	if got := p.LastLines(2); got != "two\nthree" {
		t.Errorf("LastLines(2) = %q, want %q", got, "two\nthree")
	}
	p.Stop()
	if done, err := p.Exited(); !done || err == nil {
		t.Errorf("after Stop: Exited() = %v, %v; want true and the signal's error", done, err)
	}
	if also.String() != "one\ntwo\nthree\n" {
		t.Errorf("the also writer got %q", also.String())
	}
}
