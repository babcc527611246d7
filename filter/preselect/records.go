package preselect

import (
	"strings"
	"sync"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
)

// Records.
//
// The CRS's 920450 records every request header name in TX and then
// checks the records against a list:
//
//	SecRule REQUEST_HEADERS_NAMES "@rx ^.*$" "id:920450,phase:1,block,capture,t:none,t:lowercase,...,\
//	    setvar:'tx.header_name_920450_%{tx.0}=/%{tx.0}/',chain"
//	    SecRule TX:/^header_name_920450_/ "@within %{tx.restricted_headers_basic}" "setvar:..."
//
// The starter matches every name, so Coraza handles a match for each one
// (the match data, MATCHED_VARS, the capture, the setvar's two macro
// expansions), then evaluates the chained rule on every record: about
// 190 allocations and a fifth of a benign GET natively, for a rule that
// matches only when a name is on the list.
//
// Such a rule is a record rule here: a SecRule on one whole collection the
// trie reads, with "@rx ^.*$", capture, and one setvar that writes
// tx.P%{tx.0}=A%{tx.0}B (literals around the capture); its one chained
// rule reads TX:/^P/ with "@within %{tx.X}" and has nothing but setvar for
// actions. The chain matches when some value v, transformed, gives a
// record A+v+B that the list holds, and the records it reads are this
// rule's alone when no other rule may write a TX key that starts with P.
// When the list is a constant of the rule set (X is a value of the
// prelude, written by no rule a transaction still evaluates), whether a
// value makes the chain match is a function of the value: the screen
// judges the rule in the trie on that function, and the memo remembers
// it.
//
// When no value does (every transaction without a restricted header),
// the screen keeps the rule but marks it recorded, and the rule's
// operator writes each record itself for the value Coraza hands it (the
// capture, then the key and value the setvar would write) and answers
// "no match". Coraza still walks the rule's values as it would, with any
// target exclusions, and the transaction ends with the same TX; the rule
// matches nothing either way, so no matched rule, log line or verdict
// changes. MATCHED_VAR is the previous matching rule's, as after an
// addition of 0 (noop.go), so this holds only in a rule set with a
// prelude. When some value does make the chain match, Coraza evaluates
// the rule as it is.

// record is a record rule of the rule set (see above).
type record struct {
	phase types.RulePhase
	idx   int // its srule's index in the phase plan
	// The setvar writes tx.<prefix><v>=<before><v><after>; prefix is in
	// lower case.
	prefix, before, after string
	// list is the TX key the chained @within expands; writers are the
	// rules, other than this one, that may write it.
	list    string
	writers []int
	// starts is the starter's operator's decision (Judge); on is set by
	// Snapshot when the list is a constant, holds the list's value.
	starts func(string) bool
	on     bool
	// made keeps, by value, the record write made for it: the names of
	// a client's headers repeat from request to request. At most maxMade
	// of them; a full map is emptied.
	madeMu sync.Mutex
	made   map[string]made
}

// made is the TX key of a value's record and the values to set it to
// (one: the record), which Set only reads.
type made struct {
	key  string
	vals []string
}

// maxMade is the most values a record rule keeps the records of: 64 KiB
// or so for the CRS's header names.
const maxMade = 512

// recordActions are the actions of a record rule's starter besides its
// one setvar, capture and chain: none runs unless the whole chain matches
// (disruptive and flow actions, logging) or does anything at all
// (metadata, t).
var recordActions = map[string]bool{
	"id": true, "phase": true, "block": true, "deny": true, "drop": true, "pass": true, "status": true,
	"log": true, "nolog": true, "auditlog": true, "noauditlog": true, "t": true,
	"msg": true, "logdata": true, "tag": true, "ver": true, "rev": true, "severity": true,
	"maturity": true, "accuracy": true,
}

