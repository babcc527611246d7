package preselect

import (
	"strings"
	"unsafe"

	"github.com/wafguard/wafguard/internal/scratch"
)

// The screen may judge a rule that reads TX variables (the CRS's
// paranoia-level gates and anomaly-score sums, its initialisation
// defaults) when the values it reads cannot change between the screen and
// the rule: no rule that Coraza may evaluate in between writes them. This
// file finds, for each top-level rule, which TX variables it and its
// chained rules may write.
//
// TX is written by setvar (key lower-cased, macros expanded:
// internal/actions/setvar.go), by captures (TX.0-9: corazawaf.Transaction.CaptureField)
// and by the @rbl operator (TX.httpbl_msg: internal/operators/rbl.go).
// Nothing else in Coraza v3.8.1 writes it, and the plugin registers no
// action of its own.

// txWrites is what one rule, with its chain, may write in TX.
type txWrites struct {
	keys     []string // exact keys, lower case
	prefixes []string // keys that start with these (a key with a macro)
	any      bool     // anything
}

func (w *txWrites) add(o txWrites) {
	w.keys = append(w.keys, o.keys...)
	w.prefixes = append(w.prefixes, o.prefixes...)
	w.any = w.any || o.any
}

// touches reports whether w may write the key (lower case).
func (w *txWrites) touches(key string) bool {
	if w.any {
		return true
	}
	for _, k := range w.keys {
		if k == key {
			return true
		}
	}
	for _, p := range w.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// knownActions are Coraza v3.8.1's actions (internal/actions/actions.go).
// Of them only setvar and capture write TX. A rule with any other action
// name uses one registered by a plugin, which might.
var knownActions = map[string]bool{
	"accuracy": true, "allow": true, "auditlog": true, "block": true, "capture": true, "chain": true,
	"ctl": true, "deny": true, "drop": true, "exec": true, "expirevar": true, "id": true, "initcol": true,
	"log": true, "logdata": true, "maturity": true, "msg": true, "multimatch": true, "noauditlog": true,
	"nolog": true, "pass": true, "phase": true, "redirect": true, "rev": true, "setenv": true,
	"setvar": true, "severity": true, "skip": true, "skipafter": true, "status": true, "t": true,
	"tag": true, "ver": true,
}

// captureKeys are the TX keys a capture writes.
var captureKeys = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// writesOf returns what one rule (a SecRule or a SecAction, without its
// chain) may write in TX. Text this package cannot read may write
// anything.
func writesOf(p parsedRule) txWrites {
	var w txWrites
	switch {
	case p.secRule && p.opName == "rbl":
		w.keys = append(w.keys, "httpbl_msg")
	case !p.secRule && !p.secAction:
		return txWrites{any: true}
	}
	w.add(actionWrites(p.actions))
	return w
}

// actionWrites is what an action list may write in TX.
func actionWrites(acts []action) txWrites {
	var w txWrites
	for _, a := range acts {
		switch {
		case a.name == "capture":
			w.keys = append(w.keys, captureKeys...)
		case a.name == "setvar":
			v := strings.TrimPrefix(a.value, "!")
			key, _, _ := strings.Cut(v, "=")
			col, k, ok := strings.Cut(key, ".")
			if !ok || !strings.EqualFold(col, "tx") {
				// Coraza refuses a setvar outside TX when it compiles
				// the rule; a text read otherwise is no rule.
				w.any = true
				continue
			}
			k = strings.ToLower(k)
			if i := strings.Index(k, "%{"); i >= 0 {
				if i == 0 {
					w.any = true
				} else {
					w.prefixes = append(w.prefixes, k[:i])
				}
				continue
			}
			w.keys = append(w.keys, k)
		case !knownActions[a.name]:
			w.any = true
		}
	}
	return w
}

// eachLine reads a directive text the way Coraza's SecLang parser does
// (internal/seclang/parser.go, parseString): each line trimmed, blank
// lines and comments skipped (even inside a continued directive), a line
// ending in a backslash joined with the next one without it, a block
// between backticks kept whole. It calls directive with each directive so
// joined, a string that is valid only during the call, until directive
// returns false; and free, when not nil, with the index of each blank or
// comment line outside a directive.
func eachLine(text string, directive func(string) bool, free func(line int)) {
	eachLineAt(text, func(d string, _, _ int) bool { return directive(d) }, free)
}

// eachLineAt is eachLine that also gives directive the indexes of the
// first and the last line of the directive.
func eachLineAt(text string, directive func(d string, first, last int) bool, free func(line int)) {
	var buf []byte
	eachLineIn(&buf, text, directive, free)
}

// eachLineIn is eachLineAt joining continued lines in *buf, which it
// keeps for the next call: a caller that reads many directives one at a
// time (a rule's text at a time) grows one buffer instead of one each.
func eachLineIn(bufp *[]byte, text string, directive func(d string, first, last int) bool, free func(line int)) {
	buf := scratch.Truncate(*bufp, 0)
	defer func() { *bufp = buf }()
	inBackticks := false
	first := -1
	for i := 0; text != ""; i++ {
		raw, rest, _ := strings.Cut(text, "\n")
		text = rest
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' {
			if free != nil && len(buf) == 0 && !inBackticks {
				free(i)
			}
			continue
		}
		if first < 0 {
			first = i
		}
		if !inBackticks && line[len(line)-1] == '`' {
			inBackticks = true
		} else if inBackticks && line[0] == '`' {
			inBackticks = false
		}
		if inBackticks {
			buf = append(append(buf, line...), '\n')
			continue
		}
		if line[len(line)-1] == '\\' {
			buf = append(buf, line[:len(line)-1]...)
			continue
		}
		d := line
		if len(buf) != 0 {
			buf = append(buf, line...)
			d = unsafe.String(unsafe.SliceData(buf), len(buf))
		}
		if !directive(d, first, i) {
			return
		}
		buf = scratch.Truncate(buf, 0)
		first = -1
	}
}

