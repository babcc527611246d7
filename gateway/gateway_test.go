// Package gateway holds Envoy Gateway examples for deploying the WAF plugin:
// EnvoyExtensionPolicy objects that attach the plugin's OCI image to a
// Gateway or to one HTTPRoute, the ClientTrafficPolicy and
// BackendTrafficPolicy that raise the buffer limits it needs, and an
// EnvoyProxy that adds envoy/envoy.yaml's memory_allocator_manager to the
// bootstrap. The tests
// check them against Envoy Gateway's own CRD schemas (testdata/crds, carried
// unmodified from the release egRelease), the CRDs' CEL rules that matter
// here, and the project's rules: the image pinned by digest, fail closed,
// and the plugin configuration, config/default.json, valid for the plugin.
package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/proto"

	"github.com/wafguard/wafguard/envoy"
	"github.com/wafguard/wafguard/filter"
	"github.com/wafguard/wafguard/internal/kubeexample"
	"github.com/wafguard/wafguard/pluginconfig"
)

// egRelease is the Envoy Gateway release whose CRDs are in testdata/crds
// (github.com/envoyproxy/gateway, charts/gateway-helm/charts/crds/crds/generated).
const egRelease = "v1.9.0"

const (
	crdDir = "testdata/crds"
	// defaultConfig is the shipped plugin configuration, which the
	// policies carry.
	defaultConfig = "../config/default.json"
	// mainPolicy is the EnvoyExtensionPolicy on the Gateway.
	mainPolicy = "envoyextensionpolicy.yaml"
	// egGroup is the only group Envoy Gateway's policies target.
	egGroup = "gateway.networking.k8s.io"
)

// crds are Envoy Gateway's CRDs, compiled.
var crds = sync.OnceValues(func() (*kubeexample.CRDs, error) {
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var c kubeexample.CRDs
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := c.Add("envoyproxy/gateway "+egRelease+" "+filepath.Base(f), data); err != nil {
			return nil, err
		}
	}
	return &c, nil
})

// targetRef is a policy's target (Gateway API's
// LocalPolicyTargetReferenceWithSectionName).
type targetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// targets are the target fields every Envoy Gateway policy has.
type targets struct {
	TargetRef       *targetRef        `json:"targetRef"`
	TargetRefs      []targetRef       `json:"targetRefs"`
	TargetSelectors []json.RawMessage `json:"targetSelectors"`
}

// eepSpec is the part of an EnvoyExtensionPolicy's spec the checks read;
// the CRD schema has checked every field before.
type eepSpec struct {
	targets
	Wasm []struct {
		Code struct {
			Type  string          `json:"type"`
			HTTP  json.RawMessage `json:"http"`
			Image *struct {
				URL           string `json:"url"`
				SHA256        string `json:"sha256"`
				PullSecretRef *struct {
					Kind *string `json:"kind"`
				} `json:"pullSecretRef"`
			} `json:"image"`
		} `json:"code"`
		Config   json.RawMessage `json:"config"`
		FailOpen *bool           `json:"failOpen"`
	} `json:"wasm"`
}

// trafficSpec is the part of a ClientTrafficPolicy's or
// BackendTrafficPolicy's spec the checks read.
type trafficSpec struct {
	targets
	Connection struct {
		BufferLimit json.RawMessage `json:"bufferLimit"`
	} `json:"connection"`
}

// policy is what checking one object found.
type policy struct {
	kind, name string
	doc        *envoy.Doc
	targets    []targetRef
	digest     string // the image digest an EnvoyExtensionPolicy pins
}

