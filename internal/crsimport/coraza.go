package crsimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Coraza's recommended configuration, carried beside the CRS releases
// with its license and provenance (CorazaProvenance).
const (
	CorazaDir        = "coraza"
	CorazaConf       = "coraza.conf-recommended"
	CorazaProvenance = "PROVENANCE.json"
	CorazaModule     = "github.com/corazawaf/coraza/v3"
)

// Provenance says where the carried Coraza files come from: the module,
// its version, and the sha256 of each file.
type Provenance struct {
	Module  string            `json:"module"`
	Version string            `json:"version"`
	Files   map[string]string `json:"files"`
}

// corazaFiles are the files carried from Coraza's module.
var corazaFiles = []string{CorazaConf, "LICENSE"}

// ImportCoraza copies coraza.conf-recommended and LICENSE from the
// Coraza module at moduleDir (version: its version) into
// rulesDir/coraza, with their provenance.
func ImportCoraza(rulesDir, moduleDir, version string) error {
	dst := filepath.Join(rulesDir, CorazaDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	p := Provenance{Module: CorazaModule, Version: version, Files: map[string]string{}}
	for _, f := range corazaFiles {
		b, err := os.ReadFile(filepath.Join(moduleDir, f))
		if err != nil {
			return fmt.Errorf("corazaConf: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			return err
		}
		p.Files[f] = sha256Hex(b)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, CorazaProvenance), append(b, '\n'), 0o644)
}

// VerifyCoraza checks the carried Coraza files against their provenance
// and against the module at moduleDir of version version (the one go.mod
// pins): same version, same bytes.
func VerifyCoraza(rulesDir, moduleDir, version string) error {
	dir := filepath.Join(rulesDir, CorazaDir)
	redo := "copy them again with go run mage.go corazaConf"
	b, err := os.ReadFile(filepath.Join(dir, CorazaProvenance))
	if err != nil {
		return fmt.Errorf("%w; %s", err, redo)
	}
	var p Provenance
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("%s: %w; %s", filepath.Join(dir, CorazaProvenance), err, redo)
	}
	if p.Module != CorazaModule || p.Version != version {
		return fmt.Errorf("%s: the files are of %s %s, go.mod pins %s %s; %s", dir, p.Module, p.Version, CorazaModule, version, redo)
	}
	for _, f := range corazaFiles {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("%w; %s", err, redo)
		}
		if sha256Hex(got) != p.Files[f] {
			return fmt.Errorf("%s: sha256 %s, the provenance has %s: the file was changed; %s", filepath.Join(dir, f), sha256Hex(got), p.Files[f], redo)
		}
		want, err := os.ReadFile(filepath.Join(moduleDir, f))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s differs from %s in %s %s; %s", filepath.Join(dir, f), f, CorazaModule, version, redo)
		}
	}
	if len(p.Files) != len(corazaFiles) {
		return fmt.Errorf("%s lists %d files, want %v; %s", filepath.Join(dir, CorazaProvenance), len(p.Files), corazaFiles, redo)
	}
	return nil
}
