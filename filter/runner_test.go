package filter

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/internal/plugintest"
	"github.com/wafguard/wafguard/v8host"
)

// This file holds the contract shared by the runners of the case tables:
// the native one (runner_native_test.go, the plugin compiled for the test
// binary and driven through the SDK's proxytest emulator) and the wasm one
// (runner_wasmhost_test.go, build/main.wasm driven through the wasmhost package on
// wazero, compiled once per test binary) and the V8 one (runner_v8_test.go,
// the same file on Node 26's V8 through the v8host package). A case is
// written once and runs in all three, as the subtests "go", "wasm" and "v8".

// exchange is one HTTP request and its upstream response, driven through the
// plugin the way Envoy would drive it.
type exchange struct {
	method    string      // :method, default GET
	path      string      // :path with query, default /
	authority string      // :authority, default "localhost"
	headers   [][2]string // regular request headers, in order
	// body is the request body in the chunks it arrives in. Nil means the
	// request headers end the stream.
	body [][]byte
	// reset makes the client go away after the request headers and the body
	// chunks: the stream ends without end of stream and without a response.
	reset bool

	respStatus  int         // upstream :status, default 200
	respHeaders [][2]string // upstream response headers
	respBody    [][]byte    // upstream response body chunks; nil means none
	// respAfter, when positive, makes the upstream answer after that
	// many request body chunks, before the rest of the request: its
	// response headers and body reach the filter while the request body
	// is still arriving, as Envoy delivers an upstream's early answer.
	// 0: the upstream answers once the whole request reached it.
	respAfter int
	// respEndsEarly: with respAfter, the upstream's whole response, its
	// end included, arrives before the rest of the request; else its end
	// comes after the request's end.
	respEndsEarly bool
	// route is the name of the route Envoy chose (xds.route_name); empty
	// for none.
	route string
}

// outcome is what the client and the upstream saw.
type outcome struct {
	// status is what the client sees: the local reply's status when the
	// plugin sent one, else the upstream's; 0 when the stream was reset.
	status int
	// localReply is true when the plugin answered with a local reply.
	localReply bool
	// upstream is true when the whole request (headers and every body
	// byte) was released to the upstream.
	upstream bool
	// upstreamBody is the request body released to the upstream, in
	// full, whether or not the request completed.
	upstreamBody []byte
	// upstreamHeaders is true when the request headers were released to
	// the upstream (Envoy's router sends them at once), even if the
	// request was answered locally afterwards: the upstream then saw the
	// request reset.
	upstreamHeaders bool
	// stuck: the stream stalled with headers held and no body callback
	// to come, and the runner could not run the plugin's tick into it
	// (the native emulator; see nativeRunner).
	stuck bool
	// details are the response code details of a local reply, as Envoy
	// logs them; the native runner's emulator has none ("").
	details string
	// headers and body are what the client received.
	headers [][2]string
	body    []byte
}

// runner loads plugin configurations.
type runner interface {
	// load starts a plugin with the JSON configuration, in an Envoy with
	// the default settings. When the plugin refuses to start, load
	// returns an error whose text holds the plugin's critical log lines.
	load(t testing.TB, config string) (loadedPlugin, error)
	// loadEnvoy is load in an Envoy set up as env says.
	loadEnvoy(t testing.TB, config string, env envoyConfig) (loadedPlugin, error)
}

// envoyConfig is what a case sets of Envoy's configuration.
type envoyConfig struct {
	// stopIteration is the wasm PluginConfig's
	// allow_on_headers_stop_iteration (Envoy 1.35+): body callbacks come
	// while the plugin holds the headers.
	stopIteration bool
}

// loadedPlugin is one started plugin on one VM.
type loadedPlugin interface {
	// do drives one exchange through a new stream, to its end (proxy_on_log,
	// proxy_on_done, proxy_on_delete).
	do(t testing.TB, ex exchange) outcome
	// logs returns the plugin's log lines since load, in order, each
	// prefixed by its level ("info: ", "warn: ", "error: ", "critical: ", ...).
	logs() []string
	// metric returns the value of the counter or gauge with that full name
	// (as the plugin defined it), and whether it exists.
	metric(name string) (uint64, bool)
	close()
}

// runners returns the runners every case table runs on. The wasm runner is
// absent when build/main.wasm is missing, unless WASM_REQUIRED is set, in which
// case the test fails (CI sets it).
func forEachRunner(t *testing.T, f func(t *testing.T, r runner)) {
	t.Helper()
	t.Run("go", func(t *testing.T) { f(t, nativeRunner{}) })
	t.Run("wasm", func(t *testing.T) {
		r, err := getWasmRunner()
		if err != nil {
			plugintest.Missing(t, "wasm runner: %v", err)
		}
		f(t, r)
	})
	t.Run("v8", func(t *testing.T) {
		r, err := getV8Runner()
		if err != nil {
			if os.Getenv("WAFGUARD_V8_REQUIRED") != "" || plugintest.Required() && !errors.Is(err, v8host.ErrNoNode) {
				t.Fatalf("v8 runner: %v", err)
			}
			t.Skipf("v8 runner: %v", err)
		}
		f(t, r)
	})
}

// requestHeaders is the exchange's request header list as every runner
// sends it: the pseudo-headers with their defaults, then ex.headers.
func (ex exchange) requestHeaders() [][2]string {
	method, path, authority := ex.method, ex.path, ex.authority
	if method == "" {
		method = "GET"
	}
	if path == "" {
		path = "/"
	}
	if authority == "" {
		authority = "localhost"
	}
	return append([][2]string{{":method", method}, {":path", path}, {":authority", authority}, {":scheme", "http"}}, ex.headers...)
}

// upstreamStatus is the exchange's upstream status with its default.
func (ex exchange) upstreamStatus() int {
	if ex.respStatus == 0 {
		return 200
	}
	return ex.respStatus
}

// criticalError is what load returns when a plugin refused to start, as
// the native runner does: the plugin's critical lines (lines prefixed
// "critical: "), or hostErr when it wrote none.
func criticalError(lines []string, hostErr error) error {
	var crit []string
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "critical: "); ok {
			crit = append(crit, c)
		}
	}
	if len(crit) == 0 {
		return hostErr
	}
	return errors.New(strings.Join(crit, "\n"))
}
