package envoy

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Local says where a shipped bootstrap runs on one machine: the only
// things Localize changes in it. Empty fields are left as the file has
// them.
type Local struct {
	// Listen is host:port for the listener (the file must have exactly
	// one), Admin for the admin interface.
	Listen, Admin string
	// Upstream is host:port for every endpoint of the cluster named
	// UpstreamCluster ("upstream" when empty).
	Upstream, UpstreamCluster string
	// Module is the path of the .wasm for every wasm HTTP filter's
	// vm_config (code.local.filename). A filter configured by
	// config_discovery has its module in the file it reads, which
	// Localize does not change (Launch stages a localized copy).
	Module string
	// ExtensionConfigDir is the folder every path_config_source of an
	// HTTP filter's config_discovery is moved into: the file keeps its
	// name, and the folder becomes the watched directory.
	ExtensionConfigDir string
}

// Localize changes the addresses and the module path of a bootstrap as l
// says, and nothing else: the listener's, the admin's and the upstream
// cluster's socket addresses, the local file of every wasm filter, and
// the file and watched directory of every filter configured by
// config_discovery from a path. It fails, naming what it looked for, when the bootstrap lacks one of
// them, so that a changed file is not run with a part silently left as
// shipped.
func Localize(b *bootstrapv3.Bootstrap, l Local) error {
	if l.Admin != "" {
		if err := setAddress(b.GetAdmin().GetAddress(), l.Admin, "admin.address"); err != nil {
			return err
		}
	}
	listeners := b.GetStaticResources().GetListeners()
	if l.Listen != "" {
		if len(listeners) != 1 {
			return fmt.Errorf("envoy: Localize: the bootstrap has %d listeners, want 1", len(listeners))
		}
		if err := setAddress(listeners[0].GetAddress(), l.Listen, "static_resources.listeners[0].address"); err != nil {
			return err
		}
	}
	if l.Upstream != "" {
		name := l.UpstreamCluster
		if name == "" {
			name = "upstream"
		}
		found := 0
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() != name {
				continue
			}
			for _, eps := range c.GetLoadAssignment().GetEndpoints() {
				for _, ep := range eps.GetLbEndpoints() {
					if err := setAddress(ep.GetEndpoint().GetAddress(), l.Upstream, "cluster "+name+" endpoint"); err != nil {
						return err
					}
					found++
				}
			}
		}
		if found == 0 {
			return fmt.Errorf("envoy: Localize: no endpoint in a cluster named %q", name)
		}
	}
	discovered := 0
	if l.ExtensionConfigDir != "" {
		n, err := localizeDiscovery(b, l.ExtensionConfigDir)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("envoy: Localize: no HTTP filter with a config_discovery from a path in the listeners")
		}
		discovered = n
	}
	if l.Module != "" {
		n, err := setModule(listeners, l.Module)
		if err != nil {
			return err
		}
		if n == 0 && discovered == 0 {
			return fmt.Errorf("envoy: Localize: no wasm HTTP filter with a local file in the listeners")
		}
	}
	return nil
}

// setAddress sets a socket address to hostPort.
func setAddress(a *corev3.Address, hostPort, where string) error {
	sa := a.GetSocketAddress()
	if sa == nil {
		return fmt.Errorf("envoy: Localize: %s is not a socket address", where)
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("envoy: Localize: %s: %q is not host:port: %w", where, hostPort, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("envoy: Localize: %s: port %q: %w", where, port, err)
	}
	sa.Address = host
	sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(p)}
	return nil
}

// setModule points the local file of every wasm HTTP filter of the
// listeners at path, and returns how many it changed.
func setModule(listeners []*listenerv3.Listener, path string) (int, error) {
	return editPlugins(listeners, func(pc *wasmv3.PluginConfig) (bool, error) {
		local := pc.GetVmConfig().GetCode().GetLocal()
		if local == nil {
			return false, nil
		}
		local.Specifier = &corev3.DataSource_Filename{Filename: path}
		return true, nil
	})
}

