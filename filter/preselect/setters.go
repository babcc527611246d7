package preselect

import (
	"slices"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types/variables"
)

// Settings that change nothing.
//
// The CRS starts the sums of its anomaly scores over in every transaction,
// in SecActions that set TX values to a constant:
//
//	SecAction "id:949059,phase:2,pass,t:none,nolog,...,setvar:'tx.blocking_inbound_anomaly_score=0'"
//
// Four of them run in each transaction (949059 and 949159 on the inbound
// scores, 959059 and 959159 on the outbound ones), and in most
// transactions the value already is 0: nothing before them added to it.
// Evaluating one costs about what an addition of 0 costs (noop.go): the
// match data, MATCHED_VARS, the setvar, the matched rule.
//
// A SecAction has no operator to answer "no match", so the screen judges
// such a setter (a SecAction with pass and nolog whose other actions are
// metadata, and whose setvars each set a distinct plain TX key to a
// literal without macro, sign or deletion) from its keys, like a rule on
// TX: where the values it writes are final for the screen (no rule of the
// phase before it may write them), it is dropped when every key already
// holds exactly its value, once, and kept otherwise. Dropped, it leaves TX
// as it was: Coraza's setvar lower-cases the key and replaces the values
// with its one value (actions/setvar.go), and every TX key Coraza writes
// is lower case (setvar, captures, @rbl), so the key's stored spelling is
// the same too. Not evaluated, the rule is not among the matched rules
// and MATCHED_VAR is the previous matching rule's: the differences of an
// addition of 0, so a setter is judged only in a rule set with a prelude
// (no rule reads MATCHED_VAR before it matches); without one it is kept.

// setterOf returns the keys (lower case) and the values a setter (see
// above) writes; ok is false for any other rule.
func setterOf(r observed) (keys, values []string, ok bool) {
	p := r.parsed
	if !p.secAction || r.id == 0 || !hasAction(p.actions, "nolog") || !hasAction(p.actions, "pass") {
		return nil, nil, false
	}
	for _, a := range p.actions {
		if !preludeActions[a.name] {
			return nil, nil, false
		}
		if a.name != "setvar" {
			continue
		}
		k, v, ok := literalSetvar(a.value)
		if !ok {
			return nil, nil, false
		}
		if slices.Contains(keys, k) {
			return nil, nil, false
		}
		keys, values = append(keys, k), append(values, v)
	}
	return keys, values, len(keys) != 0
}

// literalSetvar reads a setvar that sets a plain TX key to a literal:
// "tx.key=value", value without a macro and not starting with + or -
// (Coraza's arithmetic), not empty (Coraza writes an empty value its own
// way). key is in lower case.
func literalSetvar(s string) (key, value string, ok bool) {
	k, value, found := strings.Cut(strings.Trim(s, `'"`), "=")
	key, tx := cutFold(k, "tx.")
	if !found || !tx || !plainKey(key) || value == "" ||
		value[0] == '+' || value[0] == '-' || strings.Contains(value, "%{") {
		return "", "", false
	}
	return strings.ToLower(key), value, true
}

// setterSrule makes the srule of a setter, judged on its own from its keys
// (sets holds the values, in the order of targets).
func setterSrule(r observed, pos int, keys, values []string) *srule {
	sr := &srule{id: r.id, seg: r.seg, pos: pos, txKeys: keys, sets: values}
	for _, k := range keys {
		sr.targets = append(sr.targets, starget{v: variables.TX, key: k, vi: -1})
	}
	return sr
}

// setsAnything reports whether the setter r would change TX in tx: some
// key does not hold exactly its value, once.
func (st *txState) setsAnything(r *srule, tx plugintypes.TransactionState) bool {
	for i, t := range r.targets {
		vals := st.txValuesOf(t.key, tx)
		if len(vals) != 1 || vals[0] != r.sets[i] {
			return true
		}
	}
	return false
}
