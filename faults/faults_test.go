package faults

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/wasmhost"
)

// TestFaults_upstream covers an upstream that fails: it refuses the
// connection, or stalls until the client gives up. The client gets the
// router's 503 and the stream's transaction and slot are released.
func TestFaults_upstream(t *testing.T) {
	b := plugintest.Read(t)
	vm, host := startVM(t, b, wasmhost.Options{}, SmallRules, wasmhost.FailClosed)
	cases := []struct {
		name    string
		timeout time.Duration
		up      wasmhost.UpstreamFunc
	}{
		{
			name: "connection refused",
			up: func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
				return nil, errors.New("connection refused")
			},
		},
		{
			name:    "stall until the client gives up",
			timeout: 200 * time.Millisecond,
			up: func(ctx context.Context, _ *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(10 * time.Second):
					return nil, errors.New("the stalled upstream was not cancelled")
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []*wasmhost.Request{
				request("GET", "/get", nil),
				request("POST", "/post", [][]byte{[]byte("a=1&"), []byte("b=2")}, [2]string{"content-type", "application/x-www-form-urlencoded"}),
			} {
				ctx := context.Background()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				start := time.Now()
				res := vm.Exchange(ctx, req, tc.up)
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("exchange took %v", d)
				}
				if res.Status != 503 || !strings.HasPrefix(res.Details, "upstream_reset") {
					t.Errorf("got status %d (details %q), want the router's 503 after the filter passed the request",
						res.Status, res.Details)
				}
				checkNoLeak(t, host)
			}
		})
	}
}

// errAfter is a body that fails after n bytes, like a client that
// disconnects mid-upload.
type errAfter struct {
	r io.Reader
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, io.ErrClosedPipe
	}
	return n, err
}

// TestFaults_clientAbort covers a client that goes away mid-body: the
// upstream gets nothing, the stream ends without a response, and the
// transaction and slot are released.
func TestFaults_clientAbort(t *testing.T) {
	b := plugintest.Read(t)
	vm, host := startVM(t, b, wasmhost.Options{}, SmallRules, wasmhost.FailClosed)
	form := [2]string{"content-type", "application/x-www-form-urlencoded"}
	upstreamCalled := false
	up := wasmhost.UpstreamFunc(func(ctx context.Context, r *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
		upstreamCalled = true
		return okUpstream(ctx, r)
	})
	for _, tc := range []struct {
		name string
		req  *wasmhost.Request
	}{
		{"reset after two chunks", func() *wasmhost.Request {
			r := request("POST", "/post", [][]byte{[]byte("a=1&"), []byte("b=2")}, form)
			r.Reset = true
			return r
		}()},
		{"reset after the headers", func() *wasmhost.Request {
			r := request("POST", "/post", [][]byte{}, form)
			r.Reset = true
			return r
		}()},
		{"read error mid-body", func() *wasmhost.Request {
			r := request("POST", "/post", nil, form)
			r.BodyReader = &errAfter{r: strings.NewReader(strings.Repeat("a=1&", 1000))}
			r.ChunkSize = 512
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			upstreamCalled = false
			res := vm.Exchange(context.Background(), tc.req, up)
			if res.Status != 0 || res.Upstream || upstreamCalled {
				t.Errorf("got status %d, upstream %v (called %v), want no response and nothing upstream", res.Status, res.Upstream, upstreamCalled)
			}
			checkNoLeak(t, host)
		})
	}
	// The VM still serves.
	if res := vm.Exchange(context.Background(), request("GET", "/get", nil), okUpstream); res.Status != 200 {
		t.Errorf("after the aborts: got %d, want 200", res.Status)
	}
}

// TestFaults_bufferLimit sends bodies past the host's per-stream buffer
// limit while the filter holds them for inspection: the host answers 413
// (Envoy's buffer-limit reply), nothing reaches the upstream, and nothing
// leaks. Bodies just under the limit pass.
func TestFaults_bufferLimit(t *testing.T) {
	b := plugintest.Read(t)
	const limit = 16 << 10
	vm, host := startVM(t, b, wasmhost.Options{BufferLimit: limit}, SmallRules, wasmhost.FailClosed)
	form := [2]string{"content-type", "application/x-www-form-urlencoded"}
	body := func(n int) [][]byte {
		var chunks [][]byte
		for n > 0 {
			c := min(n, 4096)
			chunks = append(chunks, bytes.Repeat([]byte("a"), c))
			n -= c
		}
		return chunks
	}
	for _, tc := range []struct {
		name       string
		size       int
		wantStatus int
	}{
		{"under the limit", limit - 1024, 200},
		{"over the limit", limit + 4096, 413},
		{"far over the limit", 4 * limit, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got int
			up := wasmhost.UpstreamFunc(func(ctx context.Context, r *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
				got = len(r.Body)
				return okUpstream(ctx, r)
			})
			res := vm.Exchange(context.Background(), request("POST", "/post", body(tc.size), form), up)
			if res.Status != tc.wantStatus {
				t.Fatalf("got status %d (details %q), want %d", res.Status, res.Details, tc.wantStatus)
			}
			if tc.wantStatus == 200 && got != tc.size {
				t.Errorf("upstream got %d bytes, want %d", got, tc.size)
			}
			if tc.wantStatus != 200 && res.Upstream {
				t.Errorf("the upstream got the request")
			}
			checkNoLeak(t, host)
		})
	}
}

