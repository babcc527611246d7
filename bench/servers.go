package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wafguard/wafguard/v8host"
)

// Env is what starting a server needs.
type Env struct {
	WorkDir     string // config files and logs
	UpstreamURL string // http://127.0.0.1:port
	ServerCPU   int    // the CPU every server is pinned to
	// ServerCPUs, when set, is the CPU list (taskset -c) of the Envoy and
	// nginx rows instead, and ServerWorkers their workers (Envoy's
	// --concurrency, nginx's worker_processes; 0 means 1).
	ServerCPUs    string
	ServerWorkers int
	Self          string // the bench binary; its serve-coraza command is the native Coraza server
	WafhostBin    string // cmd/wafhost, built
	MainWasm      string // build/main.wasm
	PassWasm      string // the pass-through plugin, built
	// VMEnv are NAME=value environment variables of the WAF's VMs (the Go
	// host's --vm-env; Envoy's vm_config.environment_variables).
	VMEnv     []string
	ReadyWait time.Duration
	Log       func(string)
}

// multiCPUs is the CPU list of the rows that can run several workers.
func (env *Env) multiCPUs() string {
	if env.ServerCPUs != "" {
		return env.ServerCPUs
	}
	return strconv.Itoa(env.ServerCPU)
}

// workers is the worker count of the rows that can run several.
func (env *Env) workers() int { return max(env.ServerWorkers, 1) }

// Server is one system under test.
type Server struct {
	ID   string // short name used in flags, files and tables
	Name string // what runs
	// Path is how a request reaches the upstream (or who answers it).
	Path string
	// WAF is set when the server runs CRS and must block attacks.
	WAF bool
	// CapOf names the server whose run this one repeats with the
	// admission cap on; its open-loop rate is taken from that run.
	CapOf string
	// MaxInflight is the admission cap of a Go host server (0: off).
	MaxInflight int
	// VMs is the --concurrency of a Go host server (0 means 1).
	VMs int
	// Workers, when not 0, replaces the bench's closed-loop workers (and
	// connections) for this server.
	Workers int
	start   func(ctx context.Context, s *Server, env *Env) (*Running, error)
}

// Running is a started server.
type Running struct {
	Proc *Proc
	URL  string // base URL, http://127.0.0.1:port
}

// Server IDs.
const (
	IDWasmCRS     = "wasm-crs"
	IDWasmPass    = "wasm-pass"
	IDCoraza      = "coraza"
	IDNginxModSec = "nginx-modsec"
	IDNginx       = "nginx"
	IDWasmCRSCap  = "wasm-crs-cap"
	IDWasmCRS128  = "wasm-crs-128"
	IDWasmCRSV8   = "wasm-crs-v8"
	IDWasmPassV8  = "wasm-pass-v8"
	IDEnvoyCRS    = "envoy-crs"
	IDEnvoyPass   = "envoy-pass"
	IDEnvoyBase   = "envoy-base"
	IDEnvoyHold   = "envoy-hold"
	IDEnvoy       = "envoy"
)

// Workers128 are the connections of the IDWasmCRS128 run.
const Workers128 = 128

