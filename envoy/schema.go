// Package envoy holds the project's Envoy bootstrap files (envoy.yaml,
// envoy-ratelimit.yaml, envoy-ecds.yaml with the filter configuration it
// reads from ecds/) and the code that checks YAML configuration against
// Envoy's own API: the generated protobuf types of
// github.com/envoyproxy/go-control-plane/envoy, decoded strictly, then the
// generated protoc-gen-validate rules, including inside every typed_config.
//
// The checks run without Envoy. They catch what Envoy would reject at load
// time for schema reasons (a misspelled field, a wrong type, an unknown
// extension, a violated constraint) and name the file, line and field path of
// the bad field. They do not catch semantic errors that only Envoy's
// factories detect (a cluster name that does not exist, a port in use).
package envoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	// Every extension that a checked file names in a typed_config must be
	// linked in, or its Any cannot be resolved ("unable to resolve ...").
	// Add the package here when a file starts using a new extension.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
)

// LoadBootstrap reads the YAML file at path and decodes it with
// ParseBootstrap.
func LoadBootstrap(path string) (*bootstrapv3.Bootstrap, *Doc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseBootstrap(path, data)
}

// ParseBootstrap decodes YAML into Envoy's bootstrap message with
// UnmarshalYAML, then runs Validate on it. name is only used in messages.
func ParseBootstrap(name string, data []byte) (*bootstrapv3.Bootstrap, *Doc, error) {
	var b bootstrapv3.Bootstrap
	doc, err := UnmarshalYAML(name, data, &b)
	if err != nil {
		return nil, nil, err
	}
	if err := Validate(doc, &b); err != nil {
		return nil, nil, err
	}
	return &b, doc, nil
}

// UnmarshalYAML decodes one YAML document into m with protojson, strictly:
// unknown fields, unknown enum values and unresolvable Any types are errors.
// Errors name the file, the YAML line and the field path, e.g.
//
//	envoy/envoy.yaml:41: static_resources.listeners[0].name: ...
//
// name is only used in messages.
func UnmarshalYAML(name string, data []byte, m proto.Message) (*Doc, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if root.Kind == 0 {
		return nil, fmt.Errorf("%s: empty document, want a YAML mapping", name)
	}
	return UnmarshalNode(name, &root, "", m)
}

// UnmarshalNode is UnmarshalYAML for a node of a larger YAML document, such as
// the spec of a Kubernetes object. prefix is the node's own path in the
// document ("spec"), used in messages.
func UnmarshalNode(name string, n *yaml.Node, prefix string, m proto.Message) (*Doc, error) {
	doc, err := NodeDoc(name, n, prefix)
	if err != nil {
		return nil, err
	}
	opts := protojson.UnmarshalOptions{DiscardUnknown: false, Resolver: protoregistry.GlobalTypes}
	if err := opts.Unmarshal(doc.JSON, m); err != nil {
		return nil, doc.wrapDecodeError(err)
	}
	return doc, nil
}

// NodeDoc converts a YAML node to JSON, recording where each field is, for
// a node that has no protobuf type (a custom resource checked against its
// CRD schema alone). name and prefix are as for UnmarshalNode.
func NodeDoc(name string, n *yaml.Node, prefix string) (*Doc, error) {
	doc := &Doc{Name: name, Prefix: prefix}
	var buf bytes.Buffer
	w := jsonWriter{buf: &buf, doc: doc}
	if err := w.node(n, prefix); err != nil {
		// The writer's errors start with the line: "12: path: ...".
		return nil, fmt.Errorf("%s:%w", name, err)
	}
	doc.JSON = buf.Bytes()
	return doc, nil
}

// Doc is a YAML document converted to JSON, with the position of every field
// so that errors can point back at the YAML.
type Doc struct {
	// Name is the file name used in messages.
	Name string
	// Prefix is the path of the decoded node in its YAML document ("" for
	// a whole document); Validate and WasmPlugins put it in front of the
	// paths they report.
	Prefix string
	// JSON is the document as single-line JSON.
	JSON  []byte
	marks []mark // in increasing pos order
}

// mark records where a field or list element starts in the JSON.
type mark struct {
	pos  int // rune offset in Doc.JSON, as protojson counts columns
	path string
	line int // 1-based YAML line
}

