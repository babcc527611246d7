package preselect

import (
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/wafguard/wafguard/filter/fastpath"
)

// Chained rules judged on their links.
//
// The screen judges a chain starter on its own operator: one that matches
// a value is kept. For a GET the CRS's 920170, 920171 and 920180 match on
// their starter (REQUEST_METHOD "@rx ^(?:GET|HEAD)$", REQUEST_PROTOCOL
// "!@within HTTP/2 ...") and fail on a chained rule that reads a header
// or the method (REQUEST_HEADERS:Content-Length "!@rx ^0?$",
// &REQUEST_HEADERS:Transfer-Encoding "!@eq 0", REQUEST_METHOD "@streq
// POST"), so Coraza handled a match and evaluated a chained rule for
// each, about 30 allocations per GET.
//
// A chained rule matches only when every rule of its chain does, in
// order, each on some value; a chained rule's actions run when it matches,
// and the starter's own, when it has nothing but metadata, logging,
// disruptive and flow actions, run only when the whole chain does. So
// when some chained rule can match no value, and none before it has an
// action that runs on its own match, the rule matches nothing and does
// nothing but what a starter's match leaves: MATCHED_VAR, as after an
// addition of 0 (noop.go), so this holds only in a rule set with a
// prelude. The screen reads the chained rules of such a rule (each on
// collections that do not change during the phase, whole, by plain key or
// counted, with an operator and transformations of this project's and no
// macro) and removes the rule when one of them can match no value.

// linkActions are the actions of a starter whose rule's chained rules the
// screen reads: none runs unless the whole chain matches (recordActions,
// the chain and the flow actions).
var linkActions = func() map[string]bool {
	m := map[string]bool{"chain": true, "skip": true, "skipafter": true}
	for a := range recordActions {
		m[a] = true
	}
	return m
}()

// quietLinkActions are the actions of a chained rule that do nothing when
// it matches.
var quietLinkActions = map[string]bool{
	"t": true, "chain": true, "msg": true, "logdata": true, "tag": true, "ver": true, "rev": true,
	"severity": true, "maturity": true, "accuracy": true,
}

// link is one chained rule the screen reads: as an srule judged on its
// own targets (no plan index), and whether its actions do anything.
type link struct {
	rule  srule
	quiet bool
}

// linksOf returns the chained rules of r, a starter the screen judges, as
// links; nil when the screen cannot read them all, or r's own actions run
// on its own match.
func linksOf(r observed, texts []string, facts directiveFacts) []link {
	if len(texts) == 0 || facts.defaultsTransform || facts.defaultsOther || facts.targetsUpdateAll ||
		inRanges(r.id, facts.updated) || inRanges(r.id, facts.targetsUpdated) {
		return nil
	}
	for _, a := range r.parsed.actions {
		if !linkActions[a.name] {
			return nil
		}
	}
	var out []link
	for _, text := range texts {
		p := parseRule(text)
		if !p.secRule || len(p.targets) == 0 || !fastpath.Owns(p.opName) {
			return nil
		}
		rule, ok := judgedAs(p)
		if !ok {
			return nil
		}
		l := link{rule: rule, quiet: true}
		for _, t := range p.targets {
			v, ok := stableTargets[t.name]
			switch {
			case !ok || t.exclusion || (t.keyed && t.key == ""):
				return nil
			case t.count && facts.runtimeTargets.mayChangeCount(r, t.name):
				return nil
			}
			l.rule.targets = append(l.rule.targets, starget{v: v, key: lookupKey(v, t.key), count: t.count, vi: -1})
		}
		for _, a := range p.actions {
			if !quietLinkActions[a.name] {
				l.quiet = false
			}
		}
		out = append(out, l)
	}
	return out
}

// chainFails reports whether r's chain cannot match in tx: a chained rule
// that can match no value, with none before it that does anything when it
// matches.
func (st *txState) chainFails(r *srule, tx plugintypes.TransactionState) bool {
	for i := range r.links {
		l := &r.links[i]
		if !st.linkMatches(l, tx) {
			return true
		}
		if !l.quiet {
			return false
		}
	}
	return false
}

// linkMatches reports whether chained rule l matches some value of its
// targets in tx, as Coraza evaluates it.
func (st *txState) linkMatches(l *link, tx plugintypes.TransactionState) bool {
	for _, t := range l.rule.targets {
		if l.rule.matchesTarget(l.rule.judge, t, st.read(tx, t.v, t.key)) {
			return true
		}
	}
	return false
}

// findLinks gives each chained rule of the plans that the screen may
// remove its links (linksOf).
func (ix *Index) findLinks(rules []observed, chains map[string]*ruleChain, facts directiveFacts) {
	for p := types.PhaseRequestHeaders; p <= types.PhaseResponseBody; p++ {
		pp := ix.plans[p]
		if pp == nil {
			continue
		}
		for _, sr := range pp.rules {
			r := rules[sr.pos]
			c := chains[r.raw]
			if sr.rec != nil || c == nil || c.shared || c.any || !hasAction(r.parsed.actions, "chain") {
				continue
			}
			sr.links = linksOf(r, c.links, facts)
		}
	}
}
