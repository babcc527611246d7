package filter

import (
	"strconv"
	"strings"
	"sync"

	"github.com/corazawaf/coraza/v3/types"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
)

// maxLogMessage is where Coraza's error-log line cuts a message or a
// logdata value (in bytes).
const maxLogMessage = 280

// warningPrefix opens the line of a match that did not disrupt the
// transaction.
const warningPrefix = "Coraza: Warning. "

// errorLog writes every rule match that asks to be logged to the proxy log,
// in ModSecurity's error-log shape: [client ...] Coraza: ... [file ...]
// [line ...] [id "N"] [rev ...] [msg ...] [data ...] [severity ...] ...
// [uri ...] [unique_id ...]. Every match goes out at warn level, whatever
// the rule's severity, so that one log level shows all of them (go-ftw greps
// the proxy log for [id "N"]).
//
// The line is byte for byte that of Coraza's MatchedRule.ErrorLog, built
// without fmt and with the parts that only depend on the rule made once.
// An attack matches about ten rules, each line quoting ten to twenty
// fields; on V8 fmt's formatting of them was a tenth of a blocked GET.
//
// Coraza's public types do not give the disruptive action that the line
// of a disruptive match names ("Coraza: Access denied (phase 2). "): the
// first disruptive match of a rule asks Coraza for its line and keeps that
// phrase. The first match of every rule, of either kind, is checked
// against Coraza's own line; a rule whose line differs keeps Coraza's
// (fallback), so a difference can cost time but never change a line.
//
// One errorLog serves the WAFs of one compiled configuration. A VM runs
// one callback at a time; natively, transactions of one WAF may run at
// once, and take turns here.
type errorLog struct {
	mu    sync.Mutex
	rules map[types.RuleMetadata]*ruleLine
	buf   []byte
	// write sends a line out: writeMatchLine unless a test looks.
	write func(string)
}

// writeMatchLine is where every errorLog of compileWAF's WAFs sends its
// lines: the proxy log at warn level. Natively the host is the SDK's test
// emulator, which keeps every line it is given, and every line carries the
// request's URI: tests that run many large requests through these WAFs,
// and read their matches from Coraza instead, set it to drop the lines
// (discardMatchLines).
var writeMatchLine = proxywasm.LogWarn

// ruleLine holds the parts of a rule's line that do not change between
// its matches.
type ruleLine struct {
	// head is `[file "…"] [line "…"] [id "…"] [rev "…"]`.
	head []byte
	// tail is ` [severity "…"] [ver "…"] [maturity "…"] [accuracy "…"]`
	// and one ` [tag "…"]` per tag.
	tail []byte
	// disrupted is the phrase of a disruptive match, learned from Coraza's
	// line; "" until then.
	disrupted string
	// checked is set once a non-disruptive line matched Coraza's.
	checked bool
	// fallback is set when a line of this rule differed from Coraza's:
	// its lines are then Coraza's own.
	fallback bool
}

func newErrorLog() *errorLog {
	return &errorLog{rules: map[types.RuleMetadata]*ruleLine{}, write: func(line string) { writeMatchLine(line) }}
}

// log is the WAF's error callback.
func (l *errorLog) log(mr types.MatchedRule) {
	l.mu.Lock()
	line := l.line(mr)
	l.mu.Unlock()
	l.write(line)
}

// line returns mr's error-log line.
func (l *errorLog) line(mr types.MatchedRule) string {
	mds := mr.MatchedDatas()
	if len(mds) == 0 {
		// Coraza's ErrorLog would index an empty slice; no rule match
		// reaches the callback without data, but let Coraza decide.
		return mr.ErrorLog()
	}
	rule := mr.Rule()
	rl := l.rules[rule]
	if rl == nil {
		rl = newRuleLine(rule)
		l.rules[rule] = rl
	}
	switch {
	case rl.fallback:
		return mr.ErrorLog()
	case mr.Disruptive() && rl.disrupted == "":
		return l.learn(mr, rl)
	case !mr.Disruptive() && !rl.checked:
		want := mr.ErrorLog()
		if got := l.format(mr, rl, warningPrefix); got != want {
			rl.fallback = true
			return want
		}
		rl.checked = true
		return want
	}
	prefix := warningPrefix
	if mr.Disruptive() {
		prefix = rl.disrupted
	}
	return l.format(mr, rl, prefix)
}