// Line returns the YAML line of the field with this path (as built by Walk
// and in error messages), or 0 when the path is not in the document.
func (d *Doc) Line(path string) int {
	for _, m := range d.marks {
		if m.path == path {
			return m.line
		}
	}
	return 0
}

// At formats a location for messages: "file:line: path".
func (d *Doc) At(path string) string {
	if l := d.Line(path); l > 0 {
		return fmt.Sprintf("%s:%d: %s", d.Name, l, path)
	}
	return fmt.Sprintf("%s: %s", d.Name, path)
}

// protojsonPos matches the position protojson puts in its errors.
var protojsonPos = regexp.MustCompile(`\(line (\d+):(\d+)\): `)

// wrapDecodeError turns protojson's "(line 1:COL)" into the YAML path and
// line of the field that starts last at or before COL.
func (d *Doc) wrapDecodeError(err error) error {
	msg := err.Error()
	loc := protojsonPos.FindStringSubmatchIndex(msg)
	if loc == nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	col, _ := strconv.Atoi(msg[loc[4]:loc[5]])
	pos := col - 1
	i := sort.Search(len(d.marks), func(i int) bool { return d.marks[i].pos > pos }) - 1
	detail := strings.TrimPrefix(msg[loc[1]:], "proto: ")
	if i < 0 {
		return fmt.Errorf("%s: %s", d.Name, detail)
	}
	m := d.marks[i]
	return fmt.Errorf("%s:%d: %s: %s", d.Name, m.line, m.path, detail)
}

// jsonWriter writes a yaml.Node as JSON and records a mark per field.
type jsonWriter struct {
	buf   *bytes.Buffer
	doc   *Doc
	runes int // runes in buf up to lastLen
	last  int // len(buf) when runes was counted
	depth int
}

func (w *jsonWriter) pos() int {
	b := w.buf.Bytes()
	w.runes += utf8.RuneCount(b[w.last:])
	w.last = len(b)
	return w.runes
}

func (w *jsonWriter) mark(path string, line int) {
	w.doc.marks = append(w.doc.marks, mark{pos: w.pos(), path: path, line: line})
}

func (w *jsonWriter) node(n *yaml.Node, path string) error {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 200 {
		return fmt.Errorf("%d: %s: nesting deeper than 200 levels", n.Line, path)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("%d: got %d documents, want 1", n.Line, len(n.Content))
		}
		return w.node(n.Content[0], path)
	case yaml.AliasNode:
		return w.node(n.Alias, path)
	case yaml.MappingNode:
		w.buf.WriteByte('{')
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("%d: %s: mapping key of kind %d, want a string", k.Line, path, k.Kind)
			}
			if k.Value == "<<" && k.Tag == "!!merge" {
				return fmt.Errorf("%d: %s: YAML merge keys (<<) are not supported, write the fields out", k.Line, path)
			}
			child := k.Value
			if path != "" {
				child = path + "." + k.Value
			}
			if prev, dup := seen[k.Value]; dup {
				return fmt.Errorf("%d: %s: duplicate key %q (first on line %d)", k.Line, child, k.Value, prev)
			}
			seen[k.Value] = k.Line
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.mark(child, k.Line)
			kb, _ := json.Marshal(k.Value)
			w.buf.Write(kb)
			w.buf.WriteByte(':')
			if err := w.node(v, child); err != nil {
				return err
			}
		}
		w.buf.WriteByte('}')
	case yaml.SequenceNode:
		w.buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			child := fmt.Sprintf("%s[%d]", path, i)
			w.mark(child, v.Line)
			if err := w.node(v, child); err != nil {
				return err
			}
		}
		w.buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%d: %s: %w", n.Line, path, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%d: %s: value %q has no JSON form: %w", n.Line, path, n.Value, err)
		}
		w.buf.Write(b)
	default:
		return fmt.Errorf("%d: %s: unexpected YAML node kind %d", n.Line, path, n.Kind)
	}
	return nil
}

// validator is implemented by every message generated by protoc-gen-validate.
type validator interface {
	ValidateAll() error
}

