package envoy

import (
	"fmt"

	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// WasmPlugin is one envoy.extensions.wasm.v3.PluginConfig found in a config.
type WasmPlugin struct {
	// Path is where the PluginConfig sits, e.g.
	// "static_resources.listeners[0]....http_filters[0].typed_config.config".
	Path string
	// Config is the PluginConfig itself.
	Config *wasmv3.PluginConfig
	// Configuration is the plugin configuration as the plugin reads it
	// (proxy_get_buffer_bytes of type 7): the string of the StringValue.
	Configuration string
}

// WasmPlugins returns every wasm PluginConfig below m, in walk order. The
// plugin configuration must be a google.protobuf.StringValue: Envoy passes a
// StringValue to the plugin unwrapped, and it is the form the project's
// plugin reads; anything else is an error that names the path.
func WasmPlugins(doc *Doc, m proto.Message) ([]WasmPlugin, error) {
	var out []WasmPlugin
	err := Walk(m, func(path string, msg proto.Message) error {
		pc, ok := msg.(*wasmv3.PluginConfig)
		if !ok {
			return nil
		}
		path = joinPath(doc.Prefix, path)
		p := WasmPlugin{Path: path, Config: pc}
		if c := pc.GetConfiguration(); c != nil {
			var s wrapperspb.StringValue
			if !c.MessageIs(&s) {
				return fmt.Errorf("%s.configuration: got type %q, want type.googleapis.com/google.protobuf.StringValue holding the plugin's JSON", doc.At(path), c.GetTypeUrl())
			}
			if err := c.UnmarshalTo(&s); err != nil {
				return fmt.Errorf("%s.configuration: %w", doc.At(path), err)
			}
			p.Configuration = s.GetValue()
		}
		out = append(out, p)
		return nil
	})
	return out, err
}
