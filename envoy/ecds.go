package envoy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"
)

// WasmTypeURL is the type of the wasm HTTP filter's configuration, the one
// a config_discovery of the plugin permits (type_urls).
const WasmTypeURL = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"

// ExtensionConfigDir is the folder beside a shipped bootstrap that holds
// the files of its watched directories (envoy/ecds for
// envoy/envoy-ecds.yaml): the file a path_config_source names is the file
// of the same name there.
func ExtensionConfigDir(bootstrap string) string {
	return filepath.Join(filepath.Dir(bootstrap), "ecds")
}

// DiscoveredFilter is an HTTP filter whose configuration Envoy's extension
// config discovery (ECDS) delivers (config_discovery instead of
// typed_config).
type DiscoveredFilter struct {
	// Path is where the HttpFilter sits, e.g.
	// "static_resources.listeners[0]....http_filters[0]".
	Path string
	// Name is the filter's name: the name of the TypedExtensionConfig
	// Envoy asks for.
	Name string
	// Source is the filter's config_discovery.
	Source *corev3.ExtensionConfigSource
}

// DiscoveredFilters returns every HTTP filter below m configured by
// config_discovery, in walk order.
func DiscoveredFilters(doc *Doc, m proto.Message) ([]DiscoveredFilter, error) {
	var out []DiscoveredFilter
	err := Walk(m, func(path string, msg proto.Message) error {
		if hf, ok := msg.(*hcmv3.HttpFilter); ok && hf.GetConfigDiscovery() != nil {
			out = append(out, DiscoveredFilter{Path: joinPath(doc.Prefix, path), Name: hf.GetName(), Source: hf.GetConfigDiscovery()})
		}
		return nil
	})
	return out, err
}

// ExtensionConfig is a file that a path_config_source reads for a
// filter's config_discovery: a discovery response with one resource, the
// filter's TypedExtensionConfig.
type ExtensionConfig struct {
	// Doc is the file as read, for messages (Doc.At).
	Doc *Doc
	// Version is the response's version_info.
	Version string
	// Config is the resource.
	Config *corev3.TypedExtensionConfig
}

// LoadExtensionConfig reads the file at path and decodes it with
// ParseExtensionConfig.
func LoadExtensionConfig(path string) (*ExtensionConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseExtensionConfig(path, data)
}

// ParseExtensionConfig decodes the YAML (or JSON) of a filter's
// path_config_source file strictly, as ParseBootstrap does a bootstrap: the
// keys version_info and resources, exactly one resource, a
// TypedExtensionConfig, its typed_config resolved and validated. Errors
// name the file, the line and the path. name is only used in messages.
func ParseExtensionConfig(name string, data []byte) (*ExtensionConfig, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a YAML mapping with version_info and resources", name)
	}
	top := root.Content[0]
	out := &ExtensionConfig{}
	var resources *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "version_info":
			out.Version = v.Value
		case "resources":
			resources = v
		default:
			return nil, fmt.Errorf("%s:%d: %s: unknown key, want version_info and resources", name, k.Line, k.Value)
		}
	}
	if resources == nil || resources.Kind != yaml.SequenceNode || len(resources.Content) != 1 {
		return nil, fmt.Errorf("%s:%d: resources: want a list of exactly one TypedExtensionConfig", name, top.Line)
	}
	var a anypb.Any
	doc, err := UnmarshalNode(name, resources.Content[0], "resources[0]", &a)
	if err != nil {
		return nil, err
	}
	if err := Validate(doc, &a); err != nil {
		return nil, err
	}
	var tec corev3.TypedExtensionConfig
	if !a.MessageIs(&tec) {
		return nil, fmt.Errorf("%s: resources[0]: got type %q, want type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig", doc.At("resources[0]"), a.GetTypeUrl())
	}
	if err := a.UnmarshalTo(&tec); err != nil {
		return nil, fmt.Errorf("%s: %w", doc.At("resources[0]"), err)
	}
	out.Doc, out.Config = doc, &tec
	return out, nil
}

// Marshal is the file as Envoy reads it: JSON, which Envoy's YAML reader
// takes too, so it may keep the name *.yaml.
func (c *ExtensionConfig) Marshal() ([]byte, error) {
	a, err := anypb.New(c.Config)
	if err != nil {
		return nil, err
	}
	res, err := protojson.Marshal(a)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(struct {
		Version   string            `json:"version_info,omitempty"`
		Resources []json.RawMessage `json:"resources"`
	}{c.Version, []json.RawMessage{res}}, "", "  ")
}

