package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wafguard/wafguard/envoy"
)

// ShippedBootstrap is the Envoy bootstrap the Envoy rows run, as an
// operator would: only its addresses and module are changed
// (envoy.Localize), and for IDEnvoyPass the plugin, for IDEnvoy the wasm
// filter removed.
const ShippedBootstrap = "envoy/envoy.yaml"

// envoyWait is the least time an Envoy row may take to serve: V8 compiles
// the whole module before the first VM starts.
const envoyWait = 4 * time.Minute

// startEnvoy runs the official Envoy (envoy.Binary) with one worker,
// pinned to the server CPU, in front of the bench's upstream.
func startEnvoy(ctx context.Context, s *Server, env *Env) (*Running, error) {
	bin, v, err := envoy.Binary()
	if err != nil {
		return nil, err
	}
	b, _, err := envoy.LoadBootstrap(ShippedBootstrap)
	if err != nil {
		return nil, err
	}
	listen, admin, err := listenAdminAddrs()
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(env.UpstreamURL)
	if err != nil {
		return nil, err
	}
	l := envoy.Local{Listen: listen, Admin: admin, Upstream: up.Host}
	switch s.ID {
	case IDEnvoy:
		if _, err := envoy.DropWasmFilters(b); err != nil {
			return nil, err
		}
	case IDEnvoyPass:
		l.Module = env.PassWasm
	default:
		l.Module = env.MainWasm
	}
	if l.Module != "" {
		if l.Module, err = filepath.Abs(l.Module); err != nil {
			return nil, err
		}
	}
	if err := envoy.Localize(b, l); err != nil {
		return nil, err
	}
	switch s.ID {
	case IDEnvoyPass:
		if _, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error { return envoy.SetConfiguration(pc, "{}") }); err != nil {
			return nil, err
		}
	case IDEnvoyBase:
		if _, err := envoy.EditPlugins(b, withoutCRS); err != nil {
			return nil, err
		}
	case IDEnvoyHold:
		if _, err := envoy.EditPlugins(b, withHold); err != nil {
			return nil, err
		}
	}
	js, err := envoy.JSON(b)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(env.WorkDir, s.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "envoy.json")
	if err := os.WriteFile(cfg, js, 0o644); err != nil {
		return nil, err
	}
	env.Log(fmt.Sprintf("%s: Envoy %s, %s localized to %s", s.ID, v, ShippedBootstrap, cfg))
	p, err := StartProc(s.ID, env.multiCPUs(), nil, env.WorkDir, bin, "-c", cfg, "--concurrency", strconv.Itoa(env.workers()),
		"--base-id", strconv.Itoa(envoyBaseID(s.ID)), "-l", "warning", "--disable-hot-restart")
	if err != nil {
		return nil, err
	}
	wait := max(env.ReadyWait, envoyWait)
	if err := p.WaitHTTP(ctx, "http://"+admin+"/ready", 200, wait); err != nil {
		p.Stop(2 * time.Second)
		return nil, err
	}
	if s.ID != IDEnvoy {
		// /ready can answer before the workers' VMs have started: wait
		// for the main thread's and every worker's.
		c := &http.Client{Timeout: 2 * time.Second}
		for end := time.Now().Add(wait); ; {
			if n, err := envoy.AdminStat(c, "http://"+admin, "wasm.envoy.wasm.runtime.v8.active"); err == nil && n >= env.workers()+1 {
				break
			}
			if p.Exited() || time.Now().After(end) {
				p.Stop(2 * time.Second)
				return nil, fmt.Errorf("%s: no worker VM within %s; log:\n%s", s.ID, wait, p.LogTail(2000))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return &Running{Proc: p, URL: "http://" + listen}, nil
}

// pluginConfigKeys decodes the plugin configuration of pc, a JSON object
// in a StringValue as envoy/envoy.yaml ships it, into its keys.
func pluginConfigKeys(pc *wasmv3.PluginConfig) (map[string]json.RawMessage, error) {
	var sv wrapperspb.StringValue
	if err := pc.GetConfiguration().UnmarshalTo(&sv); err != nil {
		return nil, fmt.Errorf("the plugin configuration is not a string: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(sv.GetValue()), &cfg); err != nil {
		return nil, fmt.Errorf("the plugin configuration: %w", err)
	}
	return cfg, nil
}

// editShipped decodes the plugin configuration of pc (pluginConfigKeys),
// lets edit change its keys, and sets it back. id names the row in errors.
func editShipped(pc *wasmv3.PluginConfig, id string, edit func(cfg map[string]json.RawMessage) error) error {
	cfg, err := pluginConfigKeys(pc)
	if err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	if err := edit(cfg); err != nil {
		return fmt.Errorf("%s: %w", id, err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return envoy.SetConfiguration(pc, string(js))
}

// withoutCRS keeps the shipped plugin configuration and drops from each of
// its rule sets the lines that include the CRS (its setup and its rules),
// so that Coraza's recommended settings, the engine mode and the body limits
// stay as shipped. It fails when no line was dropped: the row would then
// measure the CRS after all.
func withoutCRS(pc *wasmv3.PluginConfig) error {
	return editShipped(pc, IDEnvoyBase, func(cfg map[string]json.RawMessage) error {
		var sets map[string][]string
		if err := json.Unmarshal(cfg["directives_map"], &sets); err != nil {
			return fmt.Errorf("the shipped directives_map: %w", err)
		}
		dropped := 0
		for name, lines := range sets {
			kept := lines[:0]
			for _, l := range lines {
				if strings.HasPrefix(l, "Include @crs-setup-conf") || strings.HasPrefix(l, "Include @owasp_crs/") {
					dropped++
					continue
				}
				kept = append(kept, l)
			}
			sets[name] = kept
		}
		if dropped == 0 {
			return fmt.Errorf("no rule set of %s includes the CRS", ShippedBootstrap)
		}
		js, err := json.Marshal(sets)
		if err != nil {
			return err
		}
		cfg["directives_map"] = js
		return nil
	})
}

// withHold turns hold_headers_until_inspected on in the shipped plugin
// configuration. The mode needs allow_on_headers_stop_iteration, which the
// shipped bootstrap sets: withHold fails when it is off.
func withHold(pc *wasmv3.PluginConfig) error {
	if !pc.GetAllowOnHeadersStopIteration().GetValue() {
		return fmt.Errorf("%s: %s does not set allow_on_headers_stop_iteration, which the hold mode needs", IDEnvoyHold, ShippedBootstrap)
	}
	return editShipped(pc, IDEnvoyHold, func(cfg map[string]json.RawMessage) error {
		cfg["hold_headers_until_inspected"] = json.RawMessage("true")
		return nil
	})
}

// envoyBaseID is a --base-id for the row id, distinct from the other
// rows' and from other benches' running at once.
func envoyBaseID(id string) int {
	n := 400 + 10*(os.Getpid()%1000)
	switch id {
	case IDEnvoyPass:
		n++
	case IDEnvoy:
		n += 2
	case IDEnvoyBase:
		n += 3
	case IDEnvoyHold:
		n += 4
	}
	return n
}
