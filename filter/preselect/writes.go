package preselect

import (
	"strings"
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
