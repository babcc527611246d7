package bench

import (
	"errors"
	"strings"
	"testing"
)

type fakeLogs struct {
	batches [][]string
	err     error
}

func (f *fakeLogs) Logs() ([]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	if len(f.batches) == 0 {
		return nil, nil
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, nil
}

// TestDrainLogs: each call writes the lines the VM held, in order, one a
// line, and nothing when it held none; a VM that cannot be asked is an
// error.
func TestDrainLogs(t *testing.T) {
	src := &fakeLogs{batches: [][]string{{"warn: a", "info: b"}, nil, {"warn: c"}}}
	var out strings.Builder
	for range 4 {
		if err := drainLogs(src, &out); err != nil {
			t.Fatal(err)
		}
	}
	if want := "warn: a\ninfo: b\nwarn: c\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
	gone := errors.New("the Node process is gone")
	if err := drainLogs(&fakeLogs{err: gone}, &out); !errors.Is(err, gone) {
		t.Errorf("error %v, want %v", err, gone)
	}
}
