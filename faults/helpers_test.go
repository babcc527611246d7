package faults

import (
	"context"
	"testing"

	"github.com/wafguard/wafguard/wasmhost"
)

// startVM compiles b with opts and starts one VM with its own Host running
// config under policy.
func startVM(t testing.TB, b []byte, opts wasmhost.Options, config string, policy wasmhost.FailurePolicy) (*wasmhost.VM, *wasmhost.Host) {
	t.Helper()
	host := wasmhost.NewHost(wasmhost.HostOptions{})
	opts.Host = host
	if opts.Concurrency == 0 {
		opts.Concurrency = 1
	}
	m, err := wasmhost.Compile(context.Background(), b, opts)
	if err != nil {
		t.Fatalf("compiling: %v", err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	vm, err := m.NewVM(context.Background(), wasmhost.PluginConfig{
		Name: "waf", RootID: "waf", VMID: "waf", Configuration: []byte(config),
		FailurePolicy: policy, ReloadBackoff: 1, ManualTicks: true,
	})
	if err != nil {
		t.Fatalf("starting the VM: %v", err)
	}
	t.Cleanup(vm.Close)
	return vm, host
}

// checkNoLeak asserts that no transaction and no admission slot is held.
func checkNoLeak(t testing.TB, host *wasmhost.Host) {
	t.Helper()
	if v := gauge(host, MetricTxActive); v != 0 {
		t.Errorf("%s: got %d, want 0: a transaction was left open", MetricTxActive, v)
	}
	if v := gauge(host, MetricInflight); v != 0 {
		t.Errorf("%s: got %d, want 0: an admission slot was left held", MetricInflight, v)
	}
}

var info = wasmhost.StreamInfo{SourceAddress: "127.0.0.1:40000", DestinationAddress: "127.0.0.1:8080", Protocol: "HTTP/1.1"}

func request(method, path string, body [][]byte, headers ...[2]string) *wasmhost.Request {
	return &wasmhost.Request{
		Headers: append([][2]string{{":method", method}, {":path", path}, {":authority", "localhost"}, {":scheme", "http"}}, headers...),
		Body:    body,
		Info:    info,
	}
}

var okUpstream = wasmhost.UpstreamFunc(func(context.Context, *wasmhost.UpstreamRequest) (*wasmhost.Response, error) {
	return &wasmhost.Response{Status: 200, Headers: [][2]string{{"content-type", "text/plain"}}, Body: [][]byte{[]byte("ok")}}, nil
})
