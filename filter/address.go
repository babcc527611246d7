package filter

import "strconv"

// splitAddress splits Envoy's "ip:port" address property ("[v6]:port" for
// IPv6) into the IP and the port. A value without a port gives port 0, a
// malformed port gives port 0 and the whole value as the IP.
func splitAddress(addr string) (ip string, port int) {
	if addr == "" {
		return "", 0
	}
	if addr[0] == '[' {
		end := -1
		for i := 1; i < len(addr); i++ {
			if addr[i] == ']' {
				end = i
				break
			}
		}
		if end < 0 {
			return addr, 0
		}
		ip = addr[1:end]
		if end+1 < len(addr) && addr[end+1] == ':' {
			port, _ = strconv.Atoi(addr[end+2:])
		}
		return ip, port
	}
	colon, count := -1, 0
	for i := 0; i < len(addr); i++ {
		if addr[i] == ':' {
			colon = i
			count++
		}
	}
	if count != 1 {
		// No port, or a bare IPv6 address.
		return addr, 0
	}
	p, err := strconv.Atoi(addr[colon+1:])
	if err != nil || p < 0 || p > 65535 {
		return addr, 0
	}
	return addr[:colon], p
}