// ruleChain is what the rule texts say of one top-level rule text: what
// it and its chained rules may write in TX, and its chained rules' texts.
type ruleChain struct {
	txWrites
	links []string
	// shared: more than one top-level rule has this text (links then
	// holds the chained rules of all of them).
	shared bool
}

// chainWrites reads the rule texts and returns, by the raw text of each
// top-level rule (what the rule observer sees as RuleMetadata.Raw), what
// that rule and its chained rules may write in TX, and the texts of its
// chained rules. A chained rule follows its starter in the same text, as
// Coraza's parser requires. Two rules with the same text share one entry,
// the union of both. known holds rules read already, by their text (nil:
// none): a text found there is not parsed again.
func chainWrites(texts []string, known map[string]*parsedRule) map[string]*ruleChain {
	out := map[string]*ruleChain{}
	for _, text := range texts {
		var open *ruleChain // the chain being read, nil when none
		eachLine(text, func(line string) bool {
			dir, _, _ := strings.Cut(line, " ")
			isRule := strings.EqualFold(dir, "secrule") || strings.EqualFold(dir, "secaction")
			if strings.EqualFold(dir, "include") && open != nil {
				// The chain may go on in the included file, which
				// is read as its own text: what it writes is not
				// known here.
				open.any = true
			}
			if !isRule {
				return true
			}
			var p parsedRule
			if k := known[line]; k != nil {
				p = *k
			} else {
				// The keys it writes are cut from the text: not from
				// the line, which the next one overwrites.
				p = parseRule(strings.Clone(line))
			}
			w := writesOf(p)
			chained := hasAction(p.actions, "chain")
			if open != nil {
				// A rule that follows an open chain is appended to it
				// (a SecAction too).
				open.add(w)
				open.links = append(open.links, strings.Clone(line))
				if !chained {
					open = nil
				}
				return true
			}
			e := out[line]
			if e == nil {
				e = &ruleChain{}
				out[strings.Clone(line)] = e
			} else {
				e.shared = true
			}
			e.add(w)
			if chained {
				open = e
			}
			return true
		}, nil)
		if open != nil {
			open.any = true
		}
	}
	return out
}

// macroTXKeys returns the TX keys (lower case) the macros of s read, with
// ok false when a macro reads anything but a plain TX key, or cannot be
// read.
func macroTXKeys(s string) (keys []string, ok bool) {
	for {
		i := strings.Index(s, "%{")
		if i < 0 {
			return keys, true
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, false
		}
		ref := s[i+2 : i+j]
		col, k, found := strings.Cut(ref, ".")
		if !found || !strings.EqualFold(col, "tx") || !plainKey(k) {
			return nil, false
		}
		keys = append(keys, strings.ToLower(k))
		s = s[i+j+1:]
	}
}
