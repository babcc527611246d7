// Package istio holds Istio examples for deploying the WAF plugin
// (WasmPlugin, TrafficExtension, EnvoyFilter, a bootstrap override
// ConfigMap). The tests check
// them against Istio's API: the istio.io/api types, decoded strictly, and
// the OpenAPI schema of Istio's CRDs, and the Envoy fragments inside them
// against Envoy's API.
package istio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/internal/kubeexample"
	"github.com/wafguard/wafguard/pluginconfig"
)

// checkObject checks one object by kind. images, when not nil, are the
// images an example's digest must name (kubeexample.ImagesFromEnv).
func checkObject(o *kubeexample.Object, images *kubeexample.Images) error {
	if _, err := o.Meta(); err != nil {
		return err
	}
	switch gvk := o.GVK(); gvk {
	case "extensions.istio.io/v1alpha1/WasmPlugin":
		return checkWasmPlugin(o, images)
	case "extensions.istio.io/v1alpha1/TrafficExtension":
		return checkTrafficExtension(o, images)
	case "networking.istio.io/v1alpha3/EnvoyFilter":
		return checkEnvoyFilter(o)
	case "v1/ConfigMap":
		return checkBootstrapOverride(o)
	default:
		return fmt.Errorf("%s: apiVersion and kind %q: want extensions.istio.io/v1alpha1 WasmPlugin or TrafficExtension, networking.istio.io/v1alpha3 EnvoyFilter or v1 ConfigMap", o.File, gvk)
	}
}

// checkSpec decodes the spec strictly into m and validates it against the
// CRD's OpenAPI schema.
func checkSpec(o *kubeexample.Object, m proto.Message) (*envoy.Doc, error) {
	doc, err := envoy.UnmarshalNode(o.File, &o.Spec, "spec", m)
	if err != nil {
		return nil, err
	}
	if err := validateCRD(doc, o.APIVersion, o.Kind); err != nil {
		return nil, err
	}
	return doc, nil
}

// ociURL is the rule of Istio's CRD (x-kubernetes-validations) on url: "url
// must have schema one of [http, https, file, oci]"; an oci:// reference is
// what the examples use.
var ociURL = regexp.MustCompile(`^oci://[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})$`)

// wasmSpec is what a WasmPlugin's spec and a TrafficExtension's wasm
// (WasmConfig, the same fields) have in common.
type wasmSpec interface {
	GetUrl() string
	GetSha256() string
	GetFailStrategy() extensionsv1alpha1.FailStrategy
	GetType() extensionsv1alpha1.PluginType
	GetPluginConfig() *structpb.Struct
}

// wasmTarget is where a WasmPlugin or TrafficExtension applies.
type wasmTarget struct {
	selector   *typev1beta1.WorkloadSelector
	targetRefs int // targetRefs, and WasmPlugin's deprecated targetRef
	modes      []typev1beta1.WorkloadMode
}

