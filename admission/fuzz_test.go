package admission

import (
	"bytes"
	"strings"
	"testing"
)

// The fuzz targets here replay their seeds and testdata/fuzz/<target>/ under
// plain `go test`. To fuzz one (at most a minute at a time on a shared
// machine):
//
//	go test ./admission -run '^$' -fuzz '^FuzzParseConfig$' -fuzztime 60s -parallel 1
//	go test ./admission -run '^$' -fuzz '^FuzzGuard_sharedValue$' -fuzztime 60s -parallel 1
//
// Inputs the fuzzer finds land in testdata/fuzz/<target>/; keep the ones
// that failed, once fixed, so that CI replays them.

// FuzzParseConfig checks that any admission object either fails with a
// located error ("admission..." and no newline) or gives a configuration
// that New accepts and Start can run with, without a panic.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"max_inflight": 1}`,
		`{"max_inflight": -1}`, `{"max_inflight": 1e99}`, `{"max_inflight": 1.5}`,
		`{"max_inflight": 10, "retry_after_seconds": 2, "retry_after_max_seconds": 60}`,
		`{"retry_after_seconds": 100, "retry_after_max_seconds": 5}`,
		`{"max_request_body_bytes": 1048576}`,
		`{"per_authority": {"a.example": {"max_inflight": 2}, "B.example:8080": {"max_inflight": 1}}}`,
		`{"per_authority": {"": {"max_inflight": 2}}}`,
		`{"per_authority": {"a": {"max_inflight": 2, "x": 1}}}`,
		`{"tick_period_ms": 100, "stale_after_ms": 200}`,
		`{"tick_period_ms": 100, "stale_after_ms": 199}`,
		`{"cas_retries": 0, "on_cas_exhausted": "admit"}`,
		`{"on_cas_exhausted": "maybe"}`,
		`{"shared_data_key": ""}`, `{"shared_data_key": "\u0000\ud800"}`,
		`{"max_inflight": 1}{"max_inflight": 2}`, `{"max_inflight": 1,}`,
		`{"max_inflight": 1, "max_inflight": 2}`, `{"unknown": 1}`,
		"{\"shared_data_key\": \"\xff\xfe\"}",
		`{"per_authority": {"a": null}}`, `{"per_authority": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := ParseConfig(raw)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "admission") {
				t.Fatalf("error %q does not name the admission key", msg)
			}
			return
		}
		if cfg.MaxInflight < 0 || cfg.RetryAfterSeconds < 1 || cfg.RetryAfterMaxSeconds < cfg.RetryAfterSeconds ||
			cfg.StaleAfterMS < 2*cfg.TickPeriodMS || cfg.CASRetries < 0 || cfg.SharedDataKey == "" || cfg.MaxRequestBodyBytes < 0 {
			t.Fatalf("ParseConfig(%q) accepted an out-of-range configuration: %+v", raw, cfg)
		}
		st := newFakeProcess().store("vm")
		g := New(cfg, st, WithClock(newFakeClock()))
		g.host, g.meter = &nopHost{}, newFakeMetrics()
		if err := g.Start(); err != nil {
			t.Fatalf("Start with %q: %v", raw, err)
		}
		if !g.capOn {
			return // Start did nothing: no slots to take
		}
		// One stream in and out leaves nothing held.
		if v := g.acquire(-1); v == admitted {
			g.release(-1)
		}
		if total, _ := sharedTotal(t, st, cfg.SharedDataKey); total != 0 {
			t.Fatalf("config %q: %d slots held after one stream", raw, total)
		}
	})
}

// FuzzGuard_sharedValue puts arbitrary bytes in the shared-data value that
// holds the counts, as a corrupt or foreign writer could, and runs an
// acquire, a release and a tick. The guard must not panic, must leave a
// well-formed value, and must hold no slot of its own afterwards.
func FuzzGuard_sharedValue(f *testing.F) {
	// A valid value with one foreign member holding 3 slots, built the
	// way the guard writes it.
	valid := append([]byte(stateMagic), 1, 0, 0, 0)
	member := make([]byte, memberFixedSize)
	le.PutUint64(member[offID:], 42)
	le.PutUint64(member[offBeat:], 1_700_000_000_000)
	le.PutUint32(member[offInflight:], 3)
	valid = append(valid, member...)
	for _, s := range [][]byte{
		nil, {}, []byte("WGA1"), []byte("WGA1\x00\x00\x00\x00"), []byte("WGA1\xff\xff\x00\x00"),
		[]byte("WGA1\x01\x00\x00\x00"), valid, valid[:len(valid)-1], append(bytes.Clone(valid), 0),
		[]byte("garbage that is not a state value"),
	} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, value []byte, capN uint8) {
		config := `{"max_inflight": ` + itoa(int(capN)%8+1) + `}`
		st := newFakeProcess().store("vm")
		clk := newFakeClock()
		g := newTestGuard(t, config, st, newFakeMetrics(), &nopHost{}, clk)
		if err := st.Set(DefaultSharedDataKey, value, 0); err != nil {
			t.Fatalf("seeding the value: %v", err)
		}
		if v := g.acquire(-1); v == admitted {
			g.release(-1)
		}
		clk.advance(int64(g.cfg.TickPeriodMS))
		g.OnTick()
		if g.local != 0 {
			t.Fatalf("value %x: the guard still counts %d local slots", value, g.local)
		}
		v, _, err := st.Get(DefaultSharedDataKey)
		if err != nil {
			t.Fatalf("value %x: the key is gone after a tick: %v", value, err)
		}
		n, ok := stateValid(v)
		if !ok {
			t.Fatalf("value %x: the guard left a malformed value %x", value, v)
		}
		off := headerSize
		for i := 0; i < n; i++ {
			m, _ := memberAt(v, off)
			if m.id == g.id && m.inflight != 0 {
				t.Fatalf("value %x: own entry holds %d slots after release", value, m.inflight)
			}
			off += m.size
		}
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
