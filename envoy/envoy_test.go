package envoy_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"

	"google.golang.org/protobuf/proto"

	"github.com/wafguard/wafguard/admission"
	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/pluginconfig"
	"github.com/wafguard/wafguard/wasmhost"
)

// defaultBufferLimit is Envoy's per_connection_buffer_limit_bytes when the
// listener does not set it.
const defaultBufferLimit = 1 << 20

// bootstrapFiles lists every Envoy bootstrap in the repository: the ones in
// this directory and the ones the e2e setup runs.
func bootstrapFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.yaml", "../e2e/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 3 {
		t.Fatalf("found %d bootstrap files (%v), want envoy.yaml, envoy-ratelimit.yaml and e2e/envoy.yaml at least", len(files), files)
	}
	return files
}

// TestBootstrap_files decodes every bootstrap strictly into Envoy's API,
// runs Envoy's generated validation down into every typed_config, and
// parses each embedded plugin configuration with the plugin's own parsers,
// compiling its rule sets.
func TestBootstrap_files(t *testing.T) {
	for _, file := range bootstrapFiles(t) {
		t.Run(strings.TrimPrefix(file, "../"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkBootstrap(file, data); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkBootstrap is everything TestBootstrap_files checks for one file.
func checkBootstrap(name string, data []byte) error {
	return checkBootstrapWith(name, data, nil)
}

// checkBootstrapWith is checkBootstrap with the files of the bootstrap's
// watched directories read through read (nil: os.ReadFile), so that tests
// can feed broken copies of them.
func checkBootstrapWith(name string, data []byte, read func(path string) ([]byte, error)) error {
	b, doc, err := envoy.ParseBootstrap(name, data)
	if err != nil {
		return err
	}
	if read == nil {
		read = os.ReadFile
	}
	plugins, err := bootstrapPlugins(name, doc, b, read)
	if err != nil {
		return err
	}
	if len(plugins) == 0 {
		return fmt.Errorf("%s: no envoy.filters.http.wasm filter, want the wafguard plugin", name)
	}
	tags, err := envoy.NewTagExtractor(b.GetStatsConfig().GetStatsTags())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	vmID := plugins[0].Config.GetVmConfig().GetVmId()
	for _, p := range plugins {
		if err := checkPluginConfig(p.Config); err != nil {
			return fmt.Errorf("%s: %w", p.at, err)
		}
		if got := p.Config.GetVmConfig().GetVmId(); got != vmID {
			return fmt.Errorf("%s.vm_config.vm_id: got %q, want %q like the first wasm filter: filters that share one admission cap must share the vm_id", p.at, got, vmID)
		}
		if err := pluginconfig.Check([]byte(p.Configuration)); err != nil {
			return fmt.Errorf("%s.configuration: %w", p.at, err)
		}
		cfg, _ := pluginconfig.Parse([]byte(p.Configuration))
		if err := tags.CheckPluginMetrics(cfg.Filter.MetricLabels); err != nil {
			return fmt.Errorf("%s: stats_config.stats_tags: %w", name, err)
		}
	}
	return checkBufferLimits(name, doc, b, read)
}

// plugin is a wasm PluginConfig with where it is, for messages: in the
// bootstrap, or in the file a config_discovery reads.
type plugin struct {
	envoy.WasmPlugin
	at string
}

// bootstrapPlugins returns the wasm plugins below m (a bootstrap or one of
// its listeners): those configured in the bootstrap, then those in the
// files its config_discovery filters read, each file checked with
// checkDiscovered.
func bootstrapPlugins(name string, doc *envoy.Doc, m proto.Message, read func(string) ([]byte, error)) ([]plugin, error) {
	inline, err := envoy.WasmPlugins(doc, m)
	if err != nil {
		return nil, err
	}
	var out []plugin
	for _, p := range inline {
		out = append(out, plugin{p, doc.At(p.Path)})
	}
	discovered, err := envoy.DiscoveredFilters(doc, m)
	if err != nil {
		return nil, err
	}
	for _, d := range discovered {
		ps, err := checkDiscovered(name, doc, d, read)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// checkDiscovered holds the project's rules for a filter configured by
// config_discovery, and checks the file it reads (the file of the same
// name in envoy.ExtensionConfigDir(bootstrap)) the way the bootstrap is
// checked. It returns the file's wasm plugins.
func checkDiscovered(bootstrap string, doc *envoy.Doc, d envoy.DiscoveredFilter, read func(string) ([]byte, error)) ([]plugin, error) {
	at := doc.At(d.Path + ".config_discovery")
	src := d.Source
	if got := src.GetTypeUrls(); len(got) != 1 || got[0] != envoy.WasmTypeURL {
		return nil, fmt.Errorf("%s.type_urls: got %q, want only %s, so that a file holding another filter is rejected", at, got, envoy.WasmTypeURL)
	}
	if src.GetApplyDefaultConfigWithoutWarming() {
		return nil, fmt.Errorf("%s.apply_default_config_without_warming: true, want false: Envoy would serve requests before the file's configuration is in force", at)
	}
	if src.GetDefaultConfig() != nil {
		return nil, fmt.Errorf("%s.default_config: set, want none: until the first valid configuration arrives Envoy must answer 500, not serve the default's rules (and it would build the default's plugin on every worker)", at)
	}
	pcs := src.GetConfigSource().GetPathConfigSource()
	if pcs == nil {
		return nil, fmt.Errorf("%s.config_source: want a path_config_source (a shipped file has no control plane)", at)
	}
	if got, want := pcs.GetWatchedDirectory().GetPath(), filepath.Dir(pcs.GetPath()); got != want {
		return nil, fmt.Errorf("%s.config_source.path_config_source.watched_directory.path: got %q, want %q, the directory of path, where the new file is moved in", at, got, want)
	}
	file := filepath.Join(envoy.ExtensionConfigDir(bootstrap), filepath.Base(pcs.GetPath()))
	data, err := read(file)
	if err != nil {
		return nil, fmt.Errorf("%s.config_source.path_config_source.path: %w", at, err)
	}
	ext, err := envoy.ParseExtensionConfig(file, data)
	if err != nil {
		return nil, err
	}
	if got := ext.Config.GetName(); got != d.Name {
		return nil, fmt.Errorf("%s: got %q, want %q, the name of the filter in %s: Envoy rejects a resource of another name", ext.Doc.At("resources[0].name"), got, d.Name, bootstrap)
	}
	ps, err := envoy.WasmPlugins(ext.Doc, ext.Config)
	if err != nil {
		return nil, err
	}
	if len(ps) != 1 {
		return nil, fmt.Errorf("%s: want the wasm filter with a config", ext.Doc.At("resources[0].typed_config"))
	}
	return []plugin{{ps[0], ext.Doc.At(ps[0].Path)}}, nil
}

// checkPluginConfig holds the project's rules for the wasm PluginConfig.
func checkPluginConfig(pc *wasmv3.PluginConfig) error {
	vm := pc.GetVmConfig()
	if got := vm.GetRuntime(); got != "envoy.wasm.runtime.v8" {
		return fmt.Errorf("vm_config.runtime: got %q, want \"envoy.wasm.runtime.v8\" (the runtime of the upstream Envoy images)", got)
	}
	if vm.GetVmId() == "" {
		return errors.New(`vm_config.vm_id: empty, want a name such as "wafguard": an empty vm_id shares its shared data (the admission counts) with every other plugin that leaves it empty`)
	}
	if vm.GetCode().GetLocal().GetFilename() == "" && vm.GetCode().GetRemote() == nil {
		return errors.New("vm_config.code: want local.filename (the mounted main.wasm) or remote")
	}
	if pc.GetFailOpen() {
		return errors.New("fail_open: true, want failure_policy instead (fail_open is deprecated, and a WAF must not be skipped)")
	}
	if p := pc.GetFailurePolicy(); p == wasmv3.FailurePolicy_UNSPECIFIED || p == wasmv3.FailurePolicy_FAIL_OPEN {
		return fmt.Errorf("failure_policy: got %s, want FAIL_RELOAD or FAIL_CLOSED set explicitly: Envoy releases disagree on the default, and FAIL_OPEN skips the WAF", p)
	}
	if pc.GetConfiguration() == nil {
		return errors.New("configuration: missing, want a google.protobuf.StringValue holding the plugin's JSON")
	}
	return nil
}

// checkBufferLimits checks each listener with the plugin: Envoy's buffer
// must hold the largest request body the WAF accepts, so that the WAF's own
// limit answers first (both answer 413, but only the WAF's reply is counted
// and logged by the plugin).
func checkBufferLimits(name string, doc *envoy.Doc, b *bootstrapv3.Bootstrap, read func(string) ([]byte, error)) error {
	for i, l := range b.GetStaticResources().GetListeners() {
		limit := uint32(defaultBufferLimit)
		if v := l.GetPerConnectionBufferLimitBytes(); v != nil {
			limit = v.GetValue()
		}
		plugins, err := bootstrapPlugins(name, doc, l, read)
		if err != nil {
			return err
		}
		for _, p := range plugins {
			cfg, err := pluginconfig.Parse([]byte(p.Configuration))
			if err != nil {
				return err
			}
			path := fmt.Sprintf("static_resources.listeners[%d].per_connection_buffer_limit_bytes", i)
			if cfg.Admission.MaxRequestBodyBytes > 0 && int64(limit) <= cfg.Admission.MaxRequestBodyBytes {
				return fmt.Errorf("%s: got %d, want more than admission.max_request_body_bytes (%d) so that the WAF's limit answers before Envoy's", doc.At(path), limit, cfg.Admission.MaxRequestBodyBytes)
			}
		}
	}
	return nil
}

// TestBootstrap_brokenCopies feeds broken copies of envoy.yaml to the same
// checks and asserts that each failure names the file, the line and the
// path of the bad field.
func TestBootstrap_brokenCopies(t *testing.T) {
	const file = "envoy.yaml"
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const (
		hcm    = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config"
		plugin = hcm + ".http_filters[0].typed_config.config"
	)
	cases := []struct {
		name     string
		old, new string
		// want is the expected error; %d is replaced by the line of old.
		want string
	}{
		{
			name: "misspelled top-level field",
			old:  "stats_config:", new: "stats_confg:",
			want: `envoy.yaml:%d: stats_confg: unknown field "stats_confg"`,
		},
		{
			name: "misspelled field inside the wasm filter",
			old:  "runtime: envoy.wasm.runtime.v8", new: "runtim: envoy.wasm.runtime.v8",
			want: `envoy.yaml:%d: ` + plugin + `.vm_config.runtim: unknown field "runtim"`,
		},
		{
			name: "misspelled field inside the connection manager",
			old:  "stat_prefix: ingress_http", new: "stat_prefx: ingress_http",
			want: `envoy.yaml:%d: ` + hcm + `.stat_prefx: unknown field "stat_prefx"`,
		},
		{
			name: "unknown enum value",
			old:  "failure_policy: FAIL_RELOAD", new: "failure_policy: FAIL_SOMETIMES",
			want: `envoy.yaml:%d: ` + plugin + `.failure_policy: invalid value for enum field failurePolicy: "FAIL_SOMETIMES"`,
		},
		{
			name: "wrong value type",
			old:  "port_value: 8080", new: "port_value: eighty",
			want: `envoy.yaml:%d: static_resources.listeners[0].address.socket_address.port_value: invalid value for uint32 field portValue: "eighty"`,
		},
		{
			name: "unknown extension type",
			old:  "envoy.extensions.filters.http.router.v3.Router", new: "envoy.extensions.filters.http.router.v3.Routr",
			want: `envoy.yaml:%d: ` + hcm + `.http_filters[1].typed_config.@type: unable to resolve "type.googleapis.com/envoy.extensions.filters.http.router.v3.Routr": "not found"`,
		},
		{
			name: "rule of the generated validation",
			old:  "stat_prefix: ingress_http", new: `stat_prefix: ""`,
			want: `envoy.yaml:%d: ` + hcm + `.stat_prefix: value length must be at least 1 runes`,
		},
		{
			name: "validation inside a nested typed_config",
			old:  "base_interval: 1s", new: "base_interval: 0s",
			want: `envoy.yaml:%d: ` + plugin + `.reload_config.backoff.base_interval: value must be greater than or equal to 1ms`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, line := replaceOnce(t, string(orig), c.old, c.new)
			err := checkBootstrap(file, []byte(data))
			want := c.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, line)
			}
			if err == nil || err.Error() != want {
				t.Fatalf("got error\n\t%v\nwant\n\t%s", err, want)
			}
		})
	}
}

// TestBootstrap_brokenPluginConfig feeds copies of envoy.yaml with a broken
// plugin configuration and asserts the failure names the wasm filter and
// the bad key or directive.
func TestBootstrap_brokenPluginConfig(t *testing.T) {
	const file = "envoy.yaml"
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, doc, err := envoy.ParseBootstrap(file, orig)
	if err != nil {
		t.Fatal(err)
	}
	plugins, err := envoy.WasmPlugins(doc, b)
	if err != nil || len(plugins) != 1 {
		t.Fatalf("got %d plugins, error %v; want 1", len(plugins), err)
	}
	at := doc.At(plugins[0].Path) + ".configuration: "
	cases := []struct {
		name     string
		old, new string
		want     string
	}{
		{
			name: "misspelled admission key",
			old:  `"max_inflight": 256`, new: `"max_inflght": 256`,
			want: at + `admission: unknown key "max_inflght", want one of max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers`,
		},
		{
			name: "misspelled top-level key",
			old:  `"default_directives": "crs"`, new: `"default_directive": "crs"`,
			want: at + `plugin configuration: unknown key "default_directive"; valid keys are directives_map, default_directives, per_authority_directives, per_route_directives, metric_labels, admission, memory, json_log, rule_metrics_top_n, deny_response, request_json_max_depth, request_body_no_files_limit, raw_body_content_types, rule_preselection, hold_headers_until_inspected, hold_headers_timeout_ms`,
		},
		{
			name: "metric label without a stats tag",
			old:  `"metric_labels": {"env": "prod"}`, new: `"metric_labels": {"env": "prod", "zone": "eu1"}`,
			want: `envoy.yaml: stats_config.stats_tags: stat "wasmcustom.waf_filter.tx.total_env=prod_zone=eu1" becomes waf_filter_tx_total_zone_eu1{env="prod"}, want waf_filter_tx_total{env="prod",zone="eu1"}; add or fix the tag regex of each label`,
		},
		{
			name: "body limit over the buffer limit",
			old:  `"max_request_body_bytes": 1048576`, new: `"max_request_body_bytes": 4194304`,
			want: fmt.Sprintf(`envoy.yaml:%d: static_resources.listeners[0].per_connection_buffer_limit_bytes: got 2097152, want more than admission.max_request_body_bytes (4194304) so that the WAF's limit answers before Envoy's`,
				doc.Line("static_resources.listeners[0].per_connection_buffer_limit_bytes")),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, _ := replaceOnce(t, string(orig), c.old, c.new)
			err := checkBootstrap(file, []byte(data))
			if err == nil || err.Error() != c.want {
				t.Fatalf("got error\n\t%v\nwant\n\t%s", err, c.want)
			}
		})
	}
	t.Run("misspelled directive", func(t *testing.T) {
		data, _ := replaceOnce(t, string(orig), `"SecRuleEngine On"`, `"SecRuleEngin On"`)
		err := checkBootstrap(file, []byte(data))
		want := at + `directives_map["crs"]: invalid SecLang`
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(strings.ToLower(err.Error()), "secruleengin") {
			t.Fatalf("got error\n\t%v\nwant it to start with\n\t%s\nand name the directive secruleengin", err, want)
		}
	})
}

// replaceOnce replaces the only occurrence of old in s and returns the
// result and the 1-based line where old was.
func replaceOnce(t *testing.T, s, old, new string) (string, int) {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q occurs %d times in the file, want exactly 1", old, n)
	}
	i := strings.Index(s, old)
	return strings.Replace(s, old, new, 1), strings.Count(s[:i], "\n") + 1
}

// TestStatsTags_admissionNames runs envoy.yaml's stats_tags over every metric
// name of the admission guard: each must come out as a valid Prometheus
// name, and the rejection counters as one series with a reason label.
func TestStatsTags_admissionNames(t *testing.T) {
	b, _, err := envoy.LoadBootstrap("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := envoy.NewTagExtractor(b.GetStatsConfig().GetStatsTags())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stat       string
		wantName   string
		wantReason string
	}{
		{admission.MetricAdmitted, "wafguard_admission_admitted", ""},
		{admission.MetricRejectedCap, "wafguard_admission_rejected", "cap"},
		{admission.MetricRejectedAuthority, "wafguard_admission_rejected", "authority_cap"},
		{admission.MetricRejectedBodySize, "wafguard_admission_rejected", "body_size"},
		{admission.MetricRejectedCAS, "wafguard_admission_rejected", "cas_exhausted"},
		{admission.MetricInflight, "wafguard_admission_inflight", ""},
		{admission.MetricCASConflicts, "wafguard_admission_cas_conflicts", ""},
		{admission.MetricCASExhausted, "wafguard_admission_cas_exhausted", ""},
		{admission.MetricRepairedSlots, "wafguard_admission_repaired_slots", ""},
		{admission.MetricStoreErrors, "wafguard_admission_store_errors", ""},
	}
	for _, c := range cases {
		got := tags.Prometheus(envoy.CustomStatPrefix + c.stat)
		if got.Name != c.wantName || got.Labels["reason"] != c.wantReason || len(got.Labels) > 1 {
			t.Errorf("%s: got %s, want %s with reason %q", c.stat, tags.Format(got), c.wantName, c.wantReason)
		}
	}
}

// TestStatsTags_hostDefaults keeps the test host's default tag extractors
// (wasmhost.DefaultStatsTags, used by `go run mage.go run`) equal to
// envoy.yaml's stats_tags, so that the host's /stats/prometheus shows the
// same series as Envoy's.
func TestStatsTags_hostDefaults(t *testing.T) {
	b, _, err := envoy.LoadBootstrap("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, s := range b.GetStatsConfig().GetStatsTags() {
		want = append(want, s.GetTagName()+"="+s.GetRegex())
	}
	for _, s := range wasmhost.DefaultStatsTags() {
		got = append(got, s.Name+"="+s.Regex.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("wasmhost.DefaultStatsTags():\n\t%s\nwant envoy.yaml's stats_tags:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestBootstrap_brokenExtensionConfig feeds broken copies of
// envoy-ecds.yaml and of the file its config_discovery reads
// (ecds/wafguard.yaml) to the same checks: each failure names the file,
// the line and the path.
func TestBootstrap_brokenExtensionConfig(t *testing.T) {
	const (
		file = "envoy-ecds.yaml"
		ext  = "ecds/wafguard.yaml"
	)
	origBoot, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	origExt, err := os.ReadFile(ext)
	if err != nil {
		t.Fatal(err)
	}
	const (
		filter = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0]"
		plugin = "resources[0].typed_config.config"
	)
	b, doc, err := envoy.ParseBootstrap(file, origBoot)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := envoy.DiscoveredFilters(doc, b); err != nil || len(d) != 1 {
		t.Fatalf("%s: %d config_discovery filters, %v; want 1", file, len(d), err)
	}
	at := fmt.Sprintf("%s:%d: %s.config_discovery", file, doc.Line(filter+".config_discovery"), filter)
	parsed, err := envoy.ParseExtensionConfig(ext, origExt)
	if err != nil {
		t.Fatal(err)
	}
	configLine := parsed.Doc.Line(plugin) // where the PluginConfig starts
	cases := []struct {
		name     string
		inExt    bool // the change is in the extension config file
		old, new string
		want     string // %d is the line of old
	}{
		{
			name: "misspelled field in the filter's file", inExt: true,
			old: "runtime: envoy.wasm.runtime.v8", new: "runtim: envoy.wasm.runtime.v8",
			want: ext + `:%d: ` + plugin + `.vm_config.runtim: unknown field "runtim"`,
		},
		{
			name: "validation in the filter's file", inExt: true,
			old: "base_interval: 1s", new: "base_interval: 0s",
			want: ext + `:%d: ` + plugin + `.reload_config.backoff.base_interval: value must be greater than or equal to 1ms`,
		},
		{
			name: "another resource name", inExt: true,
			old: "  name: wafguard\n  typed_config:", new: "  name: waf\n  typed_config:",
			want: ext + `:%d: resources[0].name: got "waf", want "wafguard", the name of the filter in envoy-ecds.yaml: Envoy rejects a resource of another name`,
		},
		{
			name: "unknown top-level key in the filter's file", inExt: true,
			old: `version_info: "1"`, new: `version: "1"`,
			want: ext + `:%d: version: unknown key, want version_info and resources`,
		},
		{
			name: "misspelled plugin key", inExt: true,
			old: `"max_inflight": 256`, new: `"max_inflght": 256`,
			want: ext + fmt.Sprintf(":%d: ", configLine) + plugin + `.configuration: admission: unknown key "max_inflght"`,
		},
		{
			name: "watched directory elsewhere",
			old:  "path: /etc/envoy/ecds\n", new: "path: /etc/envoy\n",
			want: at + `.config_source.path_config_source.watched_directory.path: got "/etc/envoy", want "/etc/envoy/ecds", the directory of path, where the new file is moved in`,
		},
		{
			name: "a default applied without warming",
			old:  "apply_default_config_without_warming: false", new: "apply_default_config_without_warming: true",
			want: at + `.apply_default_config_without_warming: true, want false: Envoy would serve requests before the file's configuration is in force`,
		},
		{
			name: "a default configuration",
			old:  "apply_default_config_without_warming: false", new: "default_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm}",
			want: at + `.default_config: set, want none`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			boot, extData := string(origBoot), string(origExt)
			var line int
			if c.inExt {
				extData, line = replaceOnce(t, extData, c.old, c.new)
			} else {
				boot, line = replaceOnce(t, boot, c.old, c.new)
			}
			err := checkBootstrapWith(file, []byte(boot), func(p string) ([]byte, error) {
				if p != ext {
					return nil, fmt.Errorf("read %s, want %s", p, ext)
				}
				return []byte(extData), nil
			})
			want := c.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, line)
			}
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("got error\n\t%v\nwant it to start with\n\t%s", err, want)
			}
		})
	}
}
