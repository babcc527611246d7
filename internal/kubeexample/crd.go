package kubeexample

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kaptinlin/jsonschema"
	"gopkg.in/yaml.v3"

	"github.com/wafguard/wafguard/envoy"
)

// CRDs holds the spec schemas of CustomResourceDefinitions, compiled, by
// "group/version/Kind".
type CRDs struct {
	schemas map[string]*jsonschema.Schema
	sources []string
}

// crd is the part of a CustomResourceDefinition that Add reads.
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

// Add compiles the spec schema of every version of every CRD in data, a
// YAML stream (documents of other kinds are skipped). source names the
// data in messages.
func (c *CRDs) Add(source string, data []byte) error {
	if c.schemas == nil {
		c.schemas = map[string]*jsonschema.Schema{}
	}
	added := 0
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d crd
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if d.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range d.Spec.Versions {
			props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
			spec, ok := props["spec"].(map[string]any)
			if !ok {
				continue
			}
			closeObjects(spec)
			b, err := json.Marshal(spec)
			if err != nil {
				return err
			}
			s, err := jsonschema.NewCompiler().Compile(b)
			if err != nil {
				return fmt.Errorf("%s: CRD %s %s: %w", source, d.Spec.Names.Kind, v.Name, err)
			}
			c.schemas[d.Spec.Group+"/"+v.Name+"/"+d.Spec.Names.Kind] = s
			added++
		}
	}
	if added == 0 {
		return fmt.Errorf("%s: no CRD with a spec schema", source)
	}
	c.sources = append(c.sources, source)
	return nil
}

// Validate validates the spec of doc (decoded from an object of this
// apiVersion and kind) against the OpenAPI schema of its CRD, as the API
// server does, with one addition: a field the schema does not know is an
// error (the API server would drop it, or refuse it with kubectl's
// --validate=strict, the default). The CEL rules (x-kubernetes-validations)
// are not evaluated; the tests of each kind write out the ones that
// matter. Every failure is returned, one a line, each with the file, line
// and path.
func (c *CRDs) Validate(doc *envoy.Doc, apiVersion, kind string) error {
	s, ok := c.schemas[apiVersion+"/"+kind]
	if !ok {
		return fmt.Errorf("%s: no CRD for %s %s in %s", doc.Name, apiVersion, kind, strings.Join(c.sources, ", "))
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
	collect(res, "", spec, func(loc, msg string) {
		path := docPath(doc.Prefix, loc)
		if strings.Contains(msg, "schema is set to 'false'") {
			// additionalProperties false, added by closeObjects.
			field := path[strings.LastIndexByte(path, '.')+1:]
			msg = fmt.Sprintf("unknown field %q (the API server would drop it; the CRD's field names are camelCase)", field)
		}
		msgs = append(msgs, fmt.Sprintf("%s: not allowed by the %s CRD schema: %s", doc.At(path), kind, msg))
	})
	sort.Strings(msgs)
	if len(msgs) == 0 {
		return fmt.Errorf("%s: %s: not allowed by the %s CRD schema", doc.Name, doc.Prefix, kind)
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// docPath turns a JSON pointer below the node at prefix into the path
// envoy.Doc records: "/wasm/0/code" below "spec" is "spec.wasm[0].code".
func docPath(prefix, pointer string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, seg := range strings.Split(pointer, "/")[1:] {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if _, err := strconv.Atoi(seg); err == nil {
			fmt.Fprintf(&b, "[%s]", seg)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// collect calls f for each failure of a validation result below the
// instance v, with its JSON pointer: a keyword that failed because of
// failed subschemas (properties, items, allOf, ...) is followed into them,
// and reported itself only when none failed. Two quirks of the validator
// are undone here: instance locations are relative to the parent result,
// and a required property that is missing is also validated as null,
// which the "required" error already covers.
func collect(r *jsonschema.EvaluationResult, loc string, v any, f func(loc, msg string)) {
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		followed, missing := 0, 0
		for _, d := range r.Details {
			if d.Valid || keyword(d.EvaluationPath) != k {
				continue
			}
			cv, ok := descend(v, d.InstanceLocation)
			if !ok {
				missing++
				continue
			}
			followed++
			collect(d, loc+d.InstanceLocation, cv, f)
		}
		if followed == 0 && missing == 0 {
			f(loc, r.Errors[k].Error())
		}
	}
}

// keyword returns the keyword a subschema's evaluation path (relative to
// its parent: "/properties/spec", "/allOf/0") starts with.
func keyword(evalPath string) string {
	k, _, _ := strings.Cut(strings.TrimPrefix(evalPath, "/"), "/")
	return k
}

// descend returns the value at a relative JSON pointer of one segment or
// none ("", "/name", "/0") below v, and whether it is there.
func descend(v any, pointer string) (any, bool) {
	if pointer == "" {
		return v, true
	}
	seg := strings.NewReplacer("~1", "/", "~0", "~").Replace(strings.TrimPrefix(pointer, "/"))
	switch x := v.(type) {
	case map[string]any:
		cv, ok := x[seg]
		return cv, ok
	case []any:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= len(x) {
			return nil, false
		}
		return x[i], true
	}
	return nil, false
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