// Validate runs the generated validation (ValidateAll) on m and on every
// message packed in an Any field below it. Envoy's own generated code stops
// at an Any, so without the second part a typed_config is never validated.
// All failures are returned, each prefixed with the file, line and path of
// the message that failed.
func Validate(doc *Doc, m proto.Message) error {
	var errs []error
	check := func(path string, msg proto.Message) {
		v, ok := msg.(validator)
		if !ok {
			return
		}
		err := v.ValidateAll()
		if err == nil {
			return
		}
		for _, l := range flatten(joinPath(doc.Prefix, path), err) {
			errs = append(errs, fmt.Errorf("%s: %s", doc.At(l.path), l.reason))
		}
	}
	check("", m)
	err := Walk(m, func(path string, msg proto.Message) error {
		if a, ok := msg.(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				return fmt.Errorf("%s: %w", doc.At(joinPath(doc.Prefix, path)), err)
			}
			check(path, inner)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Walk calls f for every message below m (not m itself), depth first, with its
// path in the YAML spelling (snake_case field names, [i] for list elements,
// [key] for map values). A packed Any is visited as the Any, then its
// contents are walked with the same path prefix, so the fields of a
// typed_config appear as "...typed_config.http_filters[0]". f's first error
// stops the walk.
func Walk(m proto.Message, f func(path string, msg proto.Message) error) error {
	return walk(m.ProtoReflect(), "", f)
}

func walk(m protoreflect.Message, path string, f func(string, proto.Message) error) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return walk(inner.ProtoReflect(), path, f)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		child := name
		if path != "" {
			child = path + "." + name
		}
		visit := func(p string, mv protoreflect.Message) bool {
			if err = f(p, mv.Interface()); err != nil {
				return false
			}
			err = walk(mv, p, f)
			return err == nil
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if !visit(fmt.Sprintf("%s[%d]", child, i), l.Get(i).Message()) {
					return false
				}
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			mp := v.Map()
			keys := make([]string, 0, mp.Len())
			vals := map[string]protoreflect.Message{}
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				keys = append(keys, k.String())
				vals[k.String()] = mv.Message()
				return true
			})
			sort.Strings(keys)
			for _, k := range keys {
				if !visit(child+"."+k, vals[k]) {
					return false
				}
			}
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			return visit(child, v.Message())
		}
		return true
	})
	return err
}

// pgvError is the accessor set of every protoc-gen-validate error type.
type pgvError interface {
	Field() string
	Reason() string
	Cause() error
}

// pgvLeaf is one violated rule, with the field path in the YAML spelling.
type pgvLeaf struct {
	path   string
	reason string
}

// flatten turns a protoc-gen-validate error tree (MultiErrors of
// ValidationErrors whose causes are MultiErrors again for embedded
// messages) into one entry per violated rule. The Go field names in the
// errors ("Listeners[0]", "StatPrefix") become the YAML path
// ("listeners[0]", "stat_prefix").
func flatten(path string, err error) []pgvLeaf {
	if multi, ok := err.(interface{ AllErrors() []error }); ok {
		var out []pgvLeaf
		for _, e := range multi.AllErrors() {
			out = append(out, flatten(path, e)...)
		}
		return out
	}
	v, ok := err.(pgvError)
	if !ok {
		return []pgvLeaf{{path: path, reason: err.Error()}}
	}
	child := joinPath(path, yamlFieldPath(v.Field()))
	if c := v.Cause(); c != nil {
		if _, nested := c.(interface{ AllErrors() []error }); nested {
			return flatten(child, c)
		}
		if _, nested := c.(pgvError); nested {
			return flatten(child, c)
		}
		return []pgvLeaf{{path: child, reason: v.Reason() + ": " + c.Error()}}
	}
	return []pgvLeaf{{path: child, reason: v.Reason()}}
}

func joinPath(path, field string) string {
	switch {
	case field == "":
		return path
	case path == "":
		return field
	}
	return path + "." + field
}

// yamlFieldPath turns a protoc-gen-validate field ("StatPrefix",
// "Listeners[0]", "TypedExtensionProtocolOptions[name]") into the YAML
// spelling used by Walk ("stat_prefix", "listeners[0]",
// "typed_extension_protocol_options.name").
func yamlFieldPath(field string) string {
	name, rest, indexed := strings.Cut(field, "[")
	var b strings.Builder
	for i, r := range name {
		if 'A' <= r && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	if indexed {
		key := strings.TrimSuffix(rest, "]")
		if _, err := strconv.Atoi(key); err == nil {
			b.WriteString("[" + key + "]")
		} else {
			b.WriteString("." + key)
		}
	}
	return b.String()
}
