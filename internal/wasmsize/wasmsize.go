// Package wasmsize reads what a WebAssembly module built by Go is made of:
// its sections, the code bytes of each function (named by the module's name
// section, which Go writes), the bytes of its data segments and the linear
// memory each instance starts with. Code is what V8's TurboFan compiles at
// Envoy's start and holds as machine code; the data segments are copied
// into every VM's linear memory. perf/cmd/footprint prints its tables.
package wasmsize

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Module is what Parse found in a module.
type Module struct {
	// Size is the module's length in bytes.
	Size int
	// Sections are the sections in file order.
	Sections []Section
	// Functions are the functions the module defines, in index order.
	Functions []Function
	// DataBytes is the bytes of all data segments; DataSegments their
	// count.
	DataBytes    int
	DataSegments int
	// MinPages is the linear memory an instance starts with, in 64 KiB
	// pages (the memory section's minimum): the data segments and Go's
	// zeroed static data.
	MinPages uint32
}

// Section is one section of the module.
type Section struct {
	// ID is the section id (0 for a custom section).
	ID byte
	// Name is the custom section's name, else the standard name.
	Name string
	// Size is the section's payload length.
	Size int
}

// Function is one defined function.
type Function struct {
	// Name is its name in the name section ("" when it has none), as Go's
	// linker writes it: the package path with '/' and other characters
	// outside [A-Za-z0-9.] replaced by '_', then '.' and the symbol.
	Name string
	// Size is the length of its body in the code section.
	Size int
}

// CodeBytes is the sum of the function bodies.
func (m *Module) CodeBytes() int {
	n := 0
	for _, f := range m.Functions {
		n += f.Size
	}
	return n
}

// MinMemory is MinPages in bytes.
func (m *Module) MinMemory() int64 { return int64(m.MinPages) << 16 }

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "datacount"}

// errTruncated is returned for a module that ends inside a section.
var errTruncated = errors.New("wasmsize: the module ends early")

// Parse reads the module in b. It checks the structure it reads (the
// header, section bounds, the code, data, import and memory sections and
// the name section's function names) and skips the rest.
func Parse(b []byte) (*Module, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || b[4] != 1 || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return nil, errors.New("wasmsize: not a WebAssembly module (version 1)")
	}
	m := &Module{Size: len(b)}
	imported := 0
	var names map[uint32]string
	r := reader{b: b, at: 8}
	for !r.done() {
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(b)-r.at {
			return nil, errTruncated
		}
		body := reader{b: b[:r.at+size], at: r.at}
		r.at += size
		s := Section{ID: id, Size: size}
		if int(id) < len(sectionNames) {
			s.Name = sectionNames[id]
		} else {
			s.Name = fmt.Sprintf("unknown(%d)", id)
		}
		var err error
		switch id {
		case 0:
			s.Name = body.name()
			if s.Name == "name" {
				names, err = functionNames(&body)
			}
		case 2:
			imported, err = importedFunctions(&body)
		case 5:
			if body.u32() > 0 {
				if flags := body.byte(); flags&^1 != 0 {
					err = fmt.Errorf("wasmsize: memory limits flags %#x not supported", flags)
				} else {
					m.MinPages = body.u32()
				}
			}
		case 10:
			m.Functions, err = functionSizes(&body)
		case 11:
			m.DataSegments, m.DataBytes, err = dataSegments(&body)
		}
		if err == nil {
			err = body.err
		}
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		m.Sections = append(m.Sections, s)
	}
	for i := range m.Functions {
		m.Functions[i].Name = names[uint32(imported+i)]
	}
	return m, nil
}

// importedFunctions counts the imports that are functions: they come
// first in the function index space.
func importedFunctions(r *reader) (int, error) {
	n := 0
	for range r.u32() {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0: // function: a type index
			r.u32()
			n++
		case 1: // table: a reference type and limits
			r.byte()
			r.limits()
		case 2: // memory: limits
			r.limits()
		case 3: // global: a value type and mutability
			r.byte()
			r.byte()
		default:
			return 0, fmt.Errorf("wasmsize: import kind %d not supported", kind)
		}
		if r.err != nil {
			return 0, r.err
		}
	}
	return n, nil
}

func functionSizes(r *reader) ([]Function, error) {
	n := r.u32()
	if int(n) > len(r.b)-r.at {
		return nil, errTruncated
	}
	fns := make([]Function, 0, n)
	for range n {
		size := int(r.u32())
		if r.err != nil {
			return nil, r.err
		}
		if size > len(r.b)-r.at {
			return nil, errTruncated
		}
		r.at += size
		fns = append(fns, Function{Size: size})
	}
	return fns, nil
}

