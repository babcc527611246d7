package envoy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Memory is where an Envoy process's memory goes, from the kernel's view
// (/proc/PID/smaps, proportional set sizes in bytes) and Envoy's allocator's
// (/memory). Envoy's heap is tcmalloc's; V8 keeps the compiled module's
// data there. V8's machine code is in anonymous executable mappings; each
// VM's linear memory and each thread's stack in other anonymous mappings,
// which no field tells apart.
type Memory struct {
	// PSS is the whole process.
	PSS int64
	// Binary is the mappings of the Envoy binary; Files those of other
	// files (shared libraries).
	Binary, Files int64
	// Code is anonymous executable memory: V8's machine code.
	Code int64
	// Anonymous is the rest of the anonymous memory: Envoy's heap, the
	// VMs' linear memories, the stacks.
	Anonymous int64
	// From /memory (ReadAllocator): the bytes allocated, the heap's size,
	// what of it was given back to the system (unmapped) and what is free
	// but still mapped (pageheap_free). HeapResident is HeapSize -
	// Unmapped.
	Allocated, HeapSize, Unmapped, Free int64
}

// HeapResident is the part of tcmalloc's heap that is mapped: allocated,
// free and cached.
func (m Memory) HeapResident() int64 { return m.HeapSize - m.Unmapped }

// OutsideHeap is the anonymous memory outside Envoy's heap: the VMs'
// linear memories and the threads' stacks.
func (m Memory) OutsideHeap() int64 { return m.Anonymous - m.HeapResident() }

// String is the breakdown in MiB, one line.
func (m Memory) String() string {
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	return fmt.Sprintf("PSS %.1f MiB: Envoy's binary %.1f, other files %.1f, V8's machine code %.1f, Envoy's heap %.1f (%.1f allocated), linear memories and stacks %.1f",
		mib(m.PSS), mib(m.Binary), mib(m.Files), mib(m.Code), mib(m.HeapResident()), mib(m.Allocated), mib(m.OutsideHeap()))
}

// ReadMemory reads the breakdown of the Envoy process pid, whose binary is
// at binary and whose admin interface is at admin (http://host:port).
func ReadMemory(c *http.Client, pid int, binary, admin string) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	m, err := ParseSmaps(f, binary)
	if err != nil {
		return Memory{}, err
	}
	a, err := ReadAllocator(c, admin)
	if err != nil {
		return Memory{}, err
	}
	m.Allocated, m.HeapSize, m.Unmapped, m.Free = a.Allocated, a.HeapSize, a.Unmapped, a.Free
	return m, nil
}

// ReadAllocator reads the /memory fields of Memory from the admin
// interface at admin (http://host:port); the others stay zero.
func ReadAllocator(c *http.Client, admin string) (Memory, error) {
	resp, err := c.Get(admin + "/memory")
	if err != nil {
		return Memory{}, fmt.Errorf("envoy: /memory: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Memory{}, fmt.Errorf("envoy: /memory: status %d", resp.StatusCode)
	}
	var m Memory
	if err := m.parseAllocator(resp.Body); err != nil {
		return Memory{}, err
	}
	return m, nil
}

// parseAllocator reads /memory's JSON (its numbers are strings).
func (m *Memory) parseAllocator(r io.Reader) error {
	var raw map[string]string
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return fmt.Errorf("envoy: /memory: %w", err)
	}
	for _, f := range []struct {
		key string
		to  *int64
	}{{"allocated", &m.Allocated}, {"heap_size", &m.HeapSize}, {"pageheap_unmapped", &m.Unmapped}, {"pageheap_free", &m.Free}} {
		n, err := strconv.ParseInt(raw[f.key], 10, 64)
		if err != nil {
			return fmt.Errorf("envoy: /memory: %s %q: %w", f.key, raw[f.key], err)
		}
		*f.to = n
	}
	return nil
}

// smapsHeader is the first line of a mapping: range, permissions,
// offset, device, inode and the optional path.
var smapsHeader = regexp.MustCompile(`^[0-9a-f]+-[0-9a-f]+ ([rwxsp-]{4}) [0-9a-f]+ \S+ \d+\s*(.*)$`)

// ParseSmaps sums the Pss lines of a /proc/PID/smaps by kind of mapping;
// binary is the Envoy binary's path. The /memory fields stay zero.
func ParseSmaps(r io.Reader, binary string) (Memory, error) {
	var m Memory
	var into *int64
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := s.Text()
		if h := smapsHeader.FindStringSubmatch(line); h != nil {
			perms, path := h[1], strings.TrimSpace(h[2])
			switch {
			case path == binary:
				into = &m.Binary
			case strings.HasPrefix(path, "/"):
				into = &m.Files
			case perms[2] == 'x':
				into = &m.Code
			default: // anonymous, [heap], [stack], [vvar]...
				into = &m.Anonymous
			}
			continue
		}
		v, ok := strings.CutPrefix(line, "Pss:")
		if !ok {
			continue
		}
		if into == nil {
			return Memory{}, fmt.Errorf("envoy: smaps: %q before any mapping", line)
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("envoy: smaps: %q: %w", line, err)
		}
		*into += kb << 10
		m.PSS += kb << 10
	}
	if err := s.Err(); err != nil {
		return Memory{}, err
	}
	if m.PSS == 0 {
		return Memory{}, fmt.Errorf("envoy: smaps: no Pss line")
	}
	return m, nil
}
