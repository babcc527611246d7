// Package istio holds Istio examples for deploying the WAF plugin
// (WasmPlugin, EnvoyFilter, a bootstrap override ConfigMap). The tests check
// them against Istio's API: the istio.io/api types, decoded strictly, and
// the OpenAPI schema of Istio's CRDs, and the Envoy fragments inside them
// against Envoy's API.
package istio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"gopkg.in/yaml.v3"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/pluginconfig"
)

// object is one Kubernetes object of an example file.
type object struct {
	file       string
	doc        int       // index of the YAML document in the file
	APIVersion string    `yaml:"apiVersion"`
	Kind       string    `yaml:"kind"`
	Metadata   yaml.Node `yaml:"metadata"`
	Spec       yaml.Node `yaml:"spec"`
	Data       yaml.Node `yaml:"data"`
	root       *yaml.Node
}

// readObjects reads every YAML document of the file as a Kubernetes object.
// Unknown top-level keys are errors.
func readObjects(name string, data []byte) ([]*object, error) {
	var out []*object
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
		o := &object{file: name, doc: i, root: &root}
		if err := decodeKnown(&root, o); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// decodeKnown decodes n into v, refusing keys v does not have.
func decodeKnown(n *yaml.Node, v any) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return err
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	return dec.Decode(v)
}

// checkObject checks one object by kind.
func checkObject(o *object) error {
	var meta struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	}
	if err := decodeKnown(&o.Metadata, &meta); err != nil {
		return fmt.Errorf("%s: metadata: %w", o.file, err)
	}
	if meta.Name == "" || meta.Namespace == "" {
		return fmt.Errorf("%s: metadata: want a name and a namespace", o.file)
	}
	switch gvk := o.APIVersion + "/" + o.Kind; gvk {
	case "extensions.istio.io/v1alpha1/WasmPlugin":
		return checkWasmPlugin(o)
	case "networking.istio.io/v1alpha3/EnvoyFilter":
		return checkEnvoyFilter(o)
	case "v1/ConfigMap":
		return checkBootstrapOverride(o)
	default:
		return fmt.Errorf("%s: apiVersion and kind %q: want extensions.istio.io/v1alpha1 WasmPlugin, networking.istio.io/v1alpha3 EnvoyFilter or v1 ConfigMap", o.file, gvk)
	}
}

