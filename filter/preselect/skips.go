package preselect

import (
	"strings"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"

	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/filter/transform"
)

// Skips the screen reads.
//
// Coraza counts a skip:N over the rules still in the transaction, so the
// screen never removes a rule a skip may land on (see "What is never
// removed" in docs/preselection.md): in the CRS, 920539's skip:1 over
// 920540, which Coraza then evaluates on every value of the request line,
// the headers and the arguments (about 5% of a benign GET natively).
//
//	SecRule REQBODY_PROCESSOR "@streq JSON" "id:920539,phase:2,pass,t:none,nolog,...,skip:1"
//
// A skip that does not happen moves nothing: when the rule with the skip
// does not match, the rules of its window are judged as any other. So the
// screen reads a skipping rule's decision when it can, at the start of
// each of its phase's screens: a SecRule with one target, a whole
// collection that does not change during the phase, with an operator and
// transformations of this project's and no macro. The stable collections
// qualify, and REQBODY_PROCESSOR in a phase no rule of which may change it
// (ctl:requestBodyProcessor, in any rule of the phase or its chains: the
// body processor is chosen before phase 2 begins). A rule of a window is
// screened when every rule whose skip may land on it can be read; it is
// removed only when none of them matches.

// skipper is a rule with skip:N whose decision the screen reads.
type skipper struct {
	v    variables.RuleVariable
	rule srule // judge, chain, negated and multi
}

// skipperOf returns r as a skipper, or nil when the screen cannot read its
// decision. bodyCtl: some rule of r's phase may change REQBODY_PROCESSOR.
func skipperOf(r observed, facts directiveFacts, bodyCtl bool) *skipper {
	p := r.parsed
	if !p.secRule || r.id == 0 || len(p.targets) != 1 || inRanges(r.id, facts.updated) || facts.defaultsTransform {
		return nil
	}
	t := p.targets[0]
	if t.count || t.exclusion || t.keyed || strings.Contains(p.opArgs, "%{") {
		return nil
	}
	v, ok := stableTargets[t.name]
	if !ok {
		if t.name != "REQBODY_PROCESSOR" || bodyCtl {
			return nil
		}
		v = variables.ReqbodyProcessor
	}
	rule, ok := judgedAs(p)
	if !ok {
		return nil
	}
	return &skipper{v: v, rule: rule}
}

// judgedAs returns the decision of a rule written so, on one value, with
// its transformations (no targets, no plan index): the operator instance
// the rule set built and this project's transformations, no macro; ok is
// false when the screen cannot make it.
func judgedAs(p parsedRule) (srule, bool) {
	op, ok := fastpath.Instance(p.opName, p.opArgs)
	if !ok {
		return srule{}, false
	}
	judge, ok := fastpath.Judge(op)
	if !ok {
		return srule{}, false
	}
	r := srule{judge: judge, negated: p.negated}
	for _, a := range p.actions {
		switch a.name {
		case "t":
			if a.value == "none" {
				r.chain = r.chain[:0]
				continue
			}
			fn, ok := transform.Lookup(a.value)
			if !ok {
				return srule{}, false
			}
			r.chain = append(r.chain, fn)
		case "multimatch":
			r.multi = true
		}
	}
	return r, true
}

// matches reports whether the skipping rule matches, as Coraza will
// evaluate it on vals, the values of its collection.
func (sk *skipper) matches(vals []string) bool {
	for _, v := range vals {
		if sk.rule.matchesValue(sk.rule.judge, v) {
			return true
		}
	}
	return false
}

// bodyProcessorCtls returns the phases some rule of which, or of whose
// chains, has a ctl:requestBodyProcessor.
func bodyProcessorCtls(rules []observed, chains map[string]*ruleChain) map[types.RulePhase]bool {
	out := map[types.RulePhase]bool{}
	has := func(acts []action) bool {
		for _, a := range acts {
			if a.name == "ctl" && len(a.value) >= len("requestBodyProcessor") &&
				strings.EqualFold(a.value[:len("requestBodyProcessor")], "requestBodyProcessor") {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if has(r.parsed.actions) {
			out[r.phase] = true
			continue
		}
		c := chains[r.raw]
		if c == nil {
			continue
		}
		if c.any {
			// A chain this package could not read to its end.
			out[r.phase] = true
			continue
		}
		for _, l := range c.links {
			// Most chained rules have no such ctl: parsed only when
			// their text names it.
			if containsFold(l, "requestBodyProcessor") && has(parseRule(l).actions) {
				out[r.phase] = true
			}
		}
	}
	return out
}

// readSkips reads the decision of each skipper of the plan for this
// screen: st.skips[i] is whether pp.skippers[i] matches.
func (st *txState) readSkips(pp *phasePlan, tx plugintypes.TransactionState) {
	st.skips = resize(st.skips, len(pp.skippers))
	for i, sk := range pp.skippers {
		st.skips[i] = sk.matches(st.read(tx, sk.v, ""))
	}
}

// skipsOver reports whether some rule whose skip may land on r matches in
// this transaction (read by readSkips).
func (st *txState) skipsOver(r *srule) bool {
	for _, i := range r.windows {
		if st.skips[i] {
			return true
		}
	}
	return false
}

// containsFold reports whether s holds sub in any case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