// checkWasm checks the plugin of a WasmPlugin (at "spec") or a
// TrafficExtension (at "spec.wasm"); kind names the object in messages.
// pinned requires the image pinned by digest. It returns the plugin
// configuration, parsed.
func checkWasm(doc *envoy.Doc, path, kind string, w wasmSpec, t wasmTarget, pinned bool, images *kubeexample.Images) (*pluginconfig.Config, error) {
	// Rules of the CRD's x-kubernetes-validations, which need a CEL
	// evaluator: written out here.
	if !ociURL.MatchString(w.GetUrl()) {
		return nil, fmt.Errorf("%s: got %q, want oci://<registry>/<repository>:<tag> or @sha256:<digest>, the image built from the Dockerfile", doc.At(path+".url"), w.GetUrl())
	}
	if t.selector != nil && t.targetRefs > 0 {
		return nil, fmt.Errorf("%s: only one of targetRefs or selector can be set", doc.At("spec.selector"))
	}
	// sha256: "If the url field already references a SHA256 (using the
	// @sha256: notation), it must match the value of this field."
	pin := kubeexample.Pin{Doc: doc, URLPath: path + ".url", SHA256Path: path + ".sha256", URL: w.GetUrl(), SHA256: w.GetSha256()}
	check := pin.Check
	if pinned {
		check = pin.Required
	}
	if _, err := check(images); err != nil {
		return nil, err
	}
	// The project's rules.
	if w.GetFailStrategy() != extensionsv1alpha1.FailStrategy_FAIL_RELOAD && w.GetFailStrategy() != extensionsv1alpha1.FailStrategy_FAIL_CLOSE {
		return nil, fmt.Errorf("%s: got %s, want FAIL_RELOAD or FAIL_CLOSE: FAIL_OPEN skips the WAF", doc.At(path+".failStrategy"), w.GetFailStrategy())
	}
	if gatewaySelector(t.selector.GetMatchLabels()) {
		for i, m := range t.modes {
			if m == typev1beta1.WorkloadMode_SERVER {
				return nil, fmt.Errorf("%s: SERVER never selects a gateway's traffic (istio.type.v1beta1.WorkloadMode: a gateway counts as CLIENT), so the plugin would not run; remove match or use CLIENT_AND_SERVER", doc.At(fmt.Sprintf("spec.match[%d].mode", i)))
			}
		}
	}
	if w.GetType() != extensionsv1alpha1.PluginType_HTTP {
		return nil, fmt.Errorf("%s: got %s, want HTTP", doc.At(path+".type"), w.GetType())
	}
	if w.GetPluginConfig() == nil {
		return nil, fmt.Errorf("%s: missing, want the plugin configuration", doc.At(path+".pluginConfig"))
	}
	// Istio passes pluginConfig to Envoy as its JSON in a StringValue.
	cfg, err := protojson.Marshal(w.GetPluginConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doc.At(path+".pluginConfig"), err)
	}
	return kubeexample.PluginConfig(doc, path+".pluginConfig", cfg, kind)
}

func checkWasmPlugin(o *kubeexample.Object, images *kubeexample.Images) error {
	var wp extensionsv1alpha1.WasmPlugin
	doc, err := checkSpec(o, &wp)
	if err != nil {
		return err
	}
	t := wasmTarget{selector: wp.GetSelector(), targetRefs: len(wp.GetTargetRefs())}
	if wp.GetTargetRef() != nil {
		t.targetRefs++
	}
	for _, m := range wp.GetMatch() {
		t.modes = append(t.modes, m.GetMode())
	}
	_, err = checkWasm(doc, "spec", o.Kind, &wp, t, false, images)
	return err
}

func checkTrafficExtension(o *kubeexample.Object, images *kubeexample.Images) error {
	var te extensionsv1alpha1.TrafficExtension
	doc, err := checkSpec(o, &te)
	if err != nil {
		return err
	}
	// The CRD's rule "exactly one of wasm or lua must be set"; the WAF
	// is the wasm.
	if te.GetWasm() == nil {
		return fmt.Errorf("%s: missing, want the plugin (exactly one of wasm or lua can be set; the WAF is wasm)", doc.At("spec.wasm"))
	}
	t := wasmTarget{selector: te.GetSelector(), targetRefs: len(te.GetTargetRefs())}
	for _, m := range te.GetMatch() {
		t.modes = append(t.modes, m.GetMode())
	}
	if _, err := checkWasm(doc, "spec.wasm", o.Kind, te.GetWasm(), t, true, images); err != nil {
		return err
	}
	// The TrafficExtension is wasmplugin.yaml's equivalent: the other
	// examples (the buffer limit, the stats tags) are written for its
	// configuration.
	want, err := wasmPluginConfig()
	if err != nil {
		return err
	}
	if !proto.Equal(te.GetWasm().GetPluginConfig(), want) {
		return fmt.Errorf("%s: differs from the pluginConfig of wasmplugin.yaml: keep the two the same (envoyfilter-buffer-limit.yaml and stats-bootstrap.yaml are written for it)", doc.At("spec.wasm.pluginConfig"))
	}
	return nil
}

