package wasmhost

import (
	"encoding/binary"
	"strings"
)

// Limits on a header-pairs buffer written by the plugin, from
// proxy-wasm-cpp-host include/proxy-wasm/limits.h (PROXY_WASM_HOST_PAIRS_MAX_BYTES
// and PROXY_WASM_HOST_PAIRS_MAX_COUNT).
const (
	maxPairsBytes = 1 << 20
	maxPairsCount = 1024
)

// encodePairs serializes pairs the way proxy-wasm-cpp-host's PairsUtil::marshalPairs
// does: u32 count, count × (u32 key_len, u32 value_len), then each key and
// value followed by a NUL byte. An empty list encodes as nil, so the guest
// gets pointer 0 and size 0, like Envoy.
func encodePairs(pairs [][2]string) []byte {
	if len(pairs) == 0 {
		return nil
	}
	size := 4 + 8*len(pairs)
	for _, p := range pairs {
		size += len(p[0]) + len(p[1]) + 2
	}
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, uint32(len(pairs)))
	off := 4
	for _, p := range pairs {
		binary.LittleEndian.PutUint32(b[off:], uint32(len(p[0])))
		binary.LittleEndian.PutUint32(b[off+4:], uint32(len(p[1])))
		off += 8
	}
	for _, p := range pairs {
		off += copy(b[off:], p[0])
		b[off] = 0
		off++
		off += copy(b[off:], p[1])
		b[off] = 0
		off++
	}
	return b
}

// decodePairs parses a pairs buffer. Like cpp-host's PairsUtil::toPairs it
// rejects (ok=false) a buffer whose size does not match exactly, whose
// terminators are not NUL, or that exceeds 1 MiB or 1024 pairs. A size-0
// buffer is an empty, valid list.
func decodePairs(b []byte) (pairs [][2]string, ok bool) {
	if len(b) == 0 {
		return nil, true
	}
	if len(b) > maxPairsBytes || len(b) < 4 {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > maxPairsCount || 4+8*n > len(b) {
		return nil, false
	}
	data := 4 + 8*n
	pairs = make([][2]string, n)
	for i := 0; i < n; i++ {
		kl := int(binary.LittleEndian.Uint32(b[4+8*i:]))
		vl := int(binary.LittleEndian.Uint32(b[8+8*i:]))
		if kl > len(b)-data || data+kl >= len(b) || b[data+kl] != 0 {
			return nil, false
		}
		k := string(b[data : data+kl])
		data += kl + 1
		if vl > len(b)-data || data+vl >= len(b) || b[data+vl] != 0 {
			return nil, false
		}
		v := string(b[data : data+vl])
		data += vl + 1
		pairs[i] = [2]string{k, v}
	}
	if data != len(b) {
		return nil, false
	}
	return pairs, true
}

// normalizeHeaders returns a copy of h with lower-case keys and the
// pseudo-headers first, each group in its original order, which is how Envoy
// iterates a header map (HeaderMapImpl keeps pseudo-headers at the front).
func normalizeHeaders(h [][2]string) [][2]string {
	out := make([][2]string, 0, len(h))
	for _, p := range h {
		if strings.HasPrefix(p[0], ":") {
			out = append(out, [2]string{strings.ToLower(p[0]), p[1]})
		}
	}
	for _, p := range h {
		if !strings.HasPrefix(p[0], ":") {
			out = append(out, [2]string{strings.ToLower(p[0]), p[1]})
		}
	}
	return out
}

// headerGet returns the first value of key, which is what Envoy's
// Context::getHeaderMapValue returns for a repeated header.
func headerGet(h [][2]string, key string) (string, bool) {
	for _, p := range h {
		if p[0] == key {
			return p[1], true
		}
	}
	return "", false
}

// headerRemove drops every entry with key (HeaderMap::remove).
func headerRemove(h [][2]string, key string) [][2]string {
	out := h[:0]
	for _, p := range h {
		if p[0] != key {
			out = append(out, p)
		}
	}
	return out
}

// headerAdd appends an entry, keeping pseudo-headers in front.
func headerAdd(h [][2]string, key, value string) [][2]string {
	if strings.HasPrefix(key, ":") {
		i := 0
		for i < len(h) && strings.HasPrefix(h[i][0], ":") {
			i++
		}
		h = append(h, [2]string{})
		copy(h[i+1:], h[i:])
		h[i] = [2]string{key, value}
		return h
	}
	return append(h, [2]string{key, value})
}

// headerReplace leaves exactly one entry for key (HeaderMap::setCopy): the
// first one is overwritten in place, later ones are removed.
func headerReplace(h [][2]string, key, value string) [][2]string {
	found := false
	out := h[:0]
	for _, p := range h {
		if p[0] == key {
			if found {
				continue
			}
			found = true
			p[1] = value
		}
		out = append(out, p)
	}
	if !found {
		return headerAdd(out, key, value)
	}
	return out
}

func headerSize(h [][2]string) int {
	n := 0
	for _, p := range h {
		n += len(p[0]) + len(p[1])
	}
	return n
}

func copyHeaders(h [][2]string) [][2]string {
	if h == nil {
		return nil
	}
	return append([][2]string(nil), h...)
}
