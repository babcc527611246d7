package preselect

import (
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// Additions of zero.
//
// The CRS sums its anomaly scores in rules that match in every
// transaction and only add one TX value to another:
//
//	SecRule TX:BLOCKING_PARANOIA_LEVEL "@ge 1" "id:949052,phase:1,pass,t:none,nolog,...,\
//	    setvar:'tx.blocking_inbound_anomaly_score=+%{tx.inbound_anomaly_score_pl1}'"
//
// Eight of them run in each transaction (949052, 949152, 949060, 949160 on
// the inbound scores, 959052, 959152, 959060, 959160 on the outbound ones),
// and in most transactions what they add is 0. Matching then costs about
// twelve allocations (the match data, MATCHED_VARS, the expansion of the
// value, the setvar, the matched rule) and changes nothing a rule, a log or
// a verdict reads: TX stays as it was, the rule logs nothing.
//
// So the operator of such a rule (its trigger) answers "no match" when
// every setvar of the rule adds or subtracts 0 from a TX value that holds
// one integer, written as Go writes it (what Coraza would write back). The
// rule is then not among the transaction's matched rules, and MATCHED_VAR
// is the previous matching rule's: the same differences as the prelude's
// rules, and only in a rule set with a prelude, which guarantees that no
// rule reads MATCHED_VAR before it matches.

// addition is one setvar of such a rule: TX key += (or -=) a literal or
// the first value of TX key from.
type addition struct {
	key, from string
	literal   int
}

// zeroActions are the actions a rule whose additions may be skipped may
// have: no logging, severity, capture, chain, flow or disruptive action
// but pass.
var zeroActions = map[string]bool{
	"id": true, "phase": true, "pass": true, "nolog": true, "noauditlog": true, "t": true,
	"tag": true, "ver": true, "rev": true, "msg": true, "logdata": true, "maturity": true,
	"accuracy": true, "setvar": true,
}

// additionsOf returns the additions of r, a rule on one TX key with
// nothing but additions of TX values for effects; nil for any other rule.
func additionsOf(r observed, facts directiveFacts) []addition {
	p := r.parsed
	if !p.secRule || r.id == 0 || len(p.targets) != 1 || inRanges(r.id, facts.updated) {
		return nil
	}
	if t := p.targets[0]; t.name != "TX" || t.count || t.exclusion || t.key == "" || !plainKey(t.key) {
		return nil
	}
	if !hasAction(p.actions, "nolog") || !hasAction(p.actions, "pass") {
		return nil
	}
	var adds []addition
	for _, a := range p.actions {
		if !zeroActions[a.name] {
			return nil
		}
		if a.name != "setvar" {
			continue
		}
		add, ok := parseAddition(a.value)
		if !ok {
			return nil
		}
		adds = append(adds, add)
	}
	return adds
}

// parseAddition reads "tx.key=+%{tx.from}", "tx.key=-N" and the like.
func parseAddition(v string) (addition, bool) {
	k, val, ok := strings.Cut(v, "=")
	if !ok || len(val) < 2 || (val[0] != '+' && val[0] != '-') {
		return addition{}, false
	}
	key, ok := cutFold(k, "tx.")
	if !ok || !plainKey(key) {
		return addition{}, false
	}
	add := addition{key: strings.ToLower(key)}
	if n, err := strconv.Atoi(val[1:]); err == nil {
		add.literal = n
		return add, true
	}
	from, ok := cutFold(val[1:], "%{tx.")
	if !ok || !strings.HasSuffix(from, "}") || !plainKey(from[:len(from)-1]) {
		return addition{}, false
	}
	add.from = strings.ToLower(from[:len(from)-1])
	return add, true
}

// cutFold is strings.CutPrefix with the prefix matched in any case.
func cutFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// addsZero reports whether every addition adds 0 to a TX value that
// holds one integer in Go's form: setvar would write back what is there.
func addsZero(adds []addition, tx plugintypes.TransactionState) bool {
	col := tx.Variables().TX()
	for _, a := range adds {
		n := a.literal
		if a.from != "" {
			v := col.Get(a.from)
			if len(v) == 0 {
				return false
			}
			var err error
			if n, err = strconv.Atoi(v[0]); err != nil {
				return false
			}
		}
		if n != 0 {
			return false
		}
		cur := col.Get(a.key)
		if len(cur) != 1 {
			return false
		}
		if c, err := strconv.Atoi(cur[0]); err != nil || strconv.Itoa(c) != cur[0] {
			return false
		}
	}
	return true
}