// gatewaySelector reports whether workload labels select an Istio gateway
// (the istio label of the istio/gateway chart and the classic gateways).
func gatewaySelector(labels map[string]string) bool {
	return strings.Contains(labels["istio"], "gateway")
}

// patchTypes is the Envoy message each applyTo patches (Istio's
// pkg/config/xds, envoyfilter).
var patchTypes = map[networkingv1alpha3.EnvoyFilter_ApplyTo]func() proto.Message{
	networkingv1alpha3.EnvoyFilter_LISTENER:            func() proto.Message { return &listenerv3.Listener{} },
	networkingv1alpha3.EnvoyFilter_FILTER_CHAIN:        func() proto.Message { return &listenerv3.FilterChain{} },
	networkingv1alpha3.EnvoyFilter_NETWORK_FILTER:      func() proto.Message { return &listenerv3.Filter{} },
	networkingv1alpha3.EnvoyFilter_HTTP_FILTER:         func() proto.Message { return &hcmv3.HttpFilter{} },
	networkingv1alpha3.EnvoyFilter_ROUTE_CONFIGURATION: func() proto.Message { return &routev3.RouteConfiguration{} },
	networkingv1alpha3.EnvoyFilter_VIRTUAL_HOST:        func() proto.Message { return &routev3.VirtualHost{} },
	networkingv1alpha3.EnvoyFilter_HTTP_ROUTE:          func() proto.Message { return &routev3.Route{} },
	networkingv1alpha3.EnvoyFilter_CLUSTER:             func() proto.Message { return &clusterv3.Cluster{} },
}

func checkEnvoyFilter(o *kubeexample.Object) error {
	var ef networkingv1alpha3.EnvoyFilter
	doc, err := checkSpec(o, &ef)
	if err != nil {
		return err
	}
	if len(ef.GetConfigPatches()) == 0 {
		return fmt.Errorf("%s: empty, want at least one patch", doc.At("spec.configPatches"))
	}
	for i, cp := range ef.GetConfigPatches() {
		path := fmt.Sprintf("spec.configPatches[%d]", i)
		// Rules of Istio's EnvoyFilter validation (pkg/config/validation).
		if cp.GetApplyTo() == networkingv1alpha3.EnvoyFilter_INVALID {
			return fmt.Errorf("%s: missing, want what the patch applies to", doc.At(path+".applyTo"))
		}
		op := cp.GetPatch().GetOperation()
		if op == networkingv1alpha3.EnvoyFilter_Patch_INVALID {
			return fmt.Errorf("%s: missing, want a patch operation", doc.At(path+".patch.operation"))
		}
		newType, ok := patchTypes[cp.GetApplyTo()]
		if !ok {
			return fmt.Errorf("%s: %s is not checked by this test; add its Envoy type to patchTypes", doc.At(path+".applyTo"), cp.GetApplyTo())
		}
		if op == networkingv1alpha3.EnvoyFilter_Patch_REMOVE {
			continue
		}
		value := kubeexample.FindNode(&o.Spec, "configPatches", i, "patch", "value")
		if value == nil {
			return fmt.Errorf("%s: missing, want the %s to %s", doc.At(path+".patch"), cp.GetApplyTo(), op)
		}
		m := newType()
		vdoc, err := envoy.UnmarshalNode(o.File, value, path+".patch.value", m)
		if err != nil {
			return err
		}
		// A MERGE value is a fragment (a Listener with only the fields to
		// change), which fails the required-field rules; the others are
		// whole messages.
		if op != networkingv1alpha3.EnvoyFilter_Patch_MERGE {
			if err := envoy.Validate(vdoc, m); err != nil {
				return err
			}
		} else if err := envoy.Walk(m, func(string, proto.Message) error { return nil }); err != nil {
			return fmt.Errorf("%s: %w", doc.At(path+".patch.value"), err)
		}
	}
	return nil
}

// bootstrapKey is the ConfigMap key Istio reads a bootstrap override from.
const bootstrapKey = "custom_bootstrap.json"