var trapOnce struct {
	sync.Once
	b   []byte
	err error
}

// trapPlugin builds wasmhost's test plugin that panics in
// on_request_headers for /panic and in on_response_body when the upstream
// sends x-panic. The production plugin has no way to trap on purpose.
func trapPlugin(t testing.TB) []byte {
	t.Helper()
	plugintest.Read(t) // same skip rule as the other wasm tests
	trapOnce.Do(func() {
		dir, err := os.MkdirTemp("", "faults-trap-")
		if err != nil {
			trapOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "trap.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "../wasmhost/testdata/trap")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			trapOnce.err = errors.New(err.Error() + "\n" + string(b))
			return
		}
		trapOnce.b, trapOnce.err = os.ReadFile(out)
	})
	if trapOnce.err != nil {
		t.Fatalf("building the trap plugin: %v", trapOnce.err)
	}
	return trapOnce.b
}

// TestFaults_trap checks each failure policy after a trap in a request and
// in a response callback: fail closed answers 503 to that stream and every
// later one, fail open lets later streams bypass the plugin, fail reload
// answers 503 and serves the next stream from a fresh VM.
func TestFaults_trap(t *testing.T) {
	b := trapPlugin(t)
	panicResp := wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
		return &wasmhost.Response{Status: 200, Headers: [][2]string{{"x-panic", "1"}}, Body: [][]byte{[]byte("body")}}, nil
	})
	for _, tc := range []struct {
		name      string
		policy    wasmhost.FailurePolicy
		trap      func(vm *wasmhost.VM) wasmhost.Result
		wantTrap  int // status of the stream that trapped; 0: reset
		wantAfter int
		wantGen   uint32
	}{
		{"request headers, fail closed", wasmhost.FailClosed,
			func(vm *wasmhost.VM) wasmhost.Result {
				return vm.Exchange(context.Background(), request("GET", "/panic", nil), okUpstream)
			}, 503, 503, 1},
		{"request headers, fail open", wasmhost.FailOpen,
			func(vm *wasmhost.VM) wasmhost.Result {
				return vm.Exchange(context.Background(), request("GET", "/panic", nil), okUpstream)
			}, 200, 200, 1},
		{"request headers, fail reload", wasmhost.FailReload,
			func(vm *wasmhost.VM) wasmhost.Result {
				return vm.Exchange(context.Background(), request("GET", "/panic", nil), okUpstream)
			}, 503, 200, 2},
		{"response body, fail closed", wasmhost.FailClosed,
			func(vm *wasmhost.VM) wasmhost.Result {
				return vm.Exchange(context.Background(), request("GET", "/get", nil), panicResp)
			}, 0, 503, 1},
		{"response body, fail reload", wasmhost.FailReload,
			func(vm *wasmhost.VM) wasmhost.Result {
				return vm.Exchange(context.Background(), request("GET", "/get", nil), panicResp)
			}, 0, 200, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm, _ := startVM(t, b, wasmhost.Options{}, "", tc.policy)
			res := tc.trap(vm)
			if res.Status != tc.wantTrap {
				t.Errorf("trapping stream: got status %d (details %q, reset %v), want %d", res.Status, res.Details, res.Reset, tc.wantTrap)
			}
			if tc.wantTrap == 200 && !res.Upstream {
				t.Errorf("trapping stream: fail open answered 200 without the upstream")
			}
			time.Sleep(5 * time.Millisecond) // past the 1 ns reload backoff
			after := vm.Exchange(context.Background(), request("GET", "/get", nil), okUpstream)
			if after.Status != tc.wantAfter {
				t.Errorf("next stream: got status %d (details %q), want %d", after.Status, after.Details, tc.wantAfter)
			}
			if g := vm.Generation(); g != tc.wantGen {
				t.Errorf("generation %d, want %d", g, tc.wantGen)
			}
		})
	}
}
