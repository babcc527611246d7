package preselect

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types/variables"
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

// quietEffects returns the actions named effect of r, a SecRule with an
// ID, pass and nolog, whose other actions are metadata: those of
// preludeActions but setvar (no logging, severity, capture, chain, flow or
// disruptive action but pass). ok is false for any other rule.
func quietEffects(r observed, effect string) (effects []action, ok bool) {
	p := r.parsed
	if !p.secRule || r.id == 0 || !hasAction(p.actions, "nolog") || !hasAction(p.actions, "pass") {
		return nil, false
	}
	for _, a := range p.actions {
		switch {
		case a.name == effect:
			effects = append(effects, a)
		case a.name == "setvar" || !preludeActions[a.name]:
			return nil, false
		}
	}
	return effects, true
}

// additionsOf returns the additions of r, a rule on one TX key with
// nothing but additions of TX values for effects; nil for any other rule.
func additionsOf(r observed, facts directiveFacts) []addition {
	p := r.parsed
	if len(p.targets) != 1 || inRanges(r.id, facts.updated) {
		return nil
	}
	if t := p.targets[0]; t.name != "TX" || t.count || t.exclusion || t.key == "" || !plainKey(t.key) {
		return nil
	}
	setvars, ok := quietEffects(r, "setvar")
	if !ok {
		return nil
	}
	var adds []addition
	for _, a := range setvars {
		add, ok := parseAddition(a.value)
		if !ok {
			return nil
		}
		adds = append(adds, add)
	}
	return adds
}

// addedKeys returns the TX keys the additions read.
func addedKeys(adds []addition) []string {
	var keys []string
	for _, a := range adds {
		keys = append(keys, a.key)
		if a.from != "" {
			keys = append(keys, a.from)
		}
	}
	return keys
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
	return addsZeroTo(adds, tx.Variables().TX().Get)
}

// addsZeroTo is addsZero on the TX values get returns.
func addsZeroTo(adds []addition, get func(key string) []string) bool {
	for _, a := range adds {
		n := a.literal
		if a.from != "" {
			v := get(a.from)
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
		cur := get(a.key)
		if len(cur) != 1 {
			return false
		}
		if c, err := strconv.Atoi(cur[0]); err != nil || strconv.Itoa(c) != cur[0] {
			return false
		}
	}
	return true
}

// Removals of targets by tag.
//
// The CRS's 941010 matches nearly every request (its REQUEST_FILENAME
// holds only the usual characters) and then runs
// ctl:ruleRemoveTargetByTag=xss-perf-disable;REQUEST_FILENAME, for which
// Coraza compares the tag with every tag of every rule of the WAF: about
// 50 us natively per request. The operator of a rule whose only effects
// are such ctl actions makes the removals itself, for the rules the
// builder found with the tag (in the compiled rule set, in its order),
// the way Coraza would at that very moment, and answers "no match": the
// rule is not among the matched rules (it has nolog), with the same
// differences as an addition of 0, and only in a rule set with a prelude.

// targetRemover is what the operator needs of Coraza's transaction
// (corazawaf.Transaction).
type targetRemover interface {
	RemoveRuleTargetByID(id int, variable variables.RuleVariable, key string, keyRx *regexp.Regexp)
}

// targetRemoval is one ctl:ruleRemoveTargetByTag: the tag and the rules
// with it, the variable and its key (lower case; none for the whole
// collection).
type targetRemoval struct {
	tag      string
	ids      []int
	variable variables.RuleVariable
	key      string
}

// taggedRules returns the IDs of the WAF's rules by tag, in the compiled
// rule set's order (what Coraza's ctl loops over); nil when a rule's tags
// may have changed after the observer saw them, or a configuration-time
// removal was not understood.
func taggedRules(rules []observed, facts directiveFacts, rulesInWAF int) map[string][]int {
	if len(facts.updated) != 0 || facts.updateAll {
		return nil
	}
	tagged := map[string][]int{}
	kept := 0
	for _, r := range rules {
		if removedAtConfig(r, facts) {
			continue
		}
		kept++
		for _, tag := range r.tags {
			if ids := tagged[tag]; len(ids) == 0 || ids[len(ids)-1] != r.id {
				tagged[tag] = append(ids, r.id)
			}
		}
	}
	if kept != rulesInWAF {
		return nil
	}
	return tagged
}

// targetRemovalsOf returns the removals of r, a rule whose only effects
// are ctl:ruleRemoveTargetByTag actions on a plain key or a whole
// collection, with their tags and without the rules (withRules adds
// them); nil for any other rule.
func targetRemovalsOf(r observed) []targetRemoval {
	ctls, ok := quietEffects(r, "ctl")
	if !ok {
		return nil
	}
	var out []targetRemoval
	for _, a := range ctls {
		// As Coraza's parseCtl reads it: the option's name is case
		// sensitive, the tag is taken as written.
		option, v, ok := strings.Cut(a.value, "=")
		if !ok || option != "ruleRemoveTargetByTag" {
			return nil
		}
		tag, col, ok := strings.Cut(v, ";")
		if !ok {
			return nil
		}
		name, key, _ := strings.Cut(col, ":")
		key = strings.TrimSpace(key)
		if key != "" && !plainKey(key) {
			return nil
		}
		variable, err := variables.Parse(strings.TrimSpace(name))
		if err != nil {
			return nil
		}
		out = append(out, targetRemoval{tag: tag, variable: variable, key: strings.ToLower(key)})
	}
	return out
}

// withRules fills in the rules of each removal from tagged
// (taggedRules); it returns nil when tagged is.
func withRules(ctls []targetRemoval, tagged map[string][]int) []targetRemoval {
	if tagged == nil {
		return nil
	}
	for i := range ctls {
		ctls[i].ids = tagged[ctls[i].tag]
	}
	return ctls
}

// removeTargets makes the removals, as Coraza's ctl does.
func removeTargets(ctls []targetRemoval, rm targetRemover) {
	for _, c := range ctls {
		for _, id := range c.ids {
			rm.RemoveRuleTargetByID(id, c.variable, c.key, nil)
		}
	}
}
