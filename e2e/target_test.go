package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wafguard/wafguard/internal/plugintest"
)

// Environment variables that point the tests at a running proxy. Without
// E2E_BASE_URL the tests start real Envoy with E2E_ENVOY=1 (startEnvoy),
// else the wazero test host in-process with build/main.wasm and
// e2e/envoy.yaml's plugin settings.
const (
	envBaseURL  = "E2E_BASE_URL"  // e.g. http://127.0.0.1:8080
	envAdminURL = "E2E_ADMIN_URL" // e.g. http://127.0.0.1:8082
)

// buildCommand builds the plugin; skip messages quote it.
const buildCommand = "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -tags no_fs_access,memoize_builders,tinygo -o build/main.wasm . (or: go run mage.go build)"

// readyTimeout bounds the wait for the proxy to answer.
const readyTimeout = 60 * time.Second

// target is the proxy under test.
type target struct {
	// name says which proxy it is, for messages.
	name string
	// base is the URL of the HTTP listener, admin the admin interface's
	// (empty when unknown: the metrics test skips).
	base, admin string
	// logs returns the proxy's recent log, for failure messages; nil
	// when the proxy runs elsewhere.
	logs func() string
	stop func()
}

// current is the target of this test binary, set up by the first test that
// needs one and stopped by TestMain.
var (
	setUpOnce  sync.Once
	current    *target
	currentErr error // why there is no target: the tests skip or fail with it
	skipAll    bool  // currentErr is a reason to skip, not to fail
)

func TestMain(m *testing.M) {
	code := m.Run()
	if current != nil && current.stop != nil {
		current.stop()
	}
	os.Exit(code)
}

// setUp chooses the target: the URLs in the environment, or the in-process
// host.
func setUp() (*target, error, bool) {
	if base := os.Getenv(envBaseURL); base != "" {
		t := &target{
			name:  "proxy at " + base,
			base:  strings.TrimSuffix(base, "/"),
			admin: strings.TrimSuffix(os.Getenv(envAdminURL), "/"),
		}
		if err := waitReady(t.base+"/anything", readyTimeout); err != nil {
			return nil, fmt.Errorf("%s=%s: %w; is the proxy up (docker compose -f e2e/docker-compose.yml up -d --build)?", envBaseURL, base, err), false
		}
		return t, nil, false
	}
	if os.Getenv(envEnvoy) == "1" {
		t, err := startEnvoy()
		if err != nil {
			return nil, err, false
		}
		if err := waitReady(t.base+"/anything", readyTimeout); err != nil {
			t.stop()
			return nil, fmt.Errorf("%s: %w", t.name, err), false
		}
		return t, nil, false
	}
	// The in-process run loads plugintest.Path(); a missing plugin skips
	// the tests, or fails them under WASM_REQUIRED (plugintest.Required).
	wasm, err := os.ReadFile(plugintest.Path())
	if err != nil {
		err = fmt.Errorf("in-process host: %w; build it with: %s, or set %s to test a running proxy", err, buildCommand, envBaseURL)
		return nil, err, !plugintest.Required()
	}
	t, err := startInProcess(wasm)
	if err != nil {
		return nil, fmt.Errorf("in-process host: %w", err), false
	}
	if err := waitReady(t.base+"/anything", readyTimeout); err != nil {
		t.stop()
		return nil, fmt.Errorf("in-process host: %w", err), false
	}
	return t, nil, false
}

// need returns the target, or ends the test when there is none.
func need(t *testing.T) *target {
	t.Helper()
	setUpOnce.Do(func() { current, currentErr, skipAll = setUp() })
	switch {
	case current != nil:
		return current
	case skipAll:
		t.Skip(currentErr)
	default:
		t.Fatal(currentErr)
	}
	return nil
}

// failf reports a failure with the proxy's log when there is one.
func (tg *target) failf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if tg.logs != nil {
		lines := strings.Split(tg.logs(), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		msg += "\nproxy log (last lines):\n" + strings.Join(lines, "\n")
	}
	t.Fatal(msg)
}

// waitReady polls url until it answers 200, for at most timeout.
func waitReady(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, errors.Join(last, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
