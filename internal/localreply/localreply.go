// Package localreply sends the plugin's local replies
// (proxy_send_local_response) with response code details that name the
// plugin and the reason, which Envoy's access log shows as
// %RESPONSE_CODE_DETAILS% and its stats and tracing carry. The Go SDK's
// SendHttpResponse always passes empty details, so in the .wasm this
// package calls the host function itself (send_wasip1.go); built natively,
// where the SDK's emulator is the host, it goes through the SDK and the
// details are dropped (send_other.go).
package localreply

import "encoding/binary"

// Prefix starts the details of every reply the plugin sends: its name.
// What follows says why, in [a-z0-9_] (Envoy turns a space into '_'):
// block_<rule id>, redirect_<rule id>, body_limit, json_too_deep,
// fail_closed, admission_<reason>.
const Prefix = "wafguard_"

// Send answers the current stream with a local reply: status, the
// response code details (Prefix and the reason), extra headers and body.
func Send(status uint32, details string, headers [][2]string, body []byte) error {
	return send(status, details, headers, body)
}

// pairs serialises header pairs the way proxy-wasm hosts read them: the
// number of pairs, then each key's and value's length (little-endian
// uint32s), then each key and value followed by a NUL byte.
func pairs(headers [][2]string) []byte {
	size := 4
	for _, h := range headers {
		size += 8 + len(h[0]) + 1 + len(h[1]) + 1
	}
	b := make([]byte, 4, size)
	binary.LittleEndian.PutUint32(b, uint32(len(headers)))
	for _, h := range headers {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h[0])))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h[1])))
	}
	for _, h := range headers {
		b = append(append(append(append(b, h[0]...), 0), h[1]...), 0)
	}
	return b
}
