package filter

import (
	"os"
	"strconv"
	"testing"
)

func BenchmarkZZOrder(b *testing.B) {
	quietLogs(b)
	host, reset := startBenchPlugin(b)
	defer reset()
	body, err := os.ReadFile("/tmp/order.json")
	if err != nil {
		b.Skip(err)
	}
	r := benchRequests[1]
	r.Body = body
	r.Headers = [][2]string{{"content-type", "application/json"}, {"content-length", strconv.Itoa(len(body))}}
	b.ReportAllocs()
	for b.Loop() {
		if got := emulatorRequest(host, &r, requestHeaders(&r)); got != 200 {
			b.Fatal(got)
		}
	}
}
