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

// CorazaModule is the module path whose version the images are labelled
// with.
const CorazaModule = "github.com/corazawaf/coraza/v3"

// crsSignature starts the line of a CRS release's
// rules/REQUEST-901-INITIALIZATION.conf that names the release; the
// module embeds the release's files as they are (filter/rules).
var crsSignature = []byte(`SecComponentSignature "OWASP_CRS/`)

// CRSFromModule returns the version of the CRS release a module embeds,
// read from the release's own signature line in its rule files.
func CRSFromModule(wasm []byte) (string, error) {
	found := ""
	for rest := wasm; ; {
		i := bytes.Index(rest, crsSignature)
		if i < 0 {
			break
		}
		rest = rest[i+len(crsSignature):]
		j := bytes.IndexByte(rest, '"')
		if j <= 0 || j > 64 {
			continue
		}
		v := string(rest[:j])
		if found != "" && v != found {
			return "", fmt.Errorf("the module embeds two CRS releases, %s and %s", found, v)
		}
		found = v
	}
	if found == "" {
		return "", errors.New("no CRS release in the module (no SecComponentSignature \"OWASP_CRS/...\" line): is it the plugin?")
	}
	return found, nil
}

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

// VersionsFromModule fills md's Coraza and CRS versions from the module:
// Coraza's from its build information, the version actually linked in;
// the CRS release's from the rule files it embeds (CRSFromModule).
func VersionsFromModule(md *Metadata, wasm []byte) error {
	bi, err := ReadBuildInfo(wasm)
	if err != nil {
		return err
	}
	md.Coraza = DepVersion(bi, CorazaModule)
	if md.Coraza == "" {
		return fmt.Errorf("the module's build information lists no %s: is it the plugin?", CorazaModule)
	}
	md.CRS, err = CRSFromModule(wasm)
	return err
}