func checkBootstrapOverride(o *kubeexample.Object) error {
	var data map[string]string
	if err := kubeexample.DecodeKnown(&o.Data, &data); err != nil {
		return fmt.Errorf("%s: data: %w", o.File, err)
	}
	text, ok := data[bootstrapKey]
	if !ok || len(data) != 1 {
		return fmt.Errorf("%s: data: want exactly the key %q, the one Istio reads", o.File, bootstrapKey)
	}
	if !json.Valid([]byte(text)) {
		return fmt.Errorf("%s: data[%q]: not valid JSON", o.File, bootstrapKey)
	}
	var b bootstrapv3.Bootstrap
	bdoc, err := envoy.UnmarshalYAML(o.File+": data["+bootstrapKey+"]", []byte(text), &b)
	if err != nil {
		return err
	}
	if err := envoy.Validate(bdoc, &b); err != nil {
		return err
	}
	tags, err := envoy.NewTagExtractor(b.GetStatsConfig().GetStatsTags())
	if err != nil {
		return err
	}
	labels, err := wasmPluginLabels()
	if err != nil {
		return err
	}
	if err := tags.CheckPluginMetrics(labels); err != nil {
		return fmt.Errorf("%s: data[%q]: stats_config.stats_tags: %w", o.File, bootstrapKey, err)
	}
	return nil
}

// wasmPluginLabels returns the metric_labels of wasmplugin.yaml, whose
// metrics the bootstrap override labels.
func wasmPluginLabels() (map[string]string, error) {
	pc, err := wasmPluginConfig()
	if err != nil {
		return nil, err
	}
	cfg, err := protojson.Marshal(pc)
	if err != nil {
		return nil, err
	}
	parsed, err := pluginconfig.Parse(cfg)
	if err != nil {
		return nil, err
	}
	return parsed.Filter.MetricLabels, nil
}

// wasmPluginConfig returns the pluginConfig of wasmplugin.yaml.
func wasmPluginConfig() (*structpb.Struct, error) {
	data, err := os.ReadFile("wasmplugin.yaml")
	if err != nil {
		return nil, err
	}
	objs, err := kubeexample.ReadObjects("wasmplugin.yaml", data)
	if err != nil {
		return nil, err
	}
	var wp extensionsv1alpha1.WasmPlugin
	if _, err := envoy.UnmarshalNode("wasmplugin.yaml", &objs[0].Spec, "spec", &wp); err != nil {
		return nil, err
	}
	return wp.GetPluginConfig(), nil
}

// checkFile checks every object of an example file.
func checkFile(name string, data []byte, images *kubeexample.Images) error {
	objs, err := kubeexample.ReadObjects(name, data)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := checkObject(o, images); err != nil {
			return err
		}
	}
	return nil
}

