package admission

import (
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/wafguard/wafguard/internal/localreply"
)

// host is the part of the proxy-wasm host that the guard calls outside
// shared data. It exists so that the stream logic runs in native tests and
// benchmarks without the SDK's emulator.
type host interface {
	requestHeader(name string) (string, bool)
	// sendReply answers the stream locally; details are the response
	// code details Envoy logs (localreply.Details).
	sendReply(status uint32, details string, headers [][2]string, body []byte) error
	setTickPeriod(ms uint32) error
	logWarn(msg string)
}

// meter defines metrics. The SDK's MetricCounter and MetricGauge satisfy
// counter and gauge.
type meter interface {
	counter(name string) counter
	gauge(name string) gauge
}

type counter interface{ Increment(uint64) }

type gauge interface{ Add(int64) }

// proxyHost is the host backed by the SDK.
type proxyHost struct{}

func (proxyHost) requestHeader(name string) (string, bool) {
	v, err := proxywasm.GetHttpRequestHeader(name)
	return v, err == nil
}

func (proxyHost) sendReply(status uint32, details string, headers [][2]string, body []byte) error {
	return localreply.Send(status, details, headers, body)
}

func (proxyHost) setTickPeriod(ms uint32) error { return proxywasm.SetTickPeriodMilliSeconds(ms) }

func (proxyHost) logWarn(msg string) { proxywasm.LogWarn(msg) }

func (proxyHost) counter(name string) counter { return proxywasm.DefineCounterMetric(name) }

func (proxyHost) gauge(name string) gauge { return proxywasm.DefineGaugeMetric(name) }

var (
	_ host  = proxyHost{}
	_ meter = proxyHost{}
)