// checkSpec decodes the spec strictly into m and validates it against the
// CRD's OpenAPI schema.
func checkSpec(o *object, m proto.Message) (*envoy.Doc, error) {
	doc, err := envoy.UnmarshalNode(o.file, &o.Spec, "spec", m)
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

func checkWasmPlugin(o *object) error {
	var wp extensionsv1alpha1.WasmPlugin
	doc, err := checkSpec(o, &wp)
	if err != nil {
		return err
	}
	// Rules of the CRD's x-kubernetes-validations, which need a CEL
	// evaluator: written out here.
	if !ociURL.MatchString(wp.GetUrl()) {
		return fmt.Errorf("%s: got %q, want oci://<registry>/<repository>:<tag> or @sha256:<digest>, the image built from the Dockerfile", doc.At("spec.url"), wp.GetUrl())
	}
	// WasmPlugin.sha256: "If the url field already references a SHA256
	// (using the @sha256: notation), it must match the value of this
	// field."
	if i := strings.Index(wp.GetUrl(), "@sha256:"); i >= 0 && wp.GetSha256() != "" && wp.GetUrl()[i+len("@sha256:"):] != wp.GetSha256() {
		return fmt.Errorf("%s: got %s, but url pins the image digest %s: they must be the same (the image's manifest digest that go run mage.go push prints)", doc.At("spec.sha256"), wp.GetSha256(), wp.GetUrl()[i+len("@sha256:"):])
	}
	if n := len(wp.GetTargetRefs()); (wp.GetSelector() != nil) && (n > 0 || wp.GetTargetRef() != nil) {
		return fmt.Errorf("%s: only one of targetRefs or selector can be set", doc.At("spec.selector"))
	}
	// The project's rules.
	if wp.GetFailStrategy() != extensionsv1alpha1.FailStrategy_FAIL_RELOAD && wp.GetFailStrategy() != extensionsv1alpha1.FailStrategy_FAIL_CLOSE {
		return fmt.Errorf("%s: got %s, want FAIL_RELOAD or FAIL_CLOSE: FAIL_OPEN skips the WAF", doc.At("spec.failStrategy"), wp.GetFailStrategy())
	}
	if gatewaySelector(wp.GetSelector().GetMatchLabels()) {
		for i, m := range wp.GetMatch() {
			if m.GetMode() == typev1beta1.WorkloadMode_SERVER {
				return fmt.Errorf("%s: SERVER never selects a gateway's traffic (istio.type.v1beta1.WorkloadMode: a gateway counts as CLIENT), so the plugin would not run; remove match or use CLIENT_AND_SERVER", doc.At(fmt.Sprintf("spec.match[%d].mode", i)))
			}
		}
	}
	if wp.GetType() != extensionsv1alpha1.PluginType_HTTP {
		return fmt.Errorf("%s: got %s, want HTTP", doc.At("spec.type"), wp.GetType())
	}
	if wp.GetPluginConfig() == nil {
		return fmt.Errorf("%s: missing, want the plugin configuration", doc.At("spec.pluginConfig"))
	}
	// Istio passes pluginConfig to Envoy as its JSON in a StringValue.
	cfg, err := protojson.Marshal(wp.GetPluginConfig())
	if err != nil {
		return fmt.Errorf("%s: %w", doc.At("spec.pluginConfig"), err)
	}
	if err := pluginconfig.Check(cfg); err != nil {
		return fmt.Errorf("%s: %w", doc.At("spec.pluginConfig"), err)
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

func checkEnvoyFilter(o *object) error {
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
		value := findNode(&o.Spec, "configPatches", i, "patch", "value")
		if value == nil {
			return fmt.Errorf("%s: missing, want the %s to %s", doc.At(path+".patch"), cp.GetApplyTo(), op)
		}
		m := newType()
		vdoc, err := envoy.UnmarshalNode(o.file, value, path+".patch.value", m)
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

func checkBootstrapOverride(o *object) error {
	var data map[string]string
	if err := decodeKnown(&o.Data, &data); err != nil {
		return fmt.Errorf("%s: data: %w", o.file, err)
	}
	text, ok := data[bootstrapKey]
	if !ok || len(data) != 1 {
		return fmt.Errorf("%s: data: want exactly the key %q, the one Istio reads", o.file, bootstrapKey)
	}
	if !json.Valid([]byte(text)) {
		return fmt.Errorf("%s: data[%q]: not valid JSON", o.file, bootstrapKey)
	}
	var b bootstrapv3.Bootstrap
	bdoc, err := envoy.UnmarshalYAML(o.file+": data["+bootstrapKey+"]", []byte(text), &b)
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
		return fmt.Errorf("%s: data[%q]: stats_config.stats_tags: %w", o.file, bootstrapKey, err)
	}
	return nil
}

// wasmPluginLabels returns the metric_labels of wasmplugin.yaml, whose
// metrics the bootstrap override labels.
func wasmPluginLabels() (map[string]string, error) {
	data, err := os.ReadFile("wasmplugin.yaml")
	if err != nil {
		return nil, err
	}
	objs, err := readObjects("wasmplugin.yaml", data)
	if err != nil {
		return nil, err
	}
	var wp extensionsv1alpha1.WasmPlugin
	if _, err := envoy.UnmarshalNode("wasmplugin.yaml", &objs[0].Spec, "spec", &wp); err != nil {
		return nil, err
	}
	cfg, err := protojson.Marshal(wp.GetPluginConfig())
	if err != nil {
		return nil, err
	}
	pc, err := pluginconfig.Parse(cfg)
	if err != nil {
		return nil, err
	}
	return pc.Filter.MetricLabels, nil
}

// findNode follows mapping keys (string) and sequence indexes (int) from n.
func findNode(n *yaml.Node, path ...any) *yaml.Node {
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
				return findNode(n.Content[i+1], path[1:]...)
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && p < len(n.Content) {
			return findNode(n.Content[p], path[1:]...)
		}
	}
	return nil
}

func checkFile(name string, data []byte) error {
	objs, err := readObjects(name, data)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("%s: no objects", name)
	}
	for _, o := range objs {
		if err := checkObject(o); err != nil {
			return err
		}
	}
	return nil
}

// TestExamples_files checks every example in this directory.
func TestExamples_files(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %v, want wasmplugin.yaml, envoyfilter-buffer-limit.yaml, envoyfilter-ratelimit.yaml and stats-bootstrap.yaml", files)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkFile(file, data); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestExamples_brokenCopies feeds broken copies of the examples to the same
// checks and asserts that each failure names the file, line and field.
func TestExamples_brokenCopies(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		old, new string
		// want is the expected error; %d is replaced by the line of
		// lineOf, or of old when lineOf is empty.
		want    string
		lineOf  string
		lineAdd int
	}{
		{
			name: "misspelled wasm plugin field",
			file: "wasmplugin.yaml",
			old:  "failStrategy: FAIL_RELOAD", new: "failStratgy: FAIL_RELOAD",
			want: `wasmplugin.yaml:%d: spec.failStratgy: unknown field "failStratgy"`,
		},
		{
			name: "snake_case field name that Kubernetes would drop",
			file: "wasmplugin.yaml",
			old:  "failStrategy: FAIL_RELOAD", new: "fail_strategy: FAIL_RELOAD",
			want: `wasmplugin.yaml:%d: spec.fail_strategy: not allowed by the WasmPlugin CRD schema: unknown field "fail_strategy" (the API server would drop it; the CRD's field names are camelCase)`,
		},
		{
			name: "fail open",
			file: "wasmplugin.yaml",
			old:  "failStrategy: FAIL_RELOAD", new: "failStrategy: FAIL_OPEN",
			want: `wasmplugin.yaml:%d: spec.failStrategy: got FAIL_OPEN, want FAIL_RELOAD or FAIL_CLOSE: FAIL_OPEN skips the WAF`,
		},
		{
			name: "match mode that never selects a gateway",
			file: "wasmplugin.yaml",
			old:  "  failStrategy: FAIL_RELOAD\n", new: "  failStrategy: FAIL_RELOAD\n  match:\n  - mode: SERVER\n",
			want: `wasmplugin.yaml:%d: spec.match[0].mode: SERVER never selects a gateway's traffic (istio.type.v1beta1.WorkloadMode: a gateway counts as CLIENT), so the plugin would not run; remove match or use CLIENT_AND_SERVER`,
			// The line of the inserted "- mode: SERVER", two below old.
			lineOf:  "  failStrategy: FAIL_RELOAD\n",
			lineAdd: 2,
		},
		{
			name: "sha256 that is not the digest the url pins",
			file: "wasmplugin.yaml",
			old:  "  url: oci://ghcr.io/example/wafguard:0.1.0\n",
			new:  "  url: oci://ghcr.io/example/wafguard@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n  sha256: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n",
			want: `wasmplugin.yaml:%d: spec.sha256: got bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, but url pins the image digest aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: they must be the same (the image's manifest digest that go run mage.go push prints)`,
			// The line of the inserted sha256, one below old.
			lineOf:  "  url: oci://ghcr.io/example/wafguard:0.1.0\n",
			lineAdd: 1,
		},
		{
			name: "misspelled admission key in pluginConfig",
			file: "wasmplugin.yaml",
			old:  "max_inflight: 256", new: "max_inflght: 256",
			// The plugin's parser names the key; the line is pluginConfig's.
			lineOf: "pluginConfig:",
			want:   `wasmplugin.yaml:%d: spec.pluginConfig: admission: unknown key "max_inflght", want one of max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers`,
		},
		{
			name: "misspelled field in an envoy patch",
			file: "envoyfilter-buffer-limit.yaml",
			old:  "per_connection_buffer_limit_bytes: 2097152", new: "per_connection_buffer_limit: 2097152",
			want: `envoyfilter-buffer-limit.yaml:%d: spec.configPatches[0].patch.value.per_connection_buffer_limit: unknown field "per_connection_buffer_limit"`,
		},
		{
			name: "misspelled field in a typed_config of an envoy patch",
			file: "envoyfilter-ratelimit.yaml",
			old:  "failure_mode_deny: false", new: "failure_mode_deni: false",
			want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.value.typed_config.failure_mode_deni: unknown field "failure_mode_deni"`,
		},
		{
			name: "validation rule in an inserted filter",
			file: "envoyfilter-ratelimit.yaml",
			old:  "domain: wafguard", new: `domain: ""`,
			want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.value.typed_config.domain: value length must be at least 1 runes`,
		},
		{
			name: "unknown patch operation",
			file: "envoyfilter-ratelimit.yaml",
			old:  "operation: INSERT_FIRST", new: "operation: INSERT_SOMEWHERE",
			want: `envoyfilter-ratelimit.yaml:%d: spec.configPatches[0].patch.operation: invalid value for enum field operation: "INSERT_SOMEWHERE"`,
		},
		{
			name: "metric label the bootstrap override does not extract",
			file: "stats-bootstrap.yaml",
			old:  `{"tag_name": "env", "regex": "(_env=([^_]+))"},`, new: "",
			want: `stats-bootstrap.yaml: data["custom_bootstrap.json"]: stats_config.stats_tags: stat "wasmcustom.waf_filter.tx.total_env=prod" becomes waf_filter_tx_total_env_prod{}, want waf_filter_tx_total{env="prod"}; add or fix the tag regex of each label`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig, err := os.ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			s := string(orig)
			if n := strings.Count(s, c.old); n != 1 {
				t.Fatalf("%q occurs %d times in %s, want exactly 1", c.old, n, c.file)
			}
			lineOf := c.old
			if c.lineOf != "" {
				lineOf = c.lineOf
			}
			line := strings.Count(s[:strings.Index(s, lineOf)], "\n") + 1 + c.lineAdd
			err = checkFile(c.file, []byte(strings.Replace(s, c.old, c.new, 1)))
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
