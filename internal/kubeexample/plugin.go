package kubeexample

import (
	"fmt"
	"sync"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/pluginconfig"
)

// PluginConfig checks the plugin configuration cfg (JSON) of an example's
// field at path, as go run ./cmd/wafcheck does (pluginconfig.Check: every
// key, and every rule set compiled), and returns it parsed. kind names
// the object in messages: none of the examples' kinds can set Envoy's
// allow_on_headers_stop_iteration, so hold_headers_until_inspected, which
// needs it, must stay off.
func PluginConfig(doc *envoy.Doc, path string, cfg []byte, kind string) (*pluginconfig.Config, error) {
	if err := check(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", doc.At(path), err)
	}
	pc, err := pluginconfig.Parse(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doc.At(path), err)
	}
	if pc.Filter.HoldHeadersUntilInspected {
		return nil, fmt.Errorf("%s: hold_headers_until_inspected is true, but a %s cannot set Envoy's allow_on_headers_stop_iteration, without which the plugin answers every held request 500 after hold_headers_timeout_ms: keep it false", doc.At(path), kind)
	}
	return pc, nil
}

// checked memoizes pluginconfig.Check by configuration: the examples and
// their broken copies carry the same few, and each check compiles the CRS.
var checked sync.Map // string -> error

func check(cfg []byte) error {
	if v, ok := checked.Load(string(cfg)); ok {
		err, _ := v.(error) // nil for a configuration that passed
		return err
	}
	err := pluginconfig.Check(cfg)
	checked.Store(string(cfg), err)
	return err
}