// EditPlugins calls edit with the PluginConfig of every wasm HTTP filter in
// the bootstrap's listeners (their HTTP connection managers), in order,
// and keeps its changes. It returns how many it found. Tests use it to run
// a shipped bootstrap with another plugin configuration or flag
// (SetConfiguration, allow_on_headers_stop_iteration).
func EditPlugins(b *bootstrapv3.Bootstrap, edit func(pc *wasmv3.PluginConfig) error) (int, error) {
	return editPlugins(b.GetStaticResources().GetListeners(), func(pc *wasmv3.PluginConfig) (bool, error) {
		return true, edit(pc)
	})
}

// DropWasmFilters removes every wasm HTTP filter from the bootstrap's
// listeners (the same proxy without the plugin, for a baseline) and
// returns how many it removed.
func DropWasmFilters(b *bootstrapv3.Bootstrap) (int, error) {
	n := 0
	for _, ln := range b.GetStaticResources().GetListeners() {
		for _, fc := range ln.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				_, err := editAny(f.GetTypedConfig(), &hcm, f.GetName(), func() (bool, error) {
					kept := hcm.HttpFilters[:0]
					for _, hf := range hcm.GetHttpFilters() {
						if hf.GetTypedConfig().MessageIs(&wasmfilterv3.Wasm{}) {
							n++
							continue
						}
						kept = append(kept, hf)
					}
					changed := len(kept) != len(hcm.HttpFilters)
					hcm.HttpFilters = kept
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

// SetConfiguration sets a PluginConfig's plugin configuration to the JSON
// text js, as a google.protobuf.StringValue (the form the plugin reads).
// The text must be a JSON object.
func SetConfiguration(pc *wasmv3.PluginConfig, js string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return fmt.Errorf("envoy: SetConfiguration: the plugin configuration is not a JSON object: %w", err)
	}
	a, err := anypb.New(wrapperspb.String(js))
	if err != nil {
		return err
	}
	pc.Configuration = a
	return nil
}

// Configuration returns a PluginConfig's plugin configuration, the JSON
// text SetConfiguration sets.
func Configuration(pc *wasmv3.PluginConfig) (string, error) {
	var sv wrapperspb.StringValue
	if err := pc.GetConfiguration().UnmarshalTo(&sv); err != nil {
		return "", fmt.Errorf("envoy: the plugin configuration is not a google.protobuf.StringValue: %w", err)
	}
	return sv.GetValue(), nil
}

// editPlugins calls edit with the PluginConfig of every wasm HTTP filter
// of the listeners' HTTP connection managers, packs back those it
// changed, and returns how many it changed.
func editPlugins(listeners []*listenerv3.Listener, edit func(pc *wasmv3.PluginConfig) (bool, error)) (int, error) {
	n := 0
	for _, ln := range listeners {
		for _, fc := range ln.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				_, err := editAny(f.GetTypedConfig(), &hcm, f.GetName(), func() (bool, error) {
					changed := false
					for _, hf := range hcm.GetHttpFilters() {
						var w wasmfilterv3.Wasm
						ok, err := editAny(hf.GetTypedConfig(), &w, hf.GetName(), func() (bool, error) {
							if w.GetConfig() == nil {
								return false, nil
							}
							return edit(w.GetConfig())
						})
						if err != nil {
							return false, err
						}
						if ok {
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

// editAny unpacks a into m when a holds m's type, lets edit change m, and
// packs m back into a in place when edit reports a change. It reports
// whether a changed; an a of another type is left alone.
func editAny(a *anypb.Any, m proto.Message, name string, edit func() (bool, error)) (bool, error) {
	if a == nil || !a.MessageIs(m) {
		return false, nil
	}
	if err := a.UnmarshalTo(m); err != nil {
		return false, fmt.Errorf("envoy: %s: %w", name, err)
	}
	changed, err := edit()
	if err != nil || !changed {
		return false, err
	}
	return true, a.MarshalFrom(m)
}

// JSON is the bootstrap as Envoy reads it from a file named *.json.
func JSON(b *bootstrapv3.Bootstrap) ([]byte, error) {
	return protojson.MarshalOptions{Indent: "  "}.Marshal(b)
}
