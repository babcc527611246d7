package filter

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/debuglog"
)

// debugLogRules has a chain (Coraza makes a logger for its link with
// With), a rule that raises the transaction's level with ctl, and one that
// logs at warning level (a macro of a variable that does not exist).
const debugLogRules = `
SecRuleEngine On
SecRule ARGS:a "@rx x" "id:1,phase:1,pass,log,chain"
  SecRule ARGS:b "@rx y" "setvar:tx.chained=1"
SecRule ARGS:raise "@rx ." "id:2,phase:1,pass,nolog,ctl:debugLogLevel=9"
SecRule ARGS:a "@rx x" "id:3,phase:1,pass,log,chain"
  SecRule ARGS:b "@rx y" "setvar:tx.again=1"
`

// debugLogOf runs one transaction with root as the WAF's debug logger
// (writing to out) and returns what was written, without the times.
func debugLogOf(t *testing.T, root debuglog.Logger, level, query string) string {
	t.Helper()
	var out bytes.Buffer
	waf, err := coraza.NewWAF(coraza.NewWAFConfig().
		WithDebugLogger(root.WithOutput(&out)).
		WithDirectives(debugLogRules + "\nSecDebugLogLevel " + level))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset() // what the compile wrote
	tx := waf.NewTransactionWithID("tx1")
	tx.ProcessURI("/?"+query, "GET", "HTTP/1.1")
	tx.ProcessRequestHeaders()
	if err := tx.Close(); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `).ReplaceAllString(out.String(), "")
}

func TestDebugLogger_sameOutput(t *testing.T) {
	for _, c := range []struct {
		name, level, query string
		// want is a line the log must have, so that an empty log on
		// both sides cannot pass.
		want string
	}{
		{"off", "0", "a=x&b=y", ""},
		{"off, raised by ctl", "0", "a=x&b=y&raise=1", `[DEBUG] Evaluating rule tx_id="tx1" rule_id=3 chain_rule_ref=`},
		{"errors only", "1", "a=x&b=y", ""},
		{"debug", "4", "a=x&b=y", `[DEBUG] Evaluating rule tx_id="tx1" rule_id=1 chain_rule_ref=`},
		{"trace", "9", "a=x&b=z", `tx_id="tx1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := debugLogOf(t, debuglog.Noop(), c.level, c.query)
			got := debugLogOf(t, newDebugLogger(), c.level, c.query)
			if got != want {
				t.Errorf("log differs from Coraza's logger.\ngot:\n%s\nwant:\n%s", got, want)
			}
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("log has no %q:\n%s", c.want, got)
			}
			if c.want == "" && got != "" {
				t.Errorf("log at level %s: got\n%s\nwant nothing", c.level, got)
			}
		})
	}
}

// TestDebugLogger_silentWith pins what the logger is for: With on a
// logger that logs nothing makes one allocation (Coraza's own makes four).
func TestDebugLogger_silentWith(t *testing.T) {
	root := newDebugLogger()
	tx := root.With(debuglog.Str("tx_id", "tx1"))
	field := debuglog.Int("chain_rule_id", 7)
	allocs := testing.AllocsPerRun(100, func() {
		tx.With(field)
	})
	if allocs > 2 {
		t.Errorf("With on a silent logger: %v allocations, want at most 2 (the varargs and the logger)", allocs)
	}
}

// TestDebugLogger_silentEvents: a silent logger's events log nothing at
// any level, and a logger raised from it by WithLevel logs again.
func TestDebugLogger_silentEvents(t *testing.T) {
	var out bytes.Buffer
	silent := newDebugLogger().WithOutput(&out).With(debuglog.Str("tx_id", "tx1"))
	for name, e := range map[string]debuglog.Event{
		"trace": silent.Trace(), "debug": silent.Debug(), "info": silent.Info(),
		"warn": silent.Warn(), "error": silent.Error(),
	} {
		if e.IsEnabled() {
			t.Errorf("%s event of a silent logger is enabled", name)
		}
		e.Str("k", "v").Msg("nothing")
	}
	if out.Len() != 0 {
		t.Errorf("a silent logger wrote %q", out.String())
	}
	raised := silent.WithLevel(debuglog.LevelDebug)
	if !raised.Debug().IsEnabled() || raised.Trace().IsEnabled() {
		t.Errorf("raised to debug: debug enabled %v, trace enabled %v; want true, false", raised.Debug().IsEnabled(), raised.Trace().IsEnabled())
	}
	raised.Debug().Msg("now")
	if !strings.Contains(out.String(), `now tx_id="tx1"`) {
		t.Errorf("raised logger wrote %q, want the message with the pending field", out.String())
	}
}