// Servers returns every server of the bench in run order; capInflight and
// capVMs are the admission cap and the VM count of the IDWasmCRSCap run.
func Servers(capInflight, capVMs int) []*Server {
	return []*Server{
		{ID: IDWasmCRS, Name: "Go host (wazero) + main.wasm, CRS blocking, admission off, 1 VM", Path: "host -> upstream", WAF: true, start: startWafhost},
		{ID: IDWasmPass, Name: "Go host (wazero) + pass-through plugin, 1 VM", Path: "host -> upstream", start: startWafhost},
		{ID: IDEnvoyCRS, Name: "Envoy 1.40.0 (official, V8) 1 worker + main.wasm, envoy/envoy.yaml as shipped (CRS blocking, admission cap 256, memory guard)", Path: "Envoy -> upstream", WAF: true, start: startEnvoy},
		{ID: IDEnvoyHold, Name: "as envoy-crs with hold_headers_until_inspected on: what holding the headers of inspected requests and responses costs", Path: "Envoy -> upstream", WAF: true, start: startEnvoy},
		{ID: IDEnvoyBase, Name: "as envoy-crs with Coraza's recommended settings in blocking mode and no CRS rule: what a Coraza transaction costs in Envoy", Path: "Envoy -> upstream", start: startEnvoy},
		{ID: IDEnvoyPass, Name: "as envoy-crs with the pass-through plugin: the cost of a wasm filter in Envoy", Path: "Envoy -> upstream", start: startEnvoy},
		{ID: IDEnvoy, Name: "as envoy-crs without the wasm filter: Envoy's own cost", Path: "Envoy -> upstream", start: startEnvoy},
		{ID: IDCoraza, Name: "native Coraza v3.8.1 (coraza/v3/http middleware, net/http, GOMAXPROCS=1)", Path: "httputil.ReverseProxy -> upstream", WAF: true, start: startCoraza},
		{ID: IDNginxModSec, Name: "nginx 1 worker + ModSecurity v3 (Debian), same CRS", Path: "proxy_pass -> upstream", WAF: true, start: startNginx},
		{ID: IDNginx, Name: "nginx 1 worker, no WAF", Path: "proxy_pass -> upstream", start: startNginx},
		{ID: IDWasmCRSCap, Name: fmt.Sprintf("as %s, admission cap max_inflight=%d, %d VM", IDWasmCRS, capInflight, max(capVMs, 1)), Path: "host -> upstream", WAF: true, CapOf: IDWasmCRS, MaxInflight: capInflight, VMs: capVMs, start: startWafhost},
		{ID: IDWasmCRSV8, Name: "main.wasm on Node 26's V8 (v8host, TurboFan only, as Envoy) behind Node's own HTTP front in the same process, CRS blocking, same configuration as wasm-crs, 1 VM", Path: "front -> upstream", WAF: true, start: startV8},
		{ID: IDWasmPassV8, Name: "as wasm-crs-v8 with the pass-through plugin: the front's own cost", Path: "front -> upstream", start: startV8},
		{ID: IDWasmCRS128, Name: fmt.Sprintf("as %s with the shipped defaults (admission cap 256, memory guard 768 MiB), %d connections into 1 VM", IDWasmCRS, Workers128), Path: "host -> upstream", WAF: true, MaxInflight: 256, Workers: Workers128, start: startWafhost},
	}
}

// Start starts the server and waits until it answers.
func (s *Server) Start(ctx context.Context, env *Env) (*Running, error) {
	return s.start(ctx, s, env)
}

// pluginConfig is the plugin configuration of the Go host runs, in the
// format of config/default.json.
func pluginConfig(maxInflight int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"directives_map":     map[string]any{"crs": PluginDirectives},
		"default_directives": "crs",
		"admission":          map[string]any{"max_inflight": maxInflight, "retry_after_seconds": 1},
	}, "", "  ")
}

// running waits until the started server answers 200 on readyURL, and
// returns it serving on listen; a server that does not answer is stopped.
func running(ctx context.Context, p *Proc, env *Env, listen, readyURL string) (*Running, error) {
	if err := p.WaitHTTP(ctx, readyURL, 200, env.ReadyWait); err != nil {
		p.Stop(2 * time.Second)
		return nil, err
	}
	return &Running{Proc: p, URL: "http://" + listen}, nil
}

