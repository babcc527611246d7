package wasmsize

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/wafguard/wafguard/internal/wasmbuild"
)

// section encodes one section.
func section(id byte, payload ...byte) []byte {
	return append(append([]byte{id}, leb(len(payload))...), payload...)
}

func leb(n int) []byte {
	var out []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func name(s string) []byte { return append(leb(len(s)), s...) }

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// tiny is a module with one imported function, a memory of 3 pages, three
// defined functions with bodies of 4, 200 and 3 bytes (the second's size
// takes two LEB128 bytes), two data segments of 5 and 300 bytes, and a
// name section naming the import and the first two defined functions.
func tiny() []byte {
	body := func(n int) []byte { return cat(leb(n), make([]byte, n)) }
	return cat([]byte("\x00asm\x01\x00\x00\x00"),
		section(1, 1, 0x60, 0, 0), // one type: () -> ()
		section(2, cat([]byte{1}, name("env"), name("f"), []byte{0, 0})...),
		section(3, 3, 0, 0, 0),
		section(5, 1, 0, 3),
		section(10, cat([]byte{3}, body(4), body(200), body(3))...),
		section(11, cat([]byte{2},
			[]byte{0, 0x41, 8, 0x0b}, leb(5), make([]byte, 5),
			[]byte{0, 0x41, 0x80, 0x02, 0x0b}, leb(300), make([]byte, 300))...),
		section(0, cat(name("name"),
			[]byte{1}, leb(len(cat([]byte{3}, leb(0), name("env.f"), leb(1), name("github.com_a_b_c.F"), leb(2), name("runtime.g")))),
			[]byte{3}, leb(0), name("env.f"), leb(1), name("github.com_a_b_c.F"), leb(2), name("runtime.g"))...),
	)
}

func TestParse(t *testing.T) {
	m, err := Parse(tiny())
	if err != nil {
		t.Fatal(err)
	}
	want := []Function{{"github.com_a_b_c.F", 4}, {"runtime.g", 200}, {"", 3}}
	if !slices.Equal(m.Functions, want) {
		t.Errorf("functions %+v, want %+v", m.Functions, want)
	}
	if m.CodeBytes() != 207 || m.DataBytes != 305 || m.DataSegments != 2 || m.MinPages != 3 || m.MinMemory() != 3<<16 {
		t.Errorf("code %d data %d in %d segments, %d pages: want 207, 305 in 2, 3", m.CodeBytes(), m.DataBytes, m.DataSegments, m.MinPages)
	}
	var names []string
	for _, s := range m.Sections {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "type import function memory code data name" {
		t.Errorf("sections %q", got)
	}
	shares := m.ByPackage([]string{"github.com/a/b-c", "github.com/a", "runtime"})
	wantShares := []Share{{"runtime", 200}, {"github.com/a/b-c", 4}, {"unnamed", 3}}
	if !slices.Equal(shares, wantShares) {
		t.Errorf("by package %+v, want %+v", shares, wantShares)
	}
	groups := Group(shares, func(p string) string {
		if p == "runtime" {
			return "Go"
		}
		return "rest"
	})
	if !slices.Equal(groups, []Share{{"Go", 200}, {"rest", 7}}) {
		t.Errorf("groups %+v", groups)
	}
}

func TestParse_bad(t *testing.T) {
	good := tiny()
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a WebAssembly module"},
		{"version 2", cat([]byte("\x00asm\x02\x00\x00\x00")), "not a WebAssembly module"},
		{"cut in a section", good[:len(good)-3], "ends early"},
		{"section past the end", cat(good[:8], []byte{10, 0x7f, 1}), "ends early"},
		{"data flags", cat(good[:8], section(11, 1, 7)), "data segment flags 7"},
		{"offset opcode", cat(good[:8], section(11, 1, 0, 0x23, 0, 0x0b, 0)), "opcode 0x23"},
		{"long number", cat(good[:8], section(10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01)), "longer than 5 bytes"},
	} {
		_, err := Parse(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestMangle(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/petar-dambovaliev/aho-corasick": "github.com_petar_dambovaliev_aho_corasick",
		"rsc.io/binaryregexp":                       "rsc.io_binaryregexp",
		"runtime":                                   "runtime",
	} {
		if got := Mangle(in); got != want {
			t.Errorf("Mangle(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParse_build reads the plugin's build/main.wasm when it exists: every
// function is named, and each named one belongs to a package the build
// lists, so the shares add up to the code section.
func TestParse_build(t *testing.T) {
	b, err := os.ReadFile("../../build/main.wasm")
	if err != nil {
		t.Skipf("no build/main.wasm (go run mage.go build): %v", err)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-tags", wasmbuild.Tags, "../..")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	shares := m.ByPackage(strings.Fields(string(out)))
	sum, by := 0, map[string]int{}
	for _, s := range shares {
		sum += s.Bytes
		by[s.Name] = s.Bytes
	}
	if sum != m.CodeBytes() || by["unnamed"] != 0 {
		t.Errorf("shares add up to %d of %d code bytes, %d unnamed", sum, m.CodeBytes(), by["unnamed"])
	}
	for _, p := range []string{"runtime", "github.com/wafguard/wafguard/filter/preselect", "github.com/corazawaf/coraza/v3/internal/corazawaf"} {
		if by[p] == 0 {
			t.Errorf("no code for %s", p)
		}
	}
	if other := by["other"]; other > m.CodeBytes()/20 {
		t.Errorf("%d code bytes in no listed package, want under 5%%", other)
	}
	if m.MinMemory() < int64(m.DataBytes) {
		t.Errorf("initial memory %d below the data segments' %d bytes", m.MinMemory(), m.DataBytes)
	}
}
