package hosttest

import (
	"context"
	"testing"

	"github.com/wafguard/wafguard/wasmhost"
)

// crsAdmissionConfig is the full CRS in blocking mode behind a cap of one
// stream in flight.
var crsAdmissionConfig = []byte(`{
  "directives_map": {"crs": ["Include @recommended-conf", "SecRuleEngine On", "Include @crs-setup-conf", "Include @owasp_crs/*.conf"]},
  "default_directives": "crs",
  "admission": {"max_inflight": 1}
}`)

var benignGET = [][2]string{
	{":method", "GET"}, {":path", "/products?category=shoes&page=2&sort=price"}, {":authority", "shop.example"}, {":scheme", "https"},
	{"user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"},
	{"accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
	{"accept-language", "en-US,en;q=0.9"},
}

// crsVM starts one VM of build/main.wasm with crsAdmissionConfig.
func crsVM(b *testing.B) *wasmhost.VM {
	b.Helper()
	m := compile(b, 1)
	vm, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "bench", Configuration: crsAdmissionConfig,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(vm.Close)
	return vm
}

// BenchmarkWasm_admission compares, on build/main.wasm with the full CRS, a
// request the cap rejects with 429 (no Coraza transaction) with an admitted
// benign GET that goes through every WAF phase. The target: the
// rejection costs under 5% of the admitted request.
//
//	go test ./admission/hosttest -run '^$' -bench Wasm_admission -benchmem -count 5 | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkWasm_admission(b *testing.B) {
	vm := crsVM(b)
	up := wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
		return &wasmhost.Response{Status: 200, Headers: [][2]string{{"content-type", "text/html"}}, Body: [][]byte{[]byte("<p>ok</p>")}}, nil
	})
	b.Run("admitted_get", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if r := vm.Exchange(context.Background(), &wasmhost.Request{Headers: benignGET}, up); r.Status != 200 {
				b.Fatalf("admitted GET: got %d (%s), want 200", r.Status, r.Details)
			}
		}
	})
	b.Run("rejected_429", func(b *testing.B) {
		held := vm.NewStream(wasmhost.StreamInfo{})
		if a := held.RequestHeaders(benignGET, true); a != wasmhost.ActionContinue {
			b.Fatalf("holding stream: %v %+v", a, held.Result())
		}
		defer held.End()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if r := vm.Exchange(context.Background(), &wasmhost.Request{Headers: benignGET}, up); r.Status != 429 {
				b.Fatalf("over the cap: got %d (%s), want 429", r.Status, r.Details)
			}
		}
	})
}
