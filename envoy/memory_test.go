package envoy

import (
	"strings"
	"testing"
)

const smapsSample = `00400000-00500000 r-xp 00000000 08:01 123 /opt/envoy/bin/envoy
Size:               1024 kB
Rss:                 900 kB
Pss:                 800 kB
Pss_Dirty:            10 kB
00600000-00700000 r--p 00100000 08:01 123 /opt/envoy/bin/envoy
Pss:                 100 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Pss:                2048 kB
SwapPss:               0 kB
7f0000100000-7f0000200000 rwxp 00000000 00:00 0 
Pss:                 512 kB
7f0000200000-7f0000300000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Pss:                  64 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Pss:                  16 kB
`

func TestParseSmaps(t *testing.T) {
	m, err := ParseSmaps(strings.NewReader(smapsSample), "/opt/envoy/bin/envoy")
	if err != nil {
		t.Fatal(err)
	}
	want := Memory{PSS: 3540 << 10, Binary: 900 << 10, Files: 64 << 10, Code: 512 << 10, Anonymous: 2064 << 10}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if err := m.parseAllocator(strings.NewReader(`{"allocated": "1048576", "heap_size": "1572864", "pageheap_unmapped": "524288", "pageheap_free": "4096"}`)); err != nil {
		t.Fatal(err)
	}
	if m.Free != 4096 {
		t.Errorf("pageheap_free read as %d, want 4096", m.Free)
	}
	if m.HeapResident() != 1<<20 || m.OutsideHeap() != 1040<<10 {
		t.Errorf("heap resident %d, outside %d", m.HeapResident(), m.OutsideHeap())
	}
	const line = "PSS 3.5 MiB: Envoy's binary 0.9, other files 0.1, V8's machine code 0.5, Envoy's heap 1.0 (1.0 allocated), linear memories and stacks 1.0"
	if m.String() != line {
		t.Errorf("String() = %q,\nwant        %q", m.String(), line)
	}
}

func TestParseSmaps_bad(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no Pss line"},
		{"Pss: 4 kB\n", "before any mapping"},
		{"00400000-00500000 r-xp 00000000 08:01 123 /x\nPss: four kB\n", `"Pss: four kB"`},
	} {
		_, err := ParseSmaps(strings.NewReader(c.in), "/x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %s", c.in, err, c.want)
		}
	}
	var m Memory
	if err := m.parseAllocator(strings.NewReader(`{"allocated": "12"}`)); err == nil || !strings.Contains(err.Error(), "heap_size") {
		t.Errorf("a /memory without heap_size: error %v", err)
	}
}
