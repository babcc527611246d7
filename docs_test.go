package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// commandDocs are the documents whose commands a reader runs as written.
var commandDocs = []string{"README.md", "docs/performance.md", "docs/release.md", "e2e/README.md"}

// TestDocs_commands reads every `go run` and `go test` command line of
// commandDocs (in code blocks and in inline code) and checks it against
// the repository, without running it: a mage target exists (with its
// argument when it takes one), a package path exists, a -run or -bench
// pattern names at least one test or benchmark of the package, and every
// flag given to a program of the module is one it defines. A command
// renamed or removed in the code fails here, not on a reader's machine.
func TestDocs_commands(t *testing.T) {
	targets := mageTargets(t)
	checked := 0
	for _, doc := range commandDocs {
		data, err := os.ReadFile(doc)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, cmd := range commandsIn(line) {
				checked++
				if msg := checkCommand(cmd, targets); msg != "" {
					t.Errorf("%s:%d: %q: %s", doc, i+1, cmd, msg)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d commands found in %v: the extraction no longer reads the documents", checked, commandDocs)
	}
}

// goCommand finds `go run` or `go test` and what follows, up to the end
// of an inline code span, a comment, or the line.
var goCommand = regexp.MustCompile("go (?:run|test) [^`#|]*")

// commandsIn returns the go commands of one document line, each cut
// where its code span or comment ends.
func commandsIn(line string) []string {
	var out []string
	for _, m := range goCommand.FindAllString(line, -1) {
		m = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(m), ".,;:)"))
		if strings.Contains(m, "...") && !strings.Contains(m, "./...") || strings.Contains(m, "<") || strings.Contains(m, " -list") {
			continue // an elided example or a placeholder, not a command
		}
		out = append(out, m)
	}
	return out
}

// checkCommand returns what is wrong with cmd, "" when nothing is.
func checkCommand(cmd string, targets map[string]int) string {
	args := splitArgs(cmd)
	if len(args) < 3 {
		return "no arguments"
	}
	switch {
	case args[1] == "run" && args[2] == "mage.go":
		if len(args) < 4 {
			return ""
		}
		name := strings.ToLower(args[3])
		if name == "-l" {
			return ""
		}
		n, ok := targets[name]
		if !ok {
			return "no mage target " + args[3]
		}
		if rest := plainArgs(args[4:]); len(rest) < n {
			return "mage target " + args[3] + " takes " + strconv.Itoa(n) + " argument(s)"
		}
		return ""
	case args[1] == "run":
		pkg := args[2]
		if !strings.HasPrefix(pkg, "./") {
			return "not a package of the module"
		}
		if !isPackage(pkg) {
			return "no package " + pkg
		}
		return checkFlags(pkg, args[3:])
	default: // go test
		var pkgs []string
		var run, bench string
		for i := 2; i < len(args); i++ {
			a := args[i]
			switch {
			case strings.HasPrefix(a, "./") || a == ".":
				pkgs = append(pkgs, a)
			case a == "-run" || a == "-bench":
				if i+1 == len(args) {
					return a + " without a pattern"
				}
				if a == "-run" {
					run = args[i+1]
				} else {
					bench = args[i+1]
				}
				i++
			case a == "-tags" || a == "-timeout" || a == "-benchtime" || a == "-count" || a == "-fuzz" || a == "-fuzztime":
				i++
			}
		}
		if len(pkgs) == 0 {
			return "no package"
		}
		for _, p := range pkgs {
			if strings.HasSuffix(p, "/...") {
				if !isDir(strings.TrimSuffix(p, "/...")) {
					return "no folder " + p
				}
				continue
			}
			if !isPackage(p) {
				return "no package " + p
			}
			for prefix, pattern := range map[string]string{"Test": run, "Benchmark": bench} {
				if pattern == "" || pattern == "^$" {
					continue
				}
				if !namesFunc(p, prefix, pattern) {
					return "no " + prefix + " in " + p + " matches " + pattern
				}
			}
		}
		return ""
	}
}

