package envoy

import (
	"strings"
	"sync"
)

// maxPartialLine bounds the unfinished line a LineWriter keeps: a longer
// one is dropped.
const maxPartialLine = 1 << 20

// LineWriter calls its function with each complete line written to it,
// without the newline, one call at a time: Envoy's log reaches a
// Setup.Log writer in pieces that need not end where a line ends. An
// unfinished line over 1 MiB is dropped.
type LineWriter struct {
	mu      sync.Mutex
	partial string
	line    func(string)
}

// NewLineWriter returns a LineWriter that calls line.
func NewLineWriter(line func(string)) *LineWriter { return &LineWriter{line: line} }

// Write implements io.Writer.
func (w *LineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(w.partial+string(b), "\n")
	w.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		w.line(l)
	}
	if len(w.partial) > maxPartialLine {
		w.partial = ""
	}
	return len(b), nil
}
