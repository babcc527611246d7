// Command footprint prints, as Markdown tables, what the plugin's module
// and its start are made of: the module's sections, its code by group and
// by package (what V8 compiles at Envoy's start and keeps as machine code),
// the linear memory each VM starts with, and natively what compiling the
// rule sets allocates and keeps, by package. docs/performance.md "Where
// the memory goes" quotes it.
//
//	go run mage.go build
//	go run ./perf/cmd/footprint [-wasm build/main.wasm] [-config '{}'] [-top 20]
//
// The native figures come from the same Go code compiled for this machine,
// with 8-byte pointers as in Go's wasm: the same objects, not the same
// memory layout. The module's packages are named from `go list -deps` of
// the build (GOOS=wasip1, -tags).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/wafguard/wafguard/internal/wasmbuild"
	"github.com/wafguard/wafguard/internal/wasmsize"
	"github.com/wafguard/wafguard/pluginconfig"
)

func init() {
	// Every allocation of the start is sampled (set before any of it).
	runtime.MemProfileRate = 1
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("footprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wasm := fs.String("wasm", "build/main.wasm", "the module to read")
	config := fs.String("config", "{}", "the plugin configuration whose rule sets compile natively")
	top := fs.Int("top", 20, "packages listed in each by-package table")
	tags := fs.String("tags", wasmbuild.Tags, "the module's build tags, to list its packages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *top < 1 {
		fmt.Fprintln(stderr, "footprint: usage: footprint [-wasm path] [-config json] [-top n] [-tags tags]")
		return 2
	}
	b, err := os.ReadFile(*wasm)
	if err != nil {
		fmt.Fprintf(stderr, "footprint: %v (build it: go run mage.go build)\n", err)
		return 1
	}
	m, err := wasmsize.Parse(b)
	if err != nil {
		fmt.Fprintf(stderr, "footprint: %s: %v\n", *wasm, err)
		return 1
	}
	pkgs, err := listPackages(*tags)
	if err != nil {
		fmt.Fprintf(stderr, "footprint: listing the module's packages: %v\n", err)
		return 1
	}
	printModule(stdout, *wasm, m, pkgs, *top)
	cfg, err := pluginconfig.Parse([]byte(*config))
	if err != nil {
		fmt.Fprintf(stderr, "footprint: -config: %v\n", err)
		return 1
	}
	s, errs := measureStart(cfg)
	for _, err := range errs {
		fmt.Fprintf(stderr, "footprint: %v\n", err)
	}
	if len(errs) != 0 {
		return 1
	}
	printStart(stdout, s, *top)
	return 0
}

// listPackages is `go list -deps` of the module's build.
func listPackages(tags string) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

const mb = 1e6

func printModule(w io.Writer, path string, m *wasmsize.Module, pkgs []string, top int) {
	fmt.Fprintf(w, "## The module: %s, %.2f MB\n\n", path, float64(m.Size)/mb)
	fmt.Fprintln(w, "| section | bytes |")
	fmt.Fprintln(w, "|---|---:|")
	for _, s := range m.Sections {
		if s.Size >= 1000 {
			fmt.Fprintf(w, "| %s | %d |\n", s.Name, s.Size)
		}
	}
	fmt.Fprintf(w, "\n%d functions, %.2f MB of code; %d data segments, %.2f MB; each VM's linear memory starts at %.2f MiB (the data and Go's zeroed static data).\n\n",
		len(m.Functions), float64(m.CodeBytes())/mb, m.DataSegments, float64(m.DataBytes)/mb, float64(m.MinMemory())/(1<<20))
	shares := m.ByPackage(pkgs)
	code := m.CodeBytes()
	fmt.Fprintln(w, "| code by group | MB | share |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, g := range wasmsize.Group(shares, group) {
		fmt.Fprintf(w, "| %s | %.3f | %.1f%% |\n", g.Name, float64(g.Bytes)/mb, 100*float64(g.Bytes)/float64(code))
	}
	fmt.Fprintf(w, "\n| code by package (top %d) | KB | share |\n", top)
	fmt.Fprintln(w, "|---|---:|---:|")
	for i, s := range shares {
		if i == top {
			break
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f%% |\n", s.Name, float64(s.Bytes)/1e3, 100*float64(s.Bytes)/float64(code))
	}
	fmt.Fprintln(w)
}

// group is a package's group in the code table.
func group(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	switch {
	case strings.HasPrefix(pkg, "github.com/wafguard/wafguard"):
		return "this project"
	case strings.HasPrefix(pkg, "github.com/corazawaf/coraza/"):
		return "Coraza"
	case strings.HasPrefix(pkg, "github.com/proxy-wasm/"):
		return "proxy-wasm Go SDK"
	case strings.Contains(first, ".") && !strings.HasPrefix(pkg, "vendor/"):
		return "Coraza's other modules (libinjection, regexp, JSON, Aho-Corasick)"
	case pkg == "runtime" || strings.HasPrefix(pkg, "runtime/") || strings.HasPrefix(pkg, "internal/runtime/"):
		return "Go runtime"
	case first == "crypto" || pkg == "math/big" || strings.HasPrefix(pkg, "vendor/golang.org/x/crypto/"):
		return "cryptography and math/big"
	case pkg == "regexp" || strings.HasPrefix(pkg, "regexp/"):
		return "regexp"
	case pkg == "other" || pkg == "unnamed":
		return "linker-made (type equality, wrappers)"
	}
	return "other standard packages"
}

// start is what compiling the rule sets natively did to the heap.
type start struct {
	allocated, objects uint64 // allocated during the compile
	heapSys            uint64 // heap mapped after the compile: its peak
	live               int64  // live after it, once collected
	byPackage          []wasmsize.Share
}

// measureStart compiles the configuration's rule sets as a VM's start
// does (the compiled WAFs stay in the process's cache, as in a VM) and
// reads the heap before and after.
func measureStart(cfg *pluginconfig.Config) (start, []error) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := inUse()
	if errs := cfg.Filter.CheckRuleSets(); len(errs) != 0 {
		return start{}, errs
	}
	runtime.ReadMemStats(&after)
	s := start{
		allocated: after.TotalAlloc - before.TotalAlloc,
		objects:   after.Mallocs - before.Mallocs,
		heapSys:   after.HeapSys,
	}
	// Two collections: a profile counts what the last complete cycle
	// found live.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.live = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	now := inUse()
	sums := map[string]int{}
	for pkg, n := range now {
		if d := n - base[pkg]; d > 0 {
			sums[pkg] = d
		}
	}
	s.byPackage = wasmsize.Sorted(sums)
	return s, nil
}

// inUse is the live heap by the package that allocated it: the innermost
// caller outside the standard library (a strings.Builder's bytes go to
// whoever built the string), else the innermost caller.
func inUse() map[string]int {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	out := map[string]int{}
	for _, r := range recs {
		if b := r.InUseBytes(); b > 0 {
			out[allocator(r.Stack())] += int(b)
		}
	}
	return out
}

func allocator(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	first := ""
	for {
		f, more := frames.Next()
		pkg := packageOf(f.Function)
		if first == "" {
			first = pkg
		}
		if head, _, _ := strings.Cut(pkg, "/"); strings.Contains(head, ".") {
			return pkg
		}
		if !more {
			return first
		}
	}
}

// packageOf is the import path of a function's full name.
func packageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

func printStart(w io.Writer, s start, top int) {
	fmt.Fprintln(w, "## The start, natively")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Compiling the rule sets allocated %.1f MB in %d objects; the heap then held %.1f MiB of memory from the system (its peak: a wasm VM's linear memory never shrinks); %.2f MB stayed live.\n\n",
		float64(s.allocated)/mb, s.objects, float64(s.heapSys)/(1<<20), float64(s.live)/mb)
	fmt.Fprintf(w, "| live after the start, by package (top %d) | KB |\n", top)
	fmt.Fprintln(w, "|---|---:|")
	for i, p := range s.byPackage {
		if i == top {
			break
		}
		fmt.Fprintf(w, "| %s | %.1f |\n", p.Name, float64(p.Bytes)/1e3)
	}
}