// learn takes the phrase of a disruptive match from Coraza's own line: the
// text between the client and the message. It returns Coraza's line.
func (l *errorLog) learn(mr types.MatchedRule, rl *ruleLine) string {
	want := mr.ErrorLog()
	l.buf = appendClient(l.buf[:0], mr)
	client := len(l.buf)
	l.buf = appendBody(l.buf, mr, rl)
	body := l.buf[client:]
	cut := len(want) - len(body)
	if cut > client && want[:client] == string(l.buf[:client]) && want[cut:] == string(body) {
		// Coraza's phrases are short and hold no field: "Coraza: Access
		// denied (phase 2). ", "Coraza: Custom disruptive action
		// triggered (phase 1). ".
		if phrase := want[client:cut]; len(phrase) <= 80 && strings.HasPrefix(phrase, "Coraza: ") && strings.HasSuffix(phrase, ". ") && !strings.ContainsAny(phrase, "[]\"") {
			rl.disrupted = phrase
			return want
		}
	}
	rl.fallback = true
	return want
}

// format builds mr's line with prefix as the phrase after the client.
func (l *errorLog) format(mr types.MatchedRule, rl *ruleLine, prefix string) string {
	l.buf = appendClient(l.buf[:0], mr)
	l.buf = append(l.buf, prefix...)
	l.buf = appendBody(l.buf, mr, rl)
	return string(l.buf)
}

func appendClient(b []byte, mr types.MatchedRule) []byte {
	b = append(b, "[client "...)
	b = strconv.AppendQuote(b, mr.ClientIPAddress())
	return append(b, "] "...)
}

// appendBody appends what follows the phrase: the message, the details of
// the first match and the extra matches of a chain, as Coraza writes them.
func appendBody(b []byte, mr types.MatchedRule, rl *ruleLine) []byte {
	mds := mr.MatchedDatas()
	first := mds[0]
	msg := first.Message()
	for _, md := range mds {
		// The first message set along the chain is the line's message.
		if m := md.Message(); m != "" {
			msg = m
			break
		}
	}
	b = append(b, cut(msg)...)
	b = append(b, ' ')
	b = append(b, rl.head...)
	b = appendField(b, " [msg ", cut(first.Message()))
	b = appendField(b, " [data ", cut(first.Data()))
	b = append(b, rl.tail...)
	b = appendField(b, " [hostname ", mr.ServerIPAddress())
	b = appendField(b, " [uri ", mr.URI())
	b = appendField(b, " [unique_id ", mr.TransactionID())
	for n, md := range mds[1:] {
		m, d := md.Message(), md.Data()
		if m == "" && d == "" {
			continue
		}
		b = append(b, "[msg_match_"...)
		b = strconv.AppendInt(b, int64(n+1), 10)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, cut(m))
		b = append(b, "] [data_match_"...)
		b = strconv.AppendInt(b, int64(n+1), 10)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, cut(d))
		b = append(b, ']')
	}
	return b
}

func newRuleLine(r types.RuleMetadata) *ruleLine {
	var h []byte
	h = appendField(h, "[file ", r.File())
	h = appendField(h, " [line ", strconv.Itoa(r.Line()))
	h = appendField(h, " [id ", strconv.Itoa(r.ID()))
	h = appendField(h, " [rev ", r.Revision())
	var t []byte
	t = appendField(t, " [severity ", r.Severity().String())
	t = appendField(t, " [ver ", r.Version())
	t = appendField(t, " [maturity ", strconv.Itoa(r.Maturity()))
	t = appendField(t, " [accuracy ", strconv.Itoa(r.Accuracy()))
	for _, tag := range r.Tags() {
		t = appendField(t, " [tag ", tag)
	}
	return &ruleLine{head: h, tail: t}
}

// appendField appends open, v quoted as Go quotes it (fmt's %q), and "]".
func appendField(b []byte, open, v string) []byte {
	b = append(b, open...)
	b = strconv.AppendQuote(b, v)
	return append(b, ']')
}

// cut shortens s to the bytes Coraza keeps of a message or logdata value.
func cut(s string) string {
	if len(s) > maxLogMessage {
		return s[:maxLogMessage]
	}
	return s
}