// recordOf returns r as a record rule, reading its chained rules' texts
// (links); nil when it is not one. Whether other rules write its records
// or its list, and whether the list is constant, is checked by the caller
// and by Snapshot.
func recordOf(r observed, links []string, facts directiveFacts) *record {
	p := r.parsed
	if !p.secRule || r.id == 0 || p.negated || p.opName != "rx" || p.opArgs != "^.*$" || len(links) != 1 ||
		inRanges(r.id, facts.updated) || facts.defaultsTransform || facts.defaultsWrite || facts.defaultsOther {
		return nil
	}
	if len(p.targets) != 1 || p.targets[0].count || p.targets[0].keyed || p.targets[0].exclusion {
		return nil
	}
	rec := &record{phase: r.phase}
	setvars, capture, chain := 0, false, false
	for _, a := range p.actions {
		switch {
		case a.name == "setvar":
			setvars++
			var ok bool
			if rec.prefix, rec.before, rec.after, ok = parseRecordSetvar(a.value); !ok {
				return nil
			}
		case a.name == "capture":
			capture = true
		case a.name == "chain":
			chain = true
		case a.name == "multimatch" || !recordActions[a.name]:
			return nil
		}
	}
	if setvars != 1 || !capture || !chain {
		return nil
	}
	// The chained rule.
	vars, _, _, ok := splitSecRule(links[0])
	link := parseRule(links[0])
	if !ok || !link.secRule || link.negated || link.opName != "within" || !strings.EqualFold(vars, "TX:/^"+rec.prefix+"/") {
		return nil
	}
	key, ok := cutFold(link.opArgs, "%{tx.")
	if !ok || !strings.HasSuffix(key, "}") || !plainKey(key[:len(key)-1]) {
		return nil
	}
	rec.list = strings.ToLower(key[:len(key)-1])
	for _, a := range link.actions {
		if a.name != "setvar" && !(a.name == "t" && a.value == "none") {
			return nil
		}
	}
	w := actionWrites(link.actions)
	if w.mayWritePrefix(rec.prefix) || w.touches(rec.list) {
		return nil
	}
	return rec
}

// parseRecordSetvar reads "tx.P%{tx.0}=A%{tx.0}B": literal P (letters,
// digits, '_' and '-', any case), A (not empty, not starting with '+' or
// '-', which setvar would read as arithmetic) and B.
func parseRecordSetvar(v string) (prefix, before, after string, ok bool) {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return "", "", "", false
	}
	k, ok = cutFold(k, "tx.")
	if !ok {
		return "", "", "", false
	}
	prefix, rest, ok := cutCapture(k)
	if !ok || rest != "" || prefix == "" {
		return "", "", "", false
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i] | 0x20
		if !(c >= 'a' && c <= 'z' || prefix[i] >= '0' && prefix[i] <= '9' || prefix[i] == '_' || prefix[i] == '-') {
			return "", "", "", false
		}
	}
	before, after, ok = cutCapture(val)
	if !ok || before == "" || before[0] == '+' || before[0] == '-' || strings.Contains(after, "%{") {
		return "", "", "", false
	}
	return strings.ToLower(prefix), before, after, true
}

// cutCapture splits s around its one macro, which must be %{tx.0} (in any
// case): ok is false when the first macro is another, or there is none.
func cutCapture(s string) (before, after string, ok bool) {
	i := strings.Index(s, "%{")
	if i < 0 || len(s) < i+len("%{tx.0}") || !strings.EqualFold(s[i:i+len("%{tx.0}")], "%{tx.0}") {
		return "", "", false
	}
	return s[:i], s[i+len("%{tx.0}"):], true
}

// mayWritePrefix reports whether w may write a key that starts with
// prefix (lower case).
func (w *txWrites) mayWritePrefix(prefix string) bool {
	if w.any {
		return true
	}
	for _, k := range w.keys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	for _, p := range w.prefixes {
		if strings.HasPrefix(p, prefix) || strings.HasPrefix(prefix, p) {
			return true
		}
	}
	return false
}

// judge is the record rule's decision in the trie: whether value v (the
// starter's transformed value) makes its chain match.
func (rec *record) judge(list string) func(string) bool {
	return func(v string) bool {
		if !rec.starts(v) {
			return false
		}
		// @within: the list holds the record (strings.Contains, as
		// Coraza's and this project's @within). The memo keeps the
		// answer for a repeated name.
		return strings.Contains(list, rec.before+v+rec.after)
	}
}

// write does what Coraza does for a value the starter matches: the
// capture of the whole value in TX.0, then the setvar.
func (rec *record) write(tx plugintypes.TransactionState, v string) {
	if !rec.starts(v) {
		return
	}
	tx.CaptureField(0, v)
	m := rec.record(v)
	tx.Variables().TX().Set(m.key, m.vals)
}