// TestExamples_files checks every example in this directory. With
// WAFGUARD_IMAGE_DIR set (kubeexample.ImageDirEnv), the digest an example
// pins must be that of an image go run mage.go image wrote there.
func TestExamples_files(t *testing.T) {
	images, err := kubeexample.ImagesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %v, want wasmplugin.yaml, trafficextension.yaml, envoyfilter-buffer-limit.yaml, envoyfilter-ratelimit.yaml and stats-bootstrap.yaml", files)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkFile(file, data, images); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestExamples_brokenCopies feeds broken copies of the examples to the same
// checks and asserts that each failure names the file, line and field.
func TestExamples_brokenCopies(t *testing.T) {
	zeros := strings.Repeat("0", 64)
	cases := []kubeexample.BrokenCopy{
		{
			Name: "misspelled wasm plugin field",
			File: "wasmplugin.yaml",
			Old:  "failStrategy: FAIL_RELOAD", New: "failStratgy: FAIL_RELOAD",
			Want: `wasmplugin.yaml:%d: spec.failStratgy: unknown field "failStratgy"`,
		},
		{
			Name: "snake_case field name that Kubernetes would drop",
			File: "wasmplugin.yaml",
			Old:  "failStrategy: FAIL_RELOAD", New: "fail_strategy: FAIL_RELOAD",
			Want: `wasmplugin.yaml:%d: spec.fail_strategy: not allowed by the WasmPlugin CRD schema: unknown field "fail_strategy" (the API server would drop it; the CRD's field names are camelCase)`,
		},
		{
			Name: "fail open",
			File: "wasmplugin.yaml",
			Old:  "failStrategy: FAIL_RELOAD", New: "failStrategy: FAIL_OPEN",
			Want: `wasmplugin.yaml:%d: spec.failStrategy: got FAIL_OPEN, want FAIL_RELOAD or FAIL_CLOSE: FAIL_OPEN skips the WAF`,
		},
		{
			Name: "match mode that never selects a gateway",
			File: "wasmplugin.yaml",
			Old:  "  failStrategy: FAIL_RELOAD\n", New: "  failStrategy: FAIL_RELOAD\n  match:\n  - mode: SERVER\n",
			Want: `wasmplugin.yaml:%d: spec.match[0].mode: SERVER never selects a gateway's traffic (istio.type.v1beta1.WorkloadMode: a gateway counts as CLIENT), so the plugin would not run; remove match or use CLIENT_AND_SERVER`,
			// The line of the inserted "- mode: SERVER", two below old.
			LineOf:  "  failStrategy: FAIL_RELOAD\n",
			LineAdd: 2,
		},
		{
			Name: "sha256 that is not the digest the url pins",
			File: "wasmplugin.yaml",
			Old:  "  url: oci://ghcr.io/example/wafguard:0.1.0\n",
			New:  "  url: oci://ghcr.io/example/wafguard@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n  sha256: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n",
			Want: `wasmplugin.yaml:%d: spec.sha256: got bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, but url pins the image digest aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: they must be the same (the image's manifest digest that go run mage.go push prints)`,
			// The line of the inserted sha256, one below old.
			LineOf:  "  url: oci://ghcr.io/example/wafguard:0.1.0\n",
			LineAdd: 1,
		},
		{
			Name: "misspelled admission key in pluginConfig",
			File: "wasmplugin.yaml",
			Old:  "max_inflight: 256", New: "max_inflght: 256",
			// The plugin's parser names the key; the line is pluginConfig's.
			LineOf: "pluginConfig:",
			Want:   `wasmplugin.yaml:%d: spec.pluginConfig: admission: unknown key "max_inflght", want one of max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers`,
		},
		{
			Name: "misspelled traffic extension field",
			File: "trafficextension.yaml",
			Old:  "failStrategy: FAIL_RELOAD", New: "failStratgy: FAIL_RELOAD",
			Want: `trafficextension.yaml:%d: spec.wasm.failStratgy: unknown field "failStratgy"`,
		},
		{
			Name: "snake_case traffic extension field that Kubernetes would drop",
			File: "trafficextension.yaml",
			Old:  "imagePullPolicy: IfNotPresent", New: "image_pull_policy: IfNotPresent",
			Want: `trafficextension.yaml:%d: spec.wasm.image_pull_policy: not allowed by the TrafficExtension CRD schema: unknown field "image_pull_policy" (the API server would drop it; the CRD's field names are camelCase)`,
		},
		{
			Name: "digest that YAML reads as a number",
			File: "trafficextension.yaml",
			Old:  `sha256: "` + zeros + `"`, New: "sha256: " + zeros,
			Want: `trafficextension.yaml:%d: spec.wasm.sha256: invalid value for string field sha256: 0`,
		},
		{
			Name: "missing required traffic extension field",
			File: "trafficextension.yaml",
			Old:  "    url: oci://ghcr.io/example/wafguard@sha256:" + zeros + "\n", New: "",
			Want:   `trafficextension.yaml:%d: spec.wasm: not allowed by the TrafficExtension CRD schema: Required property 'url' is missing`,
			LineOf: "  wasm:\n",
		},
		{
			Name: "traffic extension image by tag",
			File: "trafficextension.yaml",
			Old:  "url: oci://ghcr.io/example/wafguard@sha256:" + zeros, New: "url: oci://ghcr.io/example/wafguard:0.1.0",
			Want: `trafficextension.yaml:%d: spec.wasm.url: got "oci://ghcr.io/example/wafguard:0.1.0", want the image pinned by digest, <registry>/<repository>@sha256:<64 hex digits> (the digest go run mage.go push prints)`,
		},
		{
			Name: "traffic extension that fails open",
			File: "trafficextension.yaml",
			Old:  "failStrategy: FAIL_RELOAD", New: "failStrategy: FAIL_OPEN",
			Want: `trafficextension.yaml:%d: spec.wasm.failStrategy: got FAIL_OPEN, want FAIL_RELOAD or FAIL_CLOSE: FAIL_OPEN skips the WAF`,
		},
		{
			Name: "traffic extension with the hold mode",
			File: "trafficextension.yaml",
			Old:  "      default_directives: crs\n", New: "      default_directives: crs\n      hold_headers_until_inspected: true\n",
			LineOf: "    pluginConfig:\n",
			Want:   `trafficextension.yaml:%d: spec.wasm.pluginConfig: hold_headers_until_inspected is true, but a TrafficExtension cannot set Envoy's allow_on_headers_stop_iteration, without which the plugin answers every held request 500 after hold_headers_timeout_ms: keep it false`,
		},
		{
			Name: "traffic extension configuration that is not the wasm plugin's",
			File: "trafficextension.yaml",
			Old:  "env: prod", New: "env: staging",
			LineOf: "    pluginConfig:\n",
			Want:   `trafficextension.yaml:%d: spec.wasm.pluginConfig: differs from the pluginConfig of wasmplugin.yaml: keep the two the same (envoyfilter-buffer-limit.yaml and stats-bootstrap.yaml are written for it)`,
		},
		{
			Name: "misspelled field in an envoy patch",
			File: "envoyfilter-buffer-limit.yaml",
			Old:  "per_connection_buffer_limit_bytes: 2097152", New: "per_connection_buffer_limit: 2097152",
			Want: `envoyfilter-buffer-limit.yaml:%d: spec.configPatches[0].patch.value.per_connection_buffer_limit: unknown field "per_connection_buffer_limit"`,
		},
		{
			Name: "misspelled field in a typed_config of an envoy patch",
			File: "envoyfilter-ratelimit.yaml",
			Old:  "failure_mode_deny: false", New: "failure_mode_deni: false",
			Want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.value.typed_config.failure_mode_deni: unknown field "failure_mode_deni"`,
		},
		{
			Name: "validation rule in an inserted filter",
			File: "envoyfilter-ratelimit.yaml",
			Old:  "domain: wafguard", New: `domain: ""`,
			Want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.value.typed_config.domain: value length must be at least 1 runes`,
		},
		{
			Name: "unknown patch operation",
			File: "envoyfilter-ratelimit.yaml",
			Old:  "operation: INSERT_FIRST", New: "operation: INSERT_SOMEWHERE",
			Want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.operation: invalid value for enum field operation: "INSERT_SOMEWHERE"`,
		},
		{
			Name: "metric label the bootstrap override does not extract",
			File: "stats-bootstrap.yaml",
			Old:  `{"tag_name": "env", "regex": "(_env=([^_]+))"},`, New: "",
			Want: `stats-bootstrap.yaml: data["custom_bootstrap.json"]: stats_config.stats_tags: stat "wasmcustom.waf_filter.tx.total_env=prod" becomes waf_filter_tx_total_env_prod{}, want waf_filter_tx_total{env="prod"}; add or fix the tag regex of each label`,
		},
	}
	kubeexample.TestBrokenCopies(t, cases, func(file string, data []byte) error {
		return checkFile(file, data, nil)
	})
}

// TestExamples_imageDigest checks the digest trafficextension.yaml pins
// against an image.json (kubeexample.TestImageDigest).
func TestExamples_imageDigest(t *testing.T) {
	const file = "trafficextension.yaml"
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	kubeexample.TestImageDigest(t, strings.Repeat("0", 64), func(digest string, images *kubeexample.Images) error {
		return checkFile(file, bytes.ReplaceAll(orig, []byte(strings.Repeat("0", 64)), []byte(digest)), images)
	})
}
