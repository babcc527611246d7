package istio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/kubeexample"
)

// istioAPIModule is the module whose CRDs (kubernetes/customresourcedefinitions.gen.yaml)
// hold the schemas the API server validates Istio objects with.
const istioAPIModule = "istio.io/api"

// crdSchemas are the compiled spec schemas of Istio's CRDs.
var crdSchemas = sync.OnceValues(loadCRDSchemas)

// validateCRD validates the spec of doc against the OpenAPI schema of
// Istio's CRD for apiVersion and kind (kubeexample.CRDs.Validate: unknown
// fields are errors, CEL rules are written out by the checks of each kind).
func validateCRD(doc *envoy.Doc, apiVersion, kind string) error {
	crds, err := crdSchemas()
	if err != nil {
		return err
	}
	return crds.Validate(doc, apiVersion, kind)
}

// loadCRDSchemas reads the CRDs of the istio.io/api version in go.mod.
func loadCRDSchemas() (*kubeexample.CRDs, error) {
	dir, err := moduleDir(istioAPIModule)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml"))
	if err != nil {
		return nil, err
	}
	var crds kubeexample.CRDs
	if err := crds.Add(istioAPIModule, data); err != nil {
		return nil, err
	}
	return &crds, nil
}

// moduleDir returns the directory of a module of the build list, as
// resolved by the go command (module cache, replace directives).
func moduleDir(path string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("locating module %s: go list -m: %w", path, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("locating module %s: not downloaded; run go mod download %s", path, path)
	}
	return dir, nil
}
