package filter

import (
	"strconv"
	"strings"
)

// histogramCount returns how many samples the histogram with that full name
// holds (the native emulator only keeps the last sample, so there it is 1
// once anything was recorded), and whether it is defined.
func histogramCount(p loadedPlugin, name string) (uint64, bool) {
	switch p := p.(type) {
	case *nativePlugin:
		if _, err := p.host.GetHistogramMetric(name); err != nil {
			return 0, false
		}
		return 1, true
	case *wasmPlugin:
		var b strings.Builder
		if err := p.v.host.WritePrometheus(&b); err != nil {
			return 0, false
		}
		prefix := strings.ReplaceAll(name, ".", "_") + "_count{} "
		for _, line := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				return n, err == nil
			}
		}
	case *v8Plugin:
		h, err := p.r.e.Histograms()
		n, ok := h[name]
		return n, err == nil && ok
	}
	return 0, false
}
