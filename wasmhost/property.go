package wasmhost

import (
	"net"
	"strconv"
	"strings"
)

// hGetProperty: proxy_get_property(path_ptr, path_size, value_ptr_ptr,
// value_size_ptr). The path is NUL-separated tokens; values are encoded
// like Envoy's serializeValue (strings as is, integers as 8 bytes LE,
// maps as pairs). Unknown paths give NotFound.
func (vm *VM) hGetProperty(s []uint64) {
	path, ok := vm.readString(uint32(s[0]), uint32(s[1]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	v, found := vm.property(strings.Split(path, "\x00"))
	if !found {
		ret(s, StatusNotFound)
		return
	}
	ret(s, vm.writeOut(v, uint32(s[2]), uint32(s[3])))
}

// hSetProperty: proxy_set_property(path_ptr, path_size, value_ptr,
// value_size) stores the value on the stream (Envoy keeps it as filter
// state "wasm.<path>"); in a root context it is NotFound.
func (vm *VM) hSetProperty(s []uint64) {
	path, ok1 := vm.readString(uint32(s[0]), uint32(s[1]))
	val, ok2 := vm.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	st := vm.effStream()
	if st == nil {
		ret(s, StatusNotFound)
		return
	}
	if st.props == nil {
		st.props = map[string][]byte{}
	}
	st.props[path] = append([]byte(nil), val...)
	ret(s, StatusOK)
}

func u64LE(v uint64) []byte { return putU64(nil, v) }

func splitHostPort(addr string) (string, uint64, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, false
	}
	_ = host
	return addr, p, true
}

func (vm *VM) property(tok []string) ([]byte, bool) {
	if len(tok) == 0 {
		return nil, false
	}
	switch tok[0] {
	case "plugin_name":
		return []byte(vm.cfg.Name), len(tok) == 1
	case "plugin_root_id":
		return []byte(vm.cfg.RootID), len(tok) == 1
	case "plugin_vm_id":
		return []byte(vm.cfg.VMID), len(tok) == 1
	}
	st := vm.effStream()
	if st == nil {
		return nil, false
	}
	if v, ok := st.props[strings.Join(tok, "\x00")]; ok {
		return v, true
	}
	info := &st.info
	switch tok[0] {
	case "connection_id":
		return u64LE(info.ConnectionID), len(tok) == 1
	case "source", "destination":
		addr := info.SourceAddress
		if tok[0] == "destination" {
			addr = info.DestinationAddress
		}
		a, port, ok := splitHostPort(addr)
		if !ok || len(tok) != 2 {
			return nil, false
		}
		switch tok[1] {
		case "address":
			return []byte(a), true
		case "port":
			return u64LE(port), true
		}
		return nil, false
	case "connection":
		if len(tok) != 2 {
			return nil, false
		}
		switch tok[1] {
		case "id":
			return u64LE(info.ConnectionID), true
		case "mtls":
			return []byte{0}, true
		}
		return nil, false
	case "xds":
		if len(tok) == 2 && tok[1] == "route_name" && info.RouteName != "" {
			return []byte(info.RouteName), true
		}
		return nil, false
	case "request":
		return st.requestProperty(tok[1:])
	case "response":
		return st.responseProperty(tok[1:])
	}
	return nil, false
}

// requestProperty resolves request.* attributes (Envoy docs "Attributes").
// Header-derived ones need the request headers, which Envoy only holds
// while they are available (notes 3.6) and in on_log.
func (st *Stream) requestProperty(tok []string) ([]byte, bool) {
	if len(tok) == 0 {
		return nil, false
	}
	switch tok[0] {
	case "protocol":
		p := st.info.Protocol
		if p == "" {
			p = "HTTP/1.1"
		}
		return []byte(p), len(tok) == 1
	case "time":
		return u64LE(uint64(st.start.UnixNano())), len(tok) == 1
	}
	h, _ := st.headerMap(0, false)
	if h == nil {
		return nil, false
	}
	get := func(k string) ([]byte, bool) {
		v, ok := headerGet(*h, k)
		return []byte(v), ok && len(tok) == 1
	}
	switch tok[0] {
	case "path":
		return get(":path")
	case "url_path":
		v, ok := headerGet(*h, ":path")
		if i := strings.IndexByte(v, '?'); i >= 0 {
			v = v[:i]
		}
		return []byte(v), ok && len(tok) == 1
	case "query":
		v, _ := headerGet(*h, ":path")
		_, q, _ := strings.Cut(v, "?")
		return []byte(q), len(tok) == 1
	case "host":
		return get(":authority")
	case "scheme":
		return get(":scheme")
	case "method":
		return get(":method")
	case "referer":
		return get("referer")
	case "useragent":
		return get("user-agent")
	case "id":
		return get("x-request-id")
	case "headers":
		return headersProperty(*h, tok[1:])
	}
	return nil, false
}

func (st *Stream) responseProperty(tok []string) ([]byte, bool) {
	if len(tok) == 0 || !st.resp.seen {
		return nil, false
	}
	switch tok[0] {
	case "code":
		if v, ok := headerGet(st.respHdrs, ":status"); ok {
			n, _ := strconv.ParseUint(v, 10, 32)
			return u64LE(n), len(tok) == 1
		}
		return nil, false
	case "code_details":
		if st.details == "" && st.viaUpstream {
			return []byte("via_upstream"), len(tok) == 1
		}
		return []byte(st.details), len(tok) == 1
	case "headers":
		return headersProperty(st.respHdrs, tok[1:])
	case "trailers":
		return headersProperty(st.respTrl, tok[1:])
	}
	return nil, false
}

// headersProperty: the whole map as pairs (repeated values joined with
// ","), or one header's value.
func headersProperty(h [][2]string, tok []string) ([]byte, bool) {
	if len(tok) == 0 {
		var out [][2]string
		idx := map[string]int{}
		for _, p := range h {
			if i, ok := idx[p[0]]; ok {
				out[i][1] += "," + p[1]
				continue
			}
			idx[p[0]] = len(out)
			out = append(out, p)
		}
		return encodePairs(out), true
	}
	if len(tok) != 1 {
		return nil, false
	}
	var vals []string
	for _, p := range h {
		if p[0] == strings.ToLower(tok[0]) {
			vals = append(vals, p[1])
		}
	}
	if vals == nil {
		return nil, false
	}
	return []byte(strings.Join(vals, ",")), true
}
