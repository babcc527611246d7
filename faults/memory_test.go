package faults

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// Bounds of TestMemory_concurrentUploads; docs/reliability.md gives the
// measured figures behind them.
const (
	uploadStreams = 16
	uploadLimit   = 1 << 20 // the host's buffer limit (Envoy's default)
	uploadSize    = uploadLimit - 8<<10
	// vmMemoryCeiling bounds one VM's linear memory after two waves of
	// uploadStreams concurrent uploads just under the limit.
	vmMemoryCeiling = 512 << 20
	// vmMemorySecondWave bounds the growth of the second wave: the memory
	// the first one used is reused, not added to.
	vmMemorySecondWave = 64 << 20
)

// uploadBody is a multipart body of about n bytes with one file part:
// multipart is the body type whose size SecRequestBodyNoFilesLimit does not
// cap, so only the buffer limits bound it.
func uploadBody(n int) []byte {
	head := "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"blob.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--XyZ--\r\n"
	return []byte(head + string(bytes.Repeat([]byte("0123456789abcdef"), (n-len(head)-len(tail))/16)) + tail)
}

// TestMemory_concurrentUploads holds uploadStreams uploads just under the
// buffer limit open at once on one VM (every stream paused by the filter
// while it buffers), then finishes them, twice. Every upload must pass
// whole, nothing may leak, and the VM's linear memory must stay under
// vmMemoryCeiling and not grow by more than vmMemorySecondWave in the
// second wave.
func TestMemory_concurrentUploads(t *testing.T) {
	b := plugintest.Read(t)
	if testing.Short() {
		t.Skip("memory: skipped in -short mode")
	}
	// An admission cap above uploadStreams, so that every upload is let in.
	config := strings.Replace(SmallRules, `"max_inflight": 8`, `"max_inflight": 64`, 1)
	vm, host := startVM(t, b, wasmhost.Options{BufferLimit: uploadLimit}, config, wasmhost.FailClosed)
	var logMu sync.Mutex
	var logs []string
	host.AddLogSink(func(e wasmhost.LogEntry) {
		if e.Level >= wasmhost.LevelWarn {
			logMu.Lock()
			logs = append(logs, e.Level.String()+": "+e.Message)
			logMu.Unlock()
		}
	})
	body := uploadBody(uploadSize)
	const chunk = 64 << 10
	sizer, hasSize := any(vm).(memorySizer)
	memSize := func() uint64 {
		if hasSize {
			return sizer.MemorySize()
		}
		return 0
	}
	runtime.GC()
	before, rssBefore := memSize(), rss()
	var afterWave [2]uint64
	for wave := 0; wave < 2; wave++ {
		streams := make([]*wasmhost.Stream, uploadStreams)
		for i := range streams {
			s := vm.NewStream(info)
			streams[i] = s
			h := [][2]string{{":method", "POST"}, {":path", fmt.Sprintf("/upload/%d", i)}, {":authority", "localhost"}, {":scheme", "http"},
				{"content-type", "multipart/form-data; boundary=XyZ"}, {"content-length", fmt.Sprint(len(body))}}
			if a := s.RequestHeaders(h, false); a != wasmhost.ActionContinue {
				t.Fatalf("wave %d stream %d: request headers action %d", wave, i, a)
			}
		}
		// Every stream gets all but its last chunk: all are held at once.
		for off := 0; off+chunk < len(body); off += chunk {
			for _, s := range streams {
				s.RequestBody(body[off:off+chunk], false)
			}
		}
		last := (len(body) - 1) / chunk * chunk
		for i, s := range streams {
			s.RequestBody(body[last:], true)
			_, up, _, complete := s.UpstreamRequest()
			if lr := s.LocalReply(); lr != nil || !complete || len(up) != len(body) {
				logMu.Lock()
				t.Fatalf("wave %d stream %d: upstream got %d of %d bytes (complete %v, local reply %+v); log:\n%s",
					wave, i, len(up), len(body), complete, lr, strings.Join(logs, "\n"))
			}
			s.ResponseHeaders([][2]string{{":status", "200"}}, true)
			s.End()
		}
		checkNoLeak(t, host)
		afterWave[wave] = memSize()
	}
	runtime.GC()
	t.Logf("%d uploads of %d KiB at once, twice: VM linear memory %d -> %d -> %d KiB; host RSS %d -> %d KiB",
		uploadStreams, len(body)>>10, before>>10, afterWave[0]>>10, afterWave[1]>>10, rssBefore>>10, rss()>>10)
	if !hasSize {
		t.Log("wasmhost.VM has no MemorySize() uint64: the linear-memory ceiling is not checked (host RSS above)")
		return
	}
	if afterWave[1] > vmMemoryCeiling {
		t.Errorf("VM linear memory %d MiB after two waves, over the ceiling of %d MiB", afterWave[1]>>20, vmMemoryCeiling>>20)
	}
	if afterWave[1]-afterWave[0] > vmMemorySecondWave {
		t.Errorf("the second wave grew VM linear memory by %d MiB, want at most %d MiB", (afterWave[1]-afterWave[0])>>20, vmMemorySecondWave>>20)
	}
}