func dataSegments(r *reader) (count, bytes int, err error) {
	n := int(r.u32())
	for range n {
		switch flags := r.u32(); flags {
		case 0: // active, memory 0, an offset expression
			r.constExpr()
		case 1: // passive
		case 2: // active, a memory index, an offset expression
			r.u32()
			r.constExpr()
		default:
			return 0, 0, fmt.Errorf("wasmsize: data segment flags %d not supported", flags)
		}
		size := int(r.u32())
		if r.err != nil {
			return 0, 0, r.err
		}
		if size > len(r.b)-r.at {
			return 0, 0, errTruncated
		}
		r.at += size
		bytes += size
	}
	return n, bytes, r.err
}

// functionNames reads the function names subsection (1) of a name
// section.
func functionNames(r *reader) (map[uint32]string, error) {
	names := map[uint32]string{}
	for !r.done() {
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.at {
			return nil, errTruncated
		}
		end := r.at + size
		if id == 1 {
			sub := reader{b: r.b[:end], at: r.at}
			for range sub.u32() {
				idx := sub.u32()
				names[idx] = sub.name()
				if sub.err != nil {
					return nil, sub.err
				}
			}
		}
		r.at = end
	}
	return names, nil
}

// reader reads LEB128 numbers and names from b, starting at at; the first
// error sticks.
type reader struct {
	b   []byte
	at  int
	err error
}

func (r *reader) done() bool { return r.err != nil || r.at >= len(r.b) }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.at >= len(r.b) {
		r.err = errTruncated
		return 0
	}
	c := r.b[r.at]
	r.at++
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	if r.err == nil {
		r.err = errors.New("wasmsize: a LEB128 number longer than 5 bytes")
	}
	return 0
}

func (r *reader) name() string {
	n := int(r.u32())
	if r.err != nil || n > len(r.b)-r.at {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[r.at : r.at+n])
	r.at += n
	return s
}

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}

// constExpr skips an offset expression: i32.const or i64.const, then end.
func (r *reader) constExpr() {
	switch op := r.byte(); op {
	case 0x41, 0x42:
		for r.byte() >= 0x80 {
		}
	default:
		if r.err == nil {
			r.err = fmt.Errorf("wasmsize: offset expression opcode %#x not supported", op)
		}
		return
	}
	if r.byte() != 0x0b && r.err == nil {
		r.err = errors.New("wasmsize: offset expression without end")
	}
}

// Mangle is the prefix Go's linker gives the names of a package's functions
// in the name section: the import path with every byte outside
// [A-Za-z0-9.] replaced by '_'.
func Mangle(importPath string) string {
	b := []byte(importPath)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Share is the code of one package (or group of packages).
type Share struct {
	Name  string
	Bytes int
}

// ByPackage sums the code of the functions by package. importPaths are
// the packages the module was built from (go list -deps); a function goes
// to the longest of them whose mangled path, then '.', begins its name.
// Functions of none of them (the linker's own, generic shapes named after
// no package) go to "other"; unnamed ones to "unnamed". Largest first.
func (m *Module) ByPackage(importPaths []string) []Share {
	byMangled := make(map[string]string, len(importPaths))
	for _, p := range importPaths {
		byMangled[Mangle(p)] = p
	}
	sums := map[string]int{}
	for _, f := range m.Functions {
		sums[packageOf(f.Name, byMangled)] += f.Size
	}
	return Sorted(sums)
}

// packageOf finds the package of a function name: the longest prefix
// ending before a '.' that is a known mangled path.
func packageOf(name string, byMangled map[string]string) string {
	if name == "" {
		return "unnamed"
	}
	best := ""
	for i := strings.IndexByte(name, '.'); i >= 0; {
		if p, ok := byMangled[name[:i]]; ok {
			best = p
		}
		j := strings.IndexByte(name[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if best == "" {
		return "other"
	}
	return best
}

// Group sums shares into groups: group names the group of a package.
// Largest first.
func Group(shares []Share, group func(pkg string) string) []Share {
	sums := map[string]int{}
	for _, s := range shares {
		sums[group(s.Name)] += s.Bytes
	}
	return Sorted(sums)
}

// Sorted is sums as shares, largest first (names in order among equals).
func Sorted(sums map[string]int) []Share {
	out := make([]Share, 0, len(sums))
	for name, n := range sums {
		out = append(out, Share{Name: name, Bytes: n})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