// splitArgs splits a shell command line on spaces, with single or double
// quotes grouping and removed, after the environment assignments before
// "go".
func splitArgs(cmd string) []string {
	var args []string
	var cur strings.Builder
	quote := byte(0)
	in := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		args = append(args, cur.String())
	}
	return args
}

// plainArgs returns the arguments that are not flags.
func plainArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// isPackage reports whether the folder holds Go files.
func isPackage(p string) bool {
	files, _ := filepath.Glob(filepath.Join(p, "*.go"))
	return len(files) != 0
}

// mageTargets returns magefile.go's targets, lower case, with the number
// of arguments each takes (a context.Context first is not one).
func mageTargets(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "magefile.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !fn.Name.IsExported() {
			continue
		}
		n := 0
		for _, p := range fn.Type.Params.List {
			if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
				continue
			}
			n += max(len(p.Names), 1)
		}
		out[strings.ToLower(fn.Name.Name)] = n
	}
	return out
}

// namesFunc reports whether a test file of pkg declares a function
// prefix+Name whose name the go tool's pattern would select: each
// slash-separated part of the pattern is matched, as by go test, against
// the top-level name only for its first part.
func namesFunc(pkg, prefix, pattern string) bool {
	top, _, _ := strings.Cut(pattern, "/")
	rx, err := regexp.Compile(top)
	if err != nil {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(pkg, "*_test.go"))
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, prefix) && rx.MatchString(fn.Name.Name) {
				return true
			}
		}
	}
	return false
}

// flagDef finds the flags a program defines with the flag package or a
// flag.FlagSet.
var flagDef = regexp.MustCompile(`\b\w+\.(?:String|Int|Int64|Uint|Bool|Duration|Float64)(?:Var)?\((?:&[\w.]+, )?"([\w-]+)"`)

// modulePath is the import path of this module's packages.
const modulePath = "github.com/wafguard/wafguard/"

// checkFlags returns what is wrong with the flags given to the program
// pkg: each must be defined in one of its files or of the module's
// packages it imports.
func checkFlags(pkg string, args []string) string {
	defined := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, imp := range f.Imports {
			if p, ok := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), modulePath); ok {
				more, _ := filepath.Glob(filepath.Join(p, "*.go"))
				files = append(files, more...)
			}
		}
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(data), -1) {
			defined[m[1]] = true
		}
	}
	for _, a := range args {
		if _, err := strconv.ParseFloat(a, 64); err == nil || !strings.HasPrefix(a, "-") {
			continue // a value
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !defined[name] {
			return pkg + " has no flag -" + name
		}
	}
	return ""
}

// TestDocs_checkCommand: what the documents' check refuses.
func TestDocs_checkCommand(t *testing.T) {
	targets := mageTargets(t)
	for cmd, bad := range map[string]bool{
		"go run mage.go check":                                        false,
		"go run mage.go nosuchtarget":                                 true,
		"go run mage.go push":                                         true, // takes the image reference
		"go run ./bench/cmd/bench -quick":                             false,
		"go run ./bench/cmd/bench -load-cpu -1":                       false,
		"go run ./bench/cmd/bench -nosuchflag 1":                      true,
		"go run ./cmd/wafcheck --config x.json":                       false,
		"go run ./nosuch/cmd":                                         true,
		"go test ./filter -run 'TestPreselection_equivalent$'":        false,
		"go test ./filter -run 'TestNoSuchTest$'":                     true,
		"go test ./perf -run '^$' -bench 'Wasm_pool' -benchtime 200x": false,
		"go test ./perf -run '^$' -bench 'NoSuchBench'":               true,
	} {
		if got := checkCommand(cmd, targets) != ""; got != bad {
			t.Errorf("%q: refused %v, want %v (%s)", cmd, got, bad, checkCommand(cmd, targets))
		}
	}
}
