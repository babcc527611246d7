// Package kubeexample checks the repository's Kubernetes examples (istio/,
// gateway/) in go test, without a cluster: it reads their objects, validates
// each spec against the OpenAPI schema of the CRD the API server would
// validate it with, and checks the image digest they pin against what
// `go run mage.go image` wrote. The rules of each kind live in the tests of
// the example's directory.
package kubeexample

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// Object is one Kubernetes object of an example file.
type Object struct {
	File       string    `yaml:"-"`
	Doc        int       `yaml:"-"` // index of the YAML document in the file
	APIVersion string    `yaml:"apiVersion"`
	Kind       string    `yaml:"kind"`
	Metadata   yaml.Node `yaml:"metadata"`
	Spec       yaml.Node `yaml:"spec"`
	Data       yaml.Node `yaml:"data"`
}

// GVK is the object's "apiVersion/kind", e.g.
// "gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy".
func (o *Object) GVK() string { return o.APIVersion + "/" + o.Kind }

// Meta is the part of an object's metadata the examples set.
type Meta struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

// Meta decodes the object's metadata strictly and requires a name and a
// namespace: every example is namespaced, and a policy must sit in the
// namespace of what it targets.
func (o *Object) Meta() (Meta, error) {
	var m Meta
	if err := DecodeKnown(&o.Metadata, &m); err != nil {
		return m, fmt.Errorf("%s: metadata: %w", o.File, err)
	}
	if m.Name == "" || m.Namespace == "" {
		return m, fmt.Errorf("%s: metadata: want a name and a namespace", o.File)
	}
	return m, nil
}

// ReadObjects reads every YAML document of the file as a Kubernetes object.
// Unknown top-level keys are errors.
func ReadObjects(name string, data []byte) ([]*Object, error) {
	var out []*Object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		o := &Object{File: name, Doc: i}
		if err := DecodeKnown(&root, o); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no objects", name)
	}
	return out, nil
}

// DecodeKnown decodes n into v, refusing keys v does not have.
func DecodeKnown(n *yaml.Node, v any) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	return dec.Decode(v)
}

// FindNode follows mapping keys (string) and sequence indexes (int) from n;
// nil when the path is not there.
func FindNode(n *yaml.Node, path ...any) *yaml.Node {
	for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else {
			n = n.Content[0]
		}
	}
	if len(path) == 0 {
		return n
	}
	switch p := path[0].(type) {
	case string:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				return FindNode(n.Content[i+1], path[1:]...)
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && p < len(n.Content) {
			return FindNode(n.Content[p], path[1:]...)
		}
	}
	return nil
}