// writeConfig writes a plugin configuration into the server's work
// directory and returns its path.
func writeConfig(env *Env, s *Server, data []byte) (string, error) {
	dir := filepath.Join(env.WorkDir, s.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := filepath.Join(dir, "plugin.json")
	return cfg, os.WriteFile(cfg, data, 0o644)
}

// plugin returns the module a plugin server runs and the path of its
// configuration: the pass-through plugin with an empty one for the server
// passID, else main.wasm with the bench's.
func plugin(s *Server, env *Env, passID string) (wasm, cfg string, err error) {
	wasm, data := env.MainWasm, []byte("{}")
	if s.ID == passID {
		wasm = env.PassWasm
	} else if data, err = pluginConfig(s.MaxInflight); err != nil {
		return "", "", err
	}
	if wasm == "" {
		return "", "", fmt.Errorf("%s: no plugin binary", s.ID)
	}
	cfg, err = writeConfig(env, s, data)
	return wasm, cfg, err
}

func startWafhost(ctx context.Context, s *Server, env *Env) (*Running, error) {
	if env.WafhostBin == "" {
		return nil, fmt.Errorf("%s: the Go host binary is not built (cmd/wafhost missing?)", s.ID)
	}
	wasm, cfg, err := plugin(s, env, IDWasmPass)
	if err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	listen, admin, err := listenAdminAddrs()
	if err != nil {
		return nil, err
	}
	args := []string{"--wasm", wasm, "--config", cfg, "--listen", listen, "--admin", admin, "--upstream", env.UpstreamURL, "--concurrency", strconv.Itoa(max(s.VMs, 1))}
	if s.ID != IDWasmPass {
		for _, kv := range env.VMEnv {
			args = append(args, "--vm-env", kv)
		}
	}
	p, err := StartProc(s.ID, strconv.Itoa(env.ServerCPU), []string{"GOMAXPROCS=1"}, env.WorkDir, env.WafhostBin, args...)
	if err != nil {
		return nil, err
	}
	return running(ctx, p, env, listen, "http://"+admin+"/ready")
}

func startV8(ctx context.Context, s *Server, env *Env) (*Running, error) {
	if _, err := v8host.NodePath(); err != nil {
		return nil, err
	}
	wasm, cfg, err := plugin(s, env, IDWasmPassV8)
	if err != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	// The front and Node share the server's CPU; GOMAXPROCS=1 as for the
	// other Go servers.
	p, err := StartProc(s.ID, strconv.Itoa(env.ServerCPU), []string{"GOMAXPROCS=1"}, env.WorkDir, env.Self,
		"serve-v8", "--listen", listen, "--upstream", env.UpstreamURL, "--wasm", wasm, "--config", cfg)
	if err != nil {
		return nil, err
	}
	return running(ctx, p, env, listen, "http://"+listen+"/")
}

func startCoraza(ctx context.Context, s *Server, env *Env) (*Running, error) {
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := StartProc(s.ID, strconv.Itoa(env.ServerCPU), []string{"GOMAXPROCS=1"}, env.WorkDir, env.Self,
		"serve-coraza", "--listen", listen, "--upstream", env.UpstreamURL)
	if err != nil {
		return nil, err
	}
	return running(ctx, p, env, listen, "http://"+listen+"/")
}

func startNginx(ctx context.Context, s *Server, env *Env) (*Running, error) {
	modsec := s.ID == IDNginxModSec
	bin, err := EnsureNginx(modsec, env.Log)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(env.WorkDir, s.ID)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rules := ""
	if modsec {
		var rewritten int
		if rules, rewritten, err = WriteModSecurity(filepath.Join(dir, "modsecurity")); err != nil {
			return nil, err
		}
		env.Log(fmt.Sprintf("%s: CRS written to %s (%d rule files rewritten for ModSecurity's parser)", s.ID, filepath.Dir(rules), rewritten))
	}
	listen, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(env.UpstreamURL)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(NginxConfig(dir, listen, up.Host, rules, env.workers())), 0o644); err != nil {
		return nil, err
	}
	p, err := StartProc(s.ID, env.multiCPUs(), nil, env.WorkDir, bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, "http://"+listen+"/", 200, env.ReadyWait); err != nil {
		p.Stop(2 * time.Second)
		return nil, fmt.Errorf("%w\nnginx error.log:\n%s", err, readTail(filepath.Join(dir, "error.log"), 2000))
	}
	return &Running{Proc: p, URL: "http://" + listen}, nil
}

func readTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	return tail(b, n)
}

// String describes the server for logs.
func (r *Running) String() string {
	return r.URL + " pid " + strconv.Itoa(r.Proc.PID())
}