// targetKinds are the kinds each policy may target: the CRDs' CEL rules
// "this policy can only have a targetRefs[*].kind of ...".
var targetKinds = map[string][]string{
	"EnvoyExtensionPolicy": {"Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "UDPRoute", "TCPRoute", "TLSRoute"},
	"BackendTrafficPolicy": {"Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "UDPRoute", "TCPRoute", "TLSRoute"},
	"ClientTrafficPolicy":  {"Gateway", "ListenerSet"},
}

// checkObject checks one object: its spec against the CRD schema, then
// the CEL rules and the project's rules of its kind.
func checkObject(o *kubeexample.Object, images *kubeexample.Images) (*policy, error) {
	meta, err := o.Meta()
	if err != nil {
		return nil, err
	}
	kinds, ok := targetKinds[o.Kind]
	if o.APIVersion != "gateway.envoyproxy.io/v1alpha1" || !ok && o.Kind != "EnvoyProxy" {
		return nil, fmt.Errorf("%s: apiVersion and kind %q: want gateway.envoyproxy.io/v1alpha1 EnvoyExtensionPolicy, ClientTrafficPolicy, BackendTrafficPolicy or EnvoyProxy", o.File, o.GVK())
	}
	doc, err := envoy.NodeDoc(o.File, &o.Spec, "spec")
	if err != nil {
		return nil, err
	}
	c, err := crds()
	if err != nil {
		return nil, err
	}
	if err := c.Validate(doc, o.APIVersion, o.Kind); err != nil {
		return nil, err
	}
	p := &policy{kind: o.Kind, name: meta.Name, doc: doc}
	if o.Kind == "EnvoyProxy" {
		return p, checkEnvoyProxy(doc)
	}
	var t targets
	if err := json.Unmarshal(doc.JSON, &t); err != nil {
		return nil, fmt.Errorf("%s: spec: %w", o.File, err)
	}
	if p.targets, err = checkTargets(doc, t, kinds); err != nil {
		return nil, err
	}
	switch o.Kind {
	case "EnvoyExtensionPolicy":
		p.digest, err = checkExtensionPolicy(doc, images)
	default:
		err = checkBufferLimit(doc)
	}
	return p, err
}

// shippedBootstrap is envoy/envoy.yaml, whose top-level settings the
// EnvoyProxy example carries.
const shippedBootstrap = "../envoy/envoy.yaml"

// checkEnvoyProxy checks the EnvoyProxy that carries envoy/envoy.yaml's
// top-level settings: a bootstrap merged into Envoy Gateway's own (type
// Merge: Replace would drop the xDS settings Envoy Gateway needs), read as
// Envoy Gateway reads it, a strict Bootstrap, with the shipped bootstrap's
// memory_allocator_manager.
func checkEnvoyProxy(doc *envoy.Doc) error {
	var spec struct {
		Bootstrap *struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"bootstrap"`
	}
	if err := json.Unmarshal(doc.JSON, &spec); err != nil {
		return fmt.Errorf("%s: %w", doc.At("spec"), err)
	}
	if spec.Bootstrap == nil {
		return fmt.Errorf("%s: no bootstrap: this EnvoyProxy carries envoy/envoy.yaml's memory_allocator_manager", doc.At("spec"))
	}
	if spec.Bootstrap.Type != "Merge" {
		return fmt.Errorf("%s: got %q, want Merge: the value adds to the bootstrap Envoy Gateway generates (Replace would drop its xDS settings)", doc.At("spec.bootstrap.type"), spec.Bootstrap.Type)
	}
	at := doc.At("spec.bootstrap.value")
	got, _, err := envoy.ParseBootstrap(at, []byte(spec.Bootstrap.Value))
	if err != nil {
		return err
	}
	shipped, _, err := envoy.LoadBootstrap(shippedBootstrap)
	if err != nil {
		return err
	}
	if want := shipped.GetMemoryAllocatorManager(); !proto.Equal(got.GetMemoryAllocatorManager(), want) {
		show := func(m *bootstrapv3.MemoryAllocatorManager) string {
			return fmt.Sprintf("bytes_to_release %d, memory_release_interval %s", m.GetBytesToRelease(), m.GetMemoryReleaseInterval().AsDuration())
		}
		return fmt.Errorf("%s: memory_allocator_manager with %s, want %s's %s", at, show(got.GetMemoryAllocatorManager()), shippedBootstrap, show(want))
	}
	return nil
}

// checkTargets applies the CRDs' CEL rules on targets and returns them.
func checkTargets(doc *envoy.Doc, t targets, kinds []string) ([]targetRef, error) {
	if (t.TargetRef != nil) == (len(t.TargetRefs) > 0) && len(t.TargetSelectors) == 0 {
		return nil, fmt.Errorf("%s: either targetRef or targetRefs must be used", doc.At("spec"))
	}
	refs := t.TargetRefs
	path := "spec.targetRefs[%d]"
	if t.TargetRef != nil {
		refs, path = []targetRef{*t.TargetRef}, "spec.targetRef"
	}
	for i, r := range refs {
		at := strings.ReplaceAll(path, "%d", strconv.Itoa(i))
		if r.Group != egGroup {
			return nil, fmt.Errorf("%s: got %q, but this policy can only have a targetRefs[*].group of %s", doc.At(at+".group"), r.Group, egGroup)
		}
		if !slices.Contains(kinds, r.Kind) {
			return nil, fmt.Errorf("%s: got %q, but this policy can only have a targetRefs[*].kind of %s", doc.At(at+".kind"), r.Kind, strings.Join(kinds, "/"))
		}
	}
	return refs, nil
}

// checkExtensionPolicy checks an EnvoyExtensionPolicy that loads the WAF
// and returns the image digest it pins.
func checkExtensionPolicy(doc *envoy.Doc, images *kubeexample.Images) (string, error) {
	var s eepSpec
	if err := json.Unmarshal(doc.JSON, &s); err != nil {
		return "", fmt.Errorf("%s: spec: %w", doc.Name, err)
	}
	if len(s.Wasm) != 1 {
		return "", fmt.Errorf("%s: got %d wasm extensions, want one, the WAF", doc.At("spec.wasm"), len(s.Wasm))
	}
	w := s.Wasm[0]
	const path = "spec.wasm[0]"
	// The CEL rules of the code source.
	code := w.Code
	if (code.Type == "HTTP") != (code.HTTP != nil) {
		return "", fmt.Errorf("%s: If type is HTTP, http field needs to be set.", doc.At(path+".code"))
	}
	if (code.Type == "Image") != (code.Image != nil) {
		return "", fmt.Errorf("%s: If type is Image, image field needs to be set.", doc.At(path+".code"))
	}
	// The project's rules.
	if code.Type != "Image" {
		return "", fmt.Errorf("%s: got %q, want Image: the plugin's OCI image, pinned by digest", doc.At(path+".code.type"), code.Type)
	}
	if r := code.Image.PullSecretRef; r != nil && r.Kind != nil && *r.Kind != "Secret" {
		return "", fmt.Errorf("%s: only support Secret kind.", doc.At(path+".code.image.pullSecretRef.kind"))
	}
	pin := kubeexample.Pin{Doc: doc, URLPath: path + ".code.image.url", SHA256Path: path + ".code.image.sha256", URL: code.Image.URL, SHA256: code.Image.SHA256}
	digest, err := pin.Required(images)
	if err != nil {
		return "", err
	}
	if w.FailOpen != nil && *w.FailOpen {
		return "", fmt.Errorf("%s: got true, want false (or unset): fail open skips the WAF when the plugin fails, and when its configuration is refused", doc.At(path+".failOpen"))
	}
	if w.Config == nil {
		return "", fmt.Errorf("%s: missing, want the plugin configuration, config/default.json", doc.At(path+".config"))
	}
	if _, err := kubeexample.PluginConfig(doc, path+".config", w.Config, "EnvoyExtensionPolicy"); err != nil {
		return "", err
	}
	shipped, err := os.ReadFile(defaultConfig)
	if err != nil {
		return "", err
	}
	if !sameJSON(w.Config, shipped) {
		return "", fmt.Errorf("%s: differs from config/default.json: keep the example's configuration the shipped one", doc.At(path+".config"))
	}
	return digest, nil
}

// sameJSON reports whether two JSON documents hold the same value.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// egDefaultBufferLimit is Envoy Gateway's per-connection buffer limit on
// listeners and clusters when no policy sets one (the CRDs' "Default:
// 32768 bytes").
const egDefaultBufferLimit = 32768

// checkBufferLimit checks that a ClientTrafficPolicy (the listener) or
// BackendTrafficPolicy (the clusters) sets a buffer limit larger than the
// request body limits of the shipped configuration, so that the WAF's
// limit answers a large body before Envoy's buffer overflows.
func checkBufferLimit(doc *envoy.Doc) error {
	var s trafficSpec
	if err := json.Unmarshal(doc.JSON, &s); err != nil {
		return fmt.Errorf("%s: spec: %w", doc.Name, err)
	}
	const path = "spec.connection.bufferLimit"
	if s.Connection.BufferLimit == nil {
		return fmt.Errorf("%s: missing, want a buffer limit larger than the WAF's body limit (Envoy Gateway's default is %d bytes)", doc.At(path), egDefaultBufferLimit)
	}
	limit, err := quantity(s.Connection.BufferLimit)
	if err != nil {
		return fmt.Errorf("%s: %w", doc.At(path), err)
	}
	key, body, err := wafBodyLimit()
	if err != nil {
		return err
	}
	if limit <= body {
		return fmt.Errorf("%s: got %s (%d bytes), want more than %s (%d) of config/default.json, so that the WAF's limit answers before Envoy's 413", doc.At(path), s.Connection.BufferLimit, limit, key, body)
	}
	return nil
}

// wafBodyLimit returns the largest request body limit of the shipped
// configuration that is on, and its key.
func wafBodyLimit() (string, int64, error) {
	data, err := os.ReadFile(defaultConfig)
	if err != nil {
		return "", 0, err
	}
	pc, err := pluginconfig.Parse(data)
	if err != nil {
		return "", 0, fmt.Errorf("config/default.json: %w", err)
	}
	key, limit := "request_body_no_files_limit", int64(filter.DefaultRequestBodyNoFilesLimit)
	if v := pc.Filter.RequestBodyNoFilesLimit; v != nil {
		limit = *v
	}
	if b := pc.Admission.MaxRequestBodyBytes; b > limit {
		key, limit = "admission.max_request_body_bytes", b
	}
	return key, limit, nil
}

// quantityForm is the form the CRDs allow for a buffer limit (a Kubernetes
// quantity, restricted): digits and an optional binary or decimal suffix.
var quantityForm = regexp.MustCompile(`^([1-9][0-9]*)([EPTGMK]i|[EPTGMk])?$`)

var quantityUnits = map[string]int64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// quantity returns the bytes of a buffer limit, a JSON integer or
// quantity string.
func quantity(raw json.RawMessage) (int64, error) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	m := quantityForm.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("got %s, want a quantity such as 2Mi", raw)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > (1<<62)/quantityUnits[m[2]] {
		return 0, fmt.Errorf("got %s: out of range", raw)
	}
	return n * quantityUnits[m[2]], nil
}

// checkFiles checks the example files (name to content) and the rules
// across them: both EnvoyExtensionPolicy files pin the same image, one
// targets a Gateway and one an HTTPRoute, and the buffer limits are set
// for the listener and the clusters of the Gateway the first targets.
func checkFiles(files map[string][]byte, images *kubeexample.Images) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var all []*policy
	for _, n := range names {
		objs, err := kubeexample.ReadObjects(n, files[n])
		if err != nil {
			return err
		}
		for _, o := range objs {
			p, err := checkObject(o, images)
			if err != nil {
				return err
			}
			all = append(all, p)
		}
	}
	// The image of envoyextensionpolicy.yaml is the one every policy
	// pins.
	var main *policy
	covered := map[string]bool{}
	for _, p := range all {
		for _, t := range p.targets {
			covered[p.kind+" on "+t.Kind] = true
		}
		if p.kind == "EnvoyProxy" {
			covered[p.kind] = true
		}
		if p.digest != "" && (main == nil || p.doc.Name == mainPolicy) {
			main = p
		}
	}
	for _, p := range all {
		if p.digest != "" && p.digest != main.digest {
			return fmt.Errorf("%s: pins %s, but %s pins %s: put the same image in every policy", p.doc.At("spec.wasm[0].code.image.sha256"), p.digest, main.doc.Name, main.digest)
		}
	}
	for _, want := range []string{"EnvoyExtensionPolicy on Gateway", "EnvoyExtensionPolicy on HTTPRoute", "ClientTrafficPolicy on Gateway", "BackendTrafficPolicy on Gateway", "EnvoyProxy"} {
		if !covered[want] {
			return fmt.Errorf("no %s among %v", want, names)
		}
	}
	return nil
}

// readExamples reads every example of this directory.
func readExamples(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = data
	}
	return files
}

// TestExamples_files checks every example in this directory. With
// WAFGUARD_IMAGE_DIR set (kubeexample.ImageDirEnv), the digest the
// policies pin must be that of an image go run mage.go image wrote there.
func TestExamples_files(t *testing.T) {
	images, err := kubeexample.ImagesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFiles(readExamples(t), images); err != nil {
		t.Fatal(err)
	}
}

// TestExamples_brokenCopies feeds broken copies of the examples to the same
// checks and asserts that each failure names the file, line and field.
func TestExamples_brokenCopies(t *testing.T) {
	const eep, route, buffers = mainPolicy, "envoyextensionpolicy-httproute.yaml", "buffer-limits.yaml"
	zeros := strings.Repeat("0", 64)
	const proxy = "envoyproxy.yaml"
	cases := []kubeexample.BrokenCopy{
		{
			Name: "EnvoyProxy: a field its CRD does not have",
			File: proxy,
			Old:  "    type: Merge\n", New: "    type: Merge\n    kind: Merge\n",
			Want:    proxy + `:%d: spec.bootstrap.kind: not allowed by the EnvoyProxy CRD schema: unknown field "kind" (the API server would drop it; the CRD's field names are camelCase)`,
			LineAdd: 1,
		},
		{
			Name: "EnvoyProxy: bootstrap replaced",
			File: proxy,
			Old:  "    type: Merge\n", New: "    type: Replace\n",
			Want: proxy + `:%d: spec.bootstrap.type: got "Replace", want Merge: the value adds to the bootstrap Envoy Gateway generates (Replace would drop its xDS settings)`,
		},
		{
			Name: "EnvoyProxy: a misspelled bootstrap field",
			File: proxy,
			Old:  "        bytes_to_release:", New: "        bytes_to_releas:",
			Want:   proxy + `:%d: spec.bootstrap.value:2: memory_allocator_manager.bytes_to_releas: unknown field "bytes_to_releas"`,
			LineOf: "    value: |",
		},
		{
			Name: "EnvoyProxy: another release interval",
			File: proxy,
			Old:  "memory_release_interval: 1s", New: "memory_release_interval: 10s",
			Want:   proxy + `:%d: spec.bootstrap.value: memory_allocator_manager with bytes_to_release 104857600, memory_release_interval 10s, want ../envoy/envoy.yaml's bytes_to_release 104857600, memory_release_interval 1s`,
			LineOf: "    value: |",
		},
		{
			Name: "misspelled field",
			File: eep,
			Old:  "failOpen: false", New: "failOpn: false",
			Want: eep + `:%d: spec.wasm[0].failOpn: not allowed by the EnvoyExtensionPolicy CRD schema: unknown field "failOpn" (the API server would drop it; the CRD's field names are camelCase)`,
		},
		{
			Name: "wrong type",
			File: eep,
			Old:  "failOpen: false", New: `failOpen: "no"`,
			Want: eep + `:%d: spec.wasm[0].failOpen: not allowed by the EnvoyExtensionPolicy CRD schema: Value is string but should be boolean`,
		},
		{
			Name: "missing required field",
			File: eep,
			Old:  "      type: Image\n", New: "",
			Want:   eep + `:%d: spec.wasm[0].code: not allowed by the EnvoyExtensionPolicy CRD schema: Required property 'type' is missing`,
			LineOf: "    code:\n",
		},
		{
			Name: "value the CRD's pattern refuses, in another kind",
			File: buffers,
			Old:  "bufferLimit: 2Mi\n---", New: "bufferLimit: 2.5Mi\n---",
			Want: buffers + `:%d: spec.connection.bufferLimit: not allowed by the ClientTrafficPolicy CRD schema: Value does not match the required pattern ^[1-9]+[0-9]*([EPTGMK]i|[EPTGMk])?$`,
		},
		{
			Name: "target kind the policy cannot have",
			File: route,
			Old:  "kind: HTTPRoute", New: "kind: Service",
			Want: route + `:%d: spec.targetRefs[0].kind: got "Service", but this policy can only have a targetRefs[*].kind of Gateway/ListenerSet/HTTPRoute/GRPCRoute/UDPRoute/TCPRoute/TLSRoute`,
		},
		{
			Name: "code type without its source",
			File: eep,
			Old:  "type: Image", New: "type: HTTP",
			Want:   eep + `:%d: spec.wasm[0].code: If type is HTTP, http field needs to be set.`,
			LineOf: "    code:\n",
		},
		{
			Name: "fail open",
			File: eep,
			Old:  "failOpen: false", New: "failOpen: true",
			Want: eep + `:%d: spec.wasm[0].failOpen: got true, want false (or unset): fail open skips the WAF when the plugin fails, and when its configuration is refused`,
		},
		{
			Name: "image by tag",
			File: eep,
			Old:  "url: ghcr.io/example/wafguard@sha256:" + zeros, New: "url: ghcr.io/example/wafguard:0.1.0",
			Want: eep + `:%d: spec.wasm[0].code.image.url: got "ghcr.io/example/wafguard:0.1.0", want the image pinned by digest, <registry>/<repository>@sha256:<64 hex digits> (the digest go run mage.go push prints)`,
		},
		{
			Name: "sha256 that is not the digest the url pins",
			File: eep,
			Old:  `sha256: "` + zeros + `"`, New: `sha256: "` + strings.Repeat("b", 64) + `"`,
			Want: eep + `:%d: spec.wasm[0].code.image.sha256: got ` + strings.Repeat("b", 64) + `, but url pins the image digest ` + zeros + `: they must be the same (the image's manifest digest that go run mage.go push prints)`,
		},
		{
			Name: "sha256 with its prefix",
			File: eep,
			Old:  `sha256: "` + zeros + `"`, New: `sha256: "sha256:` + zeros + `"`,
			Want: eep + `:%d: spec.wasm[0].code.image.sha256: got "sha256:` + zeros + `", want 64 lowercase hex digits without "sha256:"`,
		},
		{
			Name: "another image in the route's policy",
			File: route,
			Old:  "url: ghcr.io/example/wafguard@sha256:" + zeros + "\n        sha256: \"" + zeros + "\"",
			New:  "url: ghcr.io/example/wafguard@sha256:" + strings.Repeat("c", 64) + "\n        sha256: \"" + strings.Repeat("c", 64) + "\"",
			Want: route + `:%d: spec.wasm[0].code.image.sha256: pins ` + strings.Repeat("c", 64) + `, but ` + eep + ` pins ` + zeros + `: put the same image in every policy`,
			// The sha256 line, one below old's first line.
			LineAdd: 1,
		},
		{
			Name: "misspelled key in the plugin configuration",
			File: eep,
			Old:  "max_inflight: 256", New: "max_inflght: 256",
			Want:   eep + `:%d: spec.wasm[0].config: admission: unknown key "max_inflght", want one of max_inflight, max_inflight_per_vm, retry_after_seconds, retry_after_max_seconds, max_request_body_bytes, per_authority, tick_period_ms, stale_after_ms, cas_retries, on_cas_exhausted, shared_data_key, reject_body, reject_content_type, reject_headers`,
			LineOf: "    config:\n",
		},
		{
			Name: "directive that does not compile",
			File: route,
			Old:  "- SecRuleEngine On", New: "- SecRuleEngin On",
			Want:   route + `:%d: spec.wasm[0].config: directives_map["crs"]: invalid SecLang, fix or remove the directive: invalid WAF config from string: unknown directive "secruleengin"`,
			LineOf: "    config:\n",
		},
		{
			Name: "hold mode that needs allow_on_headers_stop_iteration",
			File: eep,
			Old:  "      default_directives: crs\n", New: "      default_directives: crs\n      hold_headers_until_inspected: true\n",
			Want:   eep + `:%d: spec.wasm[0].config: hold_headers_until_inspected is true, but a EnvoyExtensionPolicy cannot set Envoy's allow_on_headers_stop_iteration, without which the plugin answers every held request 500 after hold_headers_timeout_ms: keep it false`,
			LineOf: "    config:\n",
		},
		{
			Name: "configuration that is not the shipped one",
			File: route,
			Old:  "retry_after_seconds: 1", New: "retry_after_seconds: 2",
			Want:   route + `:%d: spec.wasm[0].config: differs from config/default.json: keep the example's configuration the shipped one`,
			LineOf: "    config:\n",
		},
		{
			Name: "buffer limit that the WAF's body limit does not fit in",
			File: buffers,
			Old:  "bufferLimit: 2Mi\n---", New: "bufferLimit: 1Mi\n---",
			Want: buffers + `:%d: spec.connection.bufferLimit: got "1Mi" (1048576 bytes), want more than request_body_no_files_limit (1048576) of config/default.json, so that the WAF's limit answers before Envoy's 413`,
		},
		{
			Name: "buffer limit left at Envoy Gateway's default",
			File: buffers,
			Old:  "  connection:\n    # The upstream clusters' per_connection_buffer_limit_bytes: response\n    # bodies the plugin holds for inspection.\n    bufferLimit: 2Mi\n", New: "",
			Want: buffers + `: spec.connection.bufferLimit: missing, want a buffer limit larger than the WAF's body limit (Envoy Gateway's default is 32768 bytes)`,
		},
	}
	orig := readExamples(t)
	kubeexample.TestBrokenCopies(t, cases, func(file string, data []byte) error {
		files := maps.Clone(orig)
		files[file] = data
		return checkFiles(files, nil)
	})
}

// TestExamples_imageDigest checks the digest the policies pin against an
// image.json (kubeexample.TestImageDigest).
func TestExamples_imageDigest(t *testing.T) {
	orig := readExamples(t)
	kubeexample.TestImageDigest(t, strings.Repeat("0", 64), func(digest string, images *kubeexample.Images) error {
		files := maps.Clone(orig)
		for n, data := range files {
			files[n] = bytes.ReplaceAll(data, []byte(strings.Repeat("0", 64)), []byte(digest))
		}
		return checkFiles(files, images)
	})
}

// TestCRDs_provenance checks that the CRDs in testdata/crds are the files
// testdata/crds/README.md lists, unmodified: each file's sha256 is the one
// recorded there, and the README names the release egRelease.
func TestCRDs_provenance(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(crdDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("`"+egRelease+"`")) {
		t.Errorf("%s/README.md does not name the release %s", crdDir, egRelease)
	}
	listed := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+\\.yaml)` \\| `([0-9a-f]{64})` \\|$").FindAllStringSubmatch(string(readme), -1) {
		listed[m[1]] = m[2]
	}
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || len(files) != len(listed) {
		t.Fatalf("%d CRD files, %d listed in README.md", len(files), len(listed))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got, want := hex.EncodeToString(sum[:]), listed[filepath.Base(f)]; got != want {
			t.Errorf("%s: sha256 %s, README.md lists %q: the carried files must stay as released", f, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(crdDir, "LICENSE")); errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/LICENSE is missing: the CRDs are Apache-2.0 files and travel with their license", crdDir)
	}
}
