package istio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
	"gopkg.in/yaml.v3"

	"github.com/wafguard/wafguard/envoy"
)

// istioAPIModule is the module whose CRDs (kubernetes/customresourcedefinitions.gen.yaml)
// hold the schemas the API server validates Istio objects with.
const istioAPIModule = "istio.io/api"

// crdSchemas are the compiled spec schemas by "apiVersion/kind".
var crdSchemas = sync.OnceValues(loadCRDSchemas)

// validateCRD validates the spec of doc (decoded from an object of this
// apiVersion and kind) against the OpenAPI schema of Istio's CRD, as the API
// server does, with one addition: a field the schema does not know is an
// error (the API server would drop it, or refuse it with kubectl's
// --validate=strict, the default). The CEL rules (x-kubernetes-validations)
// are not evaluated; checkWasmPlugin writes out the ones that matter here.
func validateCRD(doc *envoy.Doc, apiVersion, kind string) error {
	schemas, err := crdSchemas()
	if err != nil {
		return err
	}
	s, ok := schemas[apiVersion+"/"+kind]
	if !ok {
		return fmt.Errorf("%s: no CRD for %s %s in %s", doc.Name, apiVersion, kind, istioAPIModule)
	}
	var spec any
	if err := json.Unmarshal(doc.JSON, &spec); err != nil {
		return err
	}
	res := s.Validate(spec)
	if res.IsValid() {
		return nil
	}
	var msgs []string
	collect(res, func(loc, msg string) {
		path := "spec" + strings.ReplaceAll(loc, "/", ".")
		if strings.Contains(msg, "schema is set to 'false'") {
			// additionalProperties false, added by closeObjects.
			field := path[strings.LastIndexByte(path, '.')+1:]
			msg = fmt.Sprintf("unknown field %q (the API server would drop it; the CRD's field names are camelCase)", field)
		}
		msgs = append(msgs, fmt.Sprintf("%s: not allowed by the %s CRD schema: %s", doc.At(path), kind, msg))
	})
	sort.Strings(msgs)
	if len(msgs) == 0 {
		return fmt.Errorf("%s: spec: not allowed by the %s CRD schema", doc.Name, kind)
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// collect calls f for each failed leaf of a validation result.
func collect(r *jsonschema.EvaluationResult, f func(loc, msg string)) {
	if r.Valid {
		return
	}
	failedChild := false
	for _, d := range r.Details {
		if !d.Valid {
			failedChild = true
			collect(d, f)
		}
	}
	if failedChild {
		return
	}
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f(r.InstanceLocation, r.Errors[k].Error())
	}
}

// loadCRDSchemas reads the CRDs of the istio.io/api version in go.mod.
func loadCRDSchemas() (map[string]*jsonschema.Schema, error) {
	dir, err := moduleDir(istioAPIModule)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "kubernetes", "customresourcedefinitions.gen.yaml"))
	if err != nil {
		return nil, err
	}
	type crd struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Group string `yaml:"group"`
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	out := map[string]*jsonschema.Schema{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var c crd
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s CRDs: %w", istioAPIModule, err)
		}
		if c.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range c.Spec.Versions {
			props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
			spec, ok := props["spec"].(map[string]any)
			if !ok {
				continue
			}
			closeObjects(spec)
			b, err := json.Marshal(spec)
			if err != nil {
				return nil, err
			}
			s, err := jsonschema.NewCompiler().Compile(b)
			if err != nil {
				return nil, fmt.Errorf("%s CRD %s %s: %w", istioAPIModule, c.Spec.Names.Kind, v.Name, err)
			}
			out[c.Spec.Group+"/"+v.Name+"/"+c.Spec.Names.Kind] = s
		}
	}
	return out, nil
}

// closeObjects sets additionalProperties false on every object schema that
// lists its properties and does not keep unknown fields, so that unknown
// fields fail instead of being dropped.
func closeObjects(s map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		if _, set := s["additionalProperties"]; !set && s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				closeObjects(m)
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if m, ok := s[key].(map[string]any); ok {
			closeObjects(m)
		}
	}
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		if list, ok := s[key].([]any); ok {
			for _, item := range list {
				if m, ok := item.(map[string]any); ok {
					closeObjects(m)
				}
			}
		}
	}
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
