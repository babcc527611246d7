package ociimage

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
)

// The Go linker stores a binary's module information (runtime/debug's
// BuildInfo text) between these two 16-byte markers (cmd/go's
// modload.infoStart and infoEnd). debug/buildinfo cannot open a wasm
// file, so the module is searched for them.
var (
	infoStart = []byte("0w\xaf\x0c\x92t\x08\x02A\xe1\xc1\x07\xe6\xd6\x18\xe6")
	infoEnd   = []byte("\xf92C1\x86\x18 r\x00\x82B\x10A\x16\xd8\xf2")
)

// Module paths whose versions the images are labelled with.
const (
	CorazaModule = "github.com/corazawaf/coraza/v3"
	CRSModule    = "github.com/corazawaf/coraza-coreruleset/v4"
)

// ReadBuildInfo returns the build information the Go toolchain embedded
// in a module it compiled.
func ReadBuildInfo(wasm []byte) (*debug.BuildInfo, error) {
	i := bytes.Index(wasm, infoStart)
	if i < 0 {
		return nil, errors.New("no Go build information in the module (not built by go build?)")
	}
	rest := wasm[i+len(infoStart):]
	j := bytes.Index(rest, infoEnd)
	if j < 0 {
		return nil, errors.New("the module's Go build information has no end marker")
	}
	bi, err := debug.ParseBuildInfo(string(rest[:j]))
	if err != nil {
		return nil, fmt.Errorf("the module's Go build information: %w", err)
	}
	return bi, nil
}

// DepVersion returns the version of module path that bi was built with
// (the replacement's, when it is replaced), or "" when it is not a
// dependency.
func DepVersion(bi *debug.BuildInfo, path string) string {
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		if d.Replace != nil {
			return d.Replace.Version
		}
		return d.Version
	}
	return ""
}

// VersionsFromModule fills md's Coraza and CRS versions from the module's
// build information: the versions actually linked in.
func VersionsFromModule(md *Metadata, wasm []byte) error {
	bi, err := ReadBuildInfo(wasm)
	if err != nil {
		return err
	}
	md.Coraza = DepVersion(bi, CorazaModule)
	md.CRS = DepVersion(bi, CRSModule)
	if md.Coraza == "" || md.CRS == "" {
		return fmt.Errorf("the module's build information lists no %s or %s: is it the plugin?", CorazaModule, CRSModule)
	}
	return nil
}
