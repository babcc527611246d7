// Package wasmbuild holds what the plugin's .wasm build passes to go build:
// its build tags, and an overlay that trims net/http.
//
// Coraza imports net/http for two things, http.StatusForbidden (its deny
// action) and http.StatusText (its audit log formats), both declared in
// net/http's status.go. Importing the package links much more: the
// initialisers of net/http, crypto/tls, crypto/x509 and the FIPS 140
// modules they import keep about 0.9 MB of wasm code that the plugin never
// runs, and every MB of code costs Envoy about 1 s of V8 compiling at
// start and 15 MiB of memory (docs/performance.md). The build compiles
// net/http from status.go alone, unchanged, through go build's -overlay,
// which hides the package's other files. A package of the build that used
// anything else of net/http would not compile: the trimming cannot change
// what the plugin runs, only fail the build.
package wasmbuild

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tags are the build tags of the plugin's .wasm. no_fs_access keeps Coraza
// off the WASI file calls, which Envoy does not serve; memoize_builders
// caches compiled regexes and Aho-Corasick matchers across WAFs of one VM;
// tinygo selects Coraza's build for WebAssembly, which leaves out what a
// proxy-wasm VM cannot use (audit log writers to files, sockets and HTTPS,
// the OCSF format with its protobuf code, the @rbl, @inspectFile and
// @validateSchema operators, which the filter refuses:
// filter/unavailable.go), about half the module's code and so half of V8's
// compile at Envoy's start. In the other modules the tag only drops the
// proxy-wasm SDK's exports for its test emulator.
const Tags = "no_fs_access,memoize_builders,tinygo"

// GOROOT returns go env GOROOT of the go command on PATH: the Go tree the
// build compiles against, which NetHTTPStatusOnly reads.
func GOROOT() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// netHTTPKept is the one file of net/http the build compiles.
const netHTTPKept = "status.go"

// NetHTTPStatusOnly returns the JSON for go build -overlay that hides
// every Go file of net/http in the Go tree at goroot (go env GOROOT of the
// toolchain that builds) except status.go. It fails when that folder or
// status.go is missing, naming the path.
func NetHTTPStatusOnly(goroot string) ([]byte, error) {
	dir := filepath.Join(goroot, "src", "net", "http")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("net/http of the Go tree at %s: %w (set GOROOT to the toolchain's, see go env GOROOT)", goroot, err)
	}
	hidden := map[string]string{}
	kept := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir(), !strings.HasSuffix(name, ".go"), strings.HasSuffix(name, "_test.go"):
		case name == netHTTPKept:
			kept = true
		default:
			hidden[filepath.Join(dir, name)] = "" // "" hides the file
		}
	}
	if !kept {
		return nil, fmt.Errorf("%s: no such file: this Go release declares net/http's status codes elsewhere; the plugin's build needs NetHTTPStatusOnly updated for it", filepath.Join(dir, netHTTPKept))
	}
	return json.MarshalIndent(struct {
		Replace map[string]string
	}{hidden}, "", "\t")
}
