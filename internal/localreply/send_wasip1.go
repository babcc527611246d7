//go:build wasip1

package localreply

import (
	"errors"
	"strconv"
	"unsafe"
)

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, details unsafe.Pointer, detailsSize int32,
	body unsafe.Pointer, bodySize int32, headers unsafe.Pointer, headersSize int32, grpcStatus int32) uint32

// send calls proxy_send_local_response with the details; gRPC status -1
// lets Envoy map the HTTP status for gRPC clients.
func send(status uint32, details string, headers [][2]string, body []byte) error {
	h := pairs(headers)
	var dp, bp unsafe.Pointer
	if len(details) > 0 {
		dp = unsafe.Pointer(unsafe.StringData(details))
	}
	if len(body) > 0 {
		bp = unsafe.Pointer(&body[0])
	}
	rc := proxySendLocalResponse(status, dp, int32(len(details)), bp, int32(len(body)), unsafe.Pointer(&h[0]), int32(len(h)), -1)
	if rc != 0 {
		return errors.New("proxy_send_local_response: status " + strconv.FormatUint(uint64(rc), 10))
	}
	return nil
}
