package admission

import (
	"encoding/binary"
	"hash/fnv"
)

// The shared-data value holds every member's counts (see the package doc).
// Layout, little-endian:
//
//	header  magic "WGA1" | members u16 | reserved u16
//	member  id u64 | beat i64 (unix ms) | inflight u32 | rejects u32 |
//	        nauth u16 | reserved u16 | nauth × (authority hash u64 | inflight u32)
//
// Only a member writes its own entry; other members only remove an entry
// whose heartbeat is stale. Every write replaces the whole value under CAS,
// so the sum of the entries is always the number of slots held.
const (
	stateMagic      = "WGA1"
	headerSize      = 8
	memberFixedSize = 28
	authPairSize    = 12
	offID           = 0
	offBeat         = 8
	offInflight     = 16
	offRejects      = 20
	offNAuth        = 24
	offPairs        = memberFixedSize
	offPairHash     = 0
	offPairCount    = 8
	maxStateMembers = 1<<16 - 1
)

var le = binary.LittleEndian

// member is a decoded view of one entry of the value.
type member struct {
	off      int // offset of the entry in the value
	size     int
	id       uint64
	beat     int64
	inflight uint32
	rejects  uint32
	nauth    int
}

// stateValid reports whether v is a well-formed value and returns the member
// count. A missing value (nil) is valid and empty.
func stateValid(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, true
	}
	if len(v) < headerSize || string(v[:4]) != stateMagic {
		return 0, false
	}
	n := int(le.Uint16(v[4:]))
	off := headerSize
	for i := 0; i < n; i++ {
		m, ok := memberAt(v, off)
		if !ok {
			return 0, false
		}
		off += m.size
	}
	return n, off == len(v)
}

// memberAt decodes the entry at off, in a value checked by stateValid or
// being checked by it.
func memberAt(v []byte, off int) (member, bool) {
	if off+memberFixedSize > len(v) {
		return member{}, false
	}
	e := v[off:]
	m := member{
		off:      off,
		id:       le.Uint64(e[offID:]),
		beat:     int64(le.Uint64(e[offBeat:])),
		inflight: le.Uint32(e[offInflight:]),
		rejects:  le.Uint32(e[offRejects:]),
		nauth:    int(le.Uint16(e[offNAuth:])),
	}
	m.size = memberFixedSize + m.nauth*authPairSize
	if off+m.size > len(v) {
		return member{}, false
	}
	return m, true
}

// authCount returns the member's count for an authority hash (0 if absent).
func (m *member) authCount(v []byte, hash uint64) uint32 {
	p := m.off + offPairs
	for i := 0; i < m.nauth; i++ {
		if le.Uint64(v[p+offPairHash:]) == hash {
			return le.Uint32(v[p+offPairCount:])
		}
		p += authPairSize
	}
	return 0
}

// putHeader writes the header for n members at the start of b.
func putHeader(b []byte, n int) {
	copy(b, stateMagic)
	le.PutUint16(b[4:], uint16(n))
	le.PutUint16(b[6:], 0)
}

// ownSize is the size of this member's entry.
func (g *Guard) ownSize() int { return memberFixedSize + len(g.auth)*authPairSize }

// putOwn writes this member's entry, from its local counts, at the start of b.
func (g *Guard) putOwn(b []byte) {
	le.PutUint64(b[offID:], g.id)
	le.PutUint64(b[offBeat:], uint64(g.beat))
	le.PutUint32(b[offInflight:], g.local)
	le.PutUint32(b[offRejects:], g.publishedRejects)
	le.PutUint16(b[offNAuth:], uint16(len(g.auth)))
	le.PutUint16(b[offNAuth+2:], 0)
	p := offPairs
	for i := range g.auth {
		le.PutUint64(b[p+offPairHash:], g.auth[i].hash)
		le.PutUint32(b[p+offPairCount:], g.auth[i].local)
		p += authPairSize
	}
}

// grow returns g.buf resized to n bytes, reusing its array when it can.
func (g *Guard) grow(n int) []byte {
	if cap(g.buf) < n {
		g.buf = make([]byte, n, n+n/2+64)
	}
	g.buf = g.buf[:n]
	return g.buf
}

// authorityHash names an authority in the shared counts (FNV-1a, 64 bits).
func authorityHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}
