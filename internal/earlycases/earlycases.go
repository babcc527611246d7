// Package earlycases holds the cases that both test hosts (wasmhost and
// v8host) run through the "early" test plugin (wasmhost/testdata/early):
// an upstream that answers before the request has ended, and what Envoy's
// rules for it (docs/envoy-host-rules.md 2.6) make the plugin see and the
// client and the upstream get. One table for both hosts keeps them in
// agreement.
package earlycases

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
)

// Case is one exchange through the plugin.
type Case struct {
	Name string `json:"name"`
	// Words is the plugin's configuration (see the plugin's doc).
	Words string `json:"words"`
	// StopIteration is allow_on_headers_stop_iteration.
	StopIteration bool     `json:"stop_iteration"`
	Body          []string `json:"body"`
	// RespAfter and EndsEarly script the upstream's answer: after that
	// many request body chunks, its end after the whole request passed,
	// or with the rest when EndsEarly.
	RespAfter int      `json:"resp_after"`
	EndsEarly bool     `json:"ends_early"`
	RespBody  []string `json:"resp_body"`
	// IdleMS is the stream idle timeout the case needs (0: the default).
	IdleMS int `json:"idle_ms"`

	// Callbacks are the plugin's log lines, without the level.
	Callbacks []string `json:"callbacks"`
	// Status, LocalReply and Resp are what the client got; UpstreamBody
	// what the filter released towards the upstream.
	Status       int    `json:"status"`
	LocalReply   bool   `json:"local_reply"`
	Resp         string `json:"resp"`
	UpstreamBody string `json:"upstream_body"`
}

// Chunks returns s as byte chunks (nil for none).
func Chunks(s []string) [][]byte {
	var out [][]byte
	for _, c := range s {
		out = append(out, []byte(c))
	}
	return out
}

// pluginDir is the test plugin's source directory.
func pluginDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "wasmhost", "testdata", "early")
}

// Load reads the cases (cases.json beside the plugin).
func Load() ([]Case, error) {
	b, err := os.ReadFile(filepath.Join(pluginDir(), "cases.json"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	err = json.Unmarshal(b, &cases)
	return cases, err
}