// record returns the record of v, from made or made anew.
func (rec *record) record(v string) made {
	rec.madeMu.Lock()
	defer rec.madeMu.Unlock()
	if m, ok := rec.made[v]; ok {
		return m
	}
	// The key and the value in one allocation.
	var b strings.Builder
	b.Grow(len(rec.prefix) + len(rec.before) + 2*len(v) + len(rec.after))
	b.WriteString(rec.prefix)
	b.WriteString(v)
	b.WriteString(rec.before)
	b.WriteString(v)
	b.WriteString(rec.after)
	s := b.String()
	n := len(rec.prefix) + len(v)
	m := made{key: strings.ToLower(s[:n]), vals: []string{s[n:]}}
	if len(rec.made) >= maxMade || rec.made == nil {
		rec.made = make(map[string]made, 64)
	}
	// The map's key is a slice of s: v may be a buffer's.
	rec.made[s[len(rec.prefix):n]] = m
	return m
}

// recorded reports whether the screen of tx's current phase marked rec's
// rule recorded: no value of the transaction makes its chain match.
func (ix *Index) recorded(tx plugintypes.TransactionState, rec *record) bool {
	return rec.on && ix.inState(tx, rec.phase, func(st *txState) bool { return st.rules[rec.idx] == recorded })
}

// inState returns what check says of the screens' state when that state
// is tx's in phase, the transaction's current phase; false otherwise.
func (ix *Index) inState(tx plugintypes.TransactionState, phase types.RulePhase, check func(*txState) bool) bool {
	calls, ok := tx.(txCalls)
	if !ok || tx.LastPhase() != phase {
		return false
	}
	ix.stateMu.Lock()
	defer ix.stateMu.Unlock()
	st := &ix.state
	return st.phase == phase && st.marks(calls) && check(st)
}

// findRecords finds the record rules among the triggers (the starter's
// operator is the first one built at its rule's position) and ties each
// to its trigger and its trie rule. A rule whose records another rule
// may write, or whose text another rule shares, is not one.
func (ix *Index) findRecords(rules []observed, triggers []*trigger, chains map[string]*ruleChain, facts directiveFacts) {
	seen := map[int]bool{}
	for _, t := range triggers {
		if t.pos >= len(rules) || seen[t.pos] {
			continue
		}
		seen[t.pos] = true
		r := rules[t.pos]
		c := chains[r.raw]
		if c == nil || c.shared || c.any || !hasAction(r.parsed.actions, "chain") {
			continue
		}
		rec := recordOf(r, c.links, facts)
		if rec == nil || ix.plans[r.phase] == nil {
			continue
		}
		var sr *srule
		for _, s := range ix.plans[r.phase].rules {
			if s.pos == t.pos {
				sr = s
			}
		}
		// The rule's operator is one of this project's (recordOf), so
		// the first operator built at its position is its own, before
		// its chained rules'. (Two rules with the same argument share
		// one instance in sr.op.)
		if sr == nil || sr.node == nil || sr.multi || sr.judge == nil {
			continue
		}
		owned := true
		for i, o := range rules {
			if i == t.pos || o.writes == nil {
				continue
			}
			if o.writes.mayWritePrefix(rec.prefix) {
				owned = false
				break
			}
			if o.writes.touches(rec.list) {
				rec.writers = append(rec.writers, o.id)
			}
		}
		if !owned {
			continue
		}
		rec.idx, rec.starts = sr.idx, sr.judge
		sr.rec, t.rec = rec, rec
		ix.records = append(ix.records, rec)
	}
}

// activateRecords turns on the record rules whose list is a constant of
// the rule set: one value of the prelude, which no rule a transaction
// evaluates may write (every writer is one the prelude stands for).
func (ix *Index) activateRecords(removed map[int]bool) {
	pre := ix.prelude
	if pre == nil {
		return
	}
	for _, rec := range ix.records {
		list, ok := "", false
		for i, k := range pre.keys {
			if k == rec.list && len(pre.values[i]) == 1 {
				list, ok = pre.values[i][0], true
			}
		}
		for _, id := range rec.writers {
			if id == 0 || !removed[id] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		pp := ix.plans[rec.phase]
		sr := pp.rules[rec.idx]
		sr.judge, sr.slot = rec.judge(list), -1
		rec.on = true
		// Nothing the memo holds was judged this way.
		pp.memo = memo{}
		if pp.united {
			// The rule is judged from its list now, not through the union.
			pp.slotRules()
		}
	}
}
