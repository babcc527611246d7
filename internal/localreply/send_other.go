//go:build !wasip1

package localreply

import "github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

// send goes through the SDK, whose emulator has no details.
func send(status uint32, _ string, headers [][2]string, body []byte) error {
	return proxywasm.SendHttpResponse(status, headers, body, -1)
}