// Clone returns a deep copy, for a new version.
func (c *ExtensionConfig) Clone() *ExtensionConfig {
	return &ExtensionConfig{Doc: c.Doc, Version: c.Version, Config: proto.Clone(c.Config).(*corev3.TypedExtensionConfig)}
}

// EditPlugin calls edit with the wasm PluginConfig of the resource, and
// keeps its changes. The resource must be the wasm HTTP filter's.
func (c *ExtensionConfig) EditPlugin(edit func(pc *wasmv3.PluginConfig) error) error {
	var w wasmfilterv3.Wasm
	changed, err := editAny(c.Config.GetTypedConfig(), &w, c.Config.GetName(), func() (bool, error) {
		if w.GetConfig() == nil {
			return false, fmt.Errorf("envoy: extension config %q: the wasm filter has no config", c.Config.GetName())
		}
		return true, edit(w.GetConfig())
	})
	if err == nil && !changed {
		err = fmt.Errorf("envoy: extension config %q: typed_config is %q, want %s", c.Config.GetName(), c.Config.GetTypedConfig().GetTypeUrl(), WasmTypeURL)
	}
	return err
}

// ReplaceFile gives path the content data the way Envoy's watched
// directories expect: written in full to a new file in the same
// directory, then renamed over path (one atomic move into the directory,
// as `mv` does). A reader sees the old file or the new one, never a part.
func ReplaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// EditDiscoveredFilters calls edit with the name and the config_discovery
// of every HTTP filter configured by ECDS in the bootstrap's listeners,
// in order, and keeps its changes. It returns how many it found. Tests use
// it to point a shipped bootstrap at a control plane of their own.
func EditDiscoveredFilters(b *bootstrapv3.Bootstrap, edit func(name string, src *corev3.ExtensionConfigSource) error) (int, error) {
	n := 0
	for _, ln := range b.GetStaticResources().GetListeners() {
		for _, fc := range ln.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				_, err := editAny(f.GetTypedConfig(), &hcm, f.GetName(), func() (bool, error) {
					changed := false
					for _, hf := range hcm.GetHttpFilters() {
						if src := hf.GetConfigDiscovery(); src != nil {
							if err := edit(hf.GetName(), src); err != nil {
								return false, err
							}
							changed = true
							n++
						}
					}
					return changed, nil
				})
				if err != nil {
					return n, err
				}
			}
		}
	}
	return n, nil
}

// localizeDiscovery points every path_config_source of the listeners'
// config_discovery filters at dir: the file keeps its name, and dir
// becomes the watched directory. It returns how many it moved.
func localizeDiscovery(b *bootstrapv3.Bootstrap, dir string) (int, error) {
	moved := 0
	_, err := EditDiscoveredFilters(b, func(_ string, src *corev3.ExtensionConfigSource) error {
		if pcs := src.GetConfigSource().GetPathConfigSource(); pcs != nil {
			pcs.Path = filepath.Join(dir, filepath.Base(pcs.GetPath()))
			pcs.WatchedDirectory = &corev3.WatchedDirectory{Path: dir}
			moved++
		}
		return nil
	})
	return moved, err
}

// SetModule points the resource's wasm filter at the module file path
// (vm_config.code.local.filename).
func (c *ExtensionConfig) SetModule(path string) error {
	return c.EditPlugin(func(pc *wasmv3.PluginConfig) error {
		local := pc.GetVmConfig().GetCode().GetLocal()
		if local == nil {
			return fmt.Errorf("envoy: extension config %q: vm_config.code has no local file", c.Config.GetName())
		}
		local.Specifier = &corev3.DataSource_Filename{Filename: path}
		return nil
	})
}

// stageExtensionConfigs writes, for each shipped path, the file of the
// same name in from with its module moved to module, into to.
func stageExtensionConfigs(shipped []string, from, to, module string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, p := range shipped {
		c, err := LoadExtensionConfig(filepath.Join(from, filepath.Base(p)))
		if err != nil {
			return err
		}
		if module != "" {
			if err := c.SetModule(module); err != nil {
				return err
			}
		}
		data, err := c.Marshal()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(p)), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// discoveryPaths returns the path_config_source paths of the bootstrap's
// config_discovery filters, as the bootstrap has them.
func discoveryPaths(b *bootstrapv3.Bootstrap) ([]string, error) {
	filters, err := DiscoveredFilters(&Doc{}, b)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range filters {
		if p := f.Source.GetConfigSource().GetPathConfigSource().GetPath(); p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
