package preselect

import (
	"cmp"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/corazawaf/coraza/v3/types/variables"

	"github.com/wafguard/wafguard/filter/fastpath"
	"github.com/wafguard/wafguard/filter/transform"
)

// screenedPhases are the phases screened: the request and response
// phases. The logging phase is not: its rules run after the verdict.
var screenedPhases = [...]types.RulePhase{types.PhaseRequestHeaders, types.PhaseRequestBody,
	types.PhaseResponseHeaders, types.PhaseResponseBody}

// stableTargets are the collections a screen may read: filled before the
// phase's first rule runs (request line, headers and cookies before phase
// 1, the parsed body before phase 2, the response status line and headers
// before phase 3, its body before phase 4) and never written by a rule's
// actions, so what the screen reads is what each rule will read. Every
// other variable (TX, MATCHED_VAR(S), RULE, ENV, counts, times, body
// processor errors set by ctl) makes a rule one the screen keeps.
var stableTargets = map[string]variables.RuleVariable{}

func init() {
	for _, v := range []variables.RuleVariable{
		variables.Args, variables.ArgsGet, variables.ArgsPost, variables.ArgsPath,
		variables.ArgsNames, variables.ArgsGetNames, variables.ArgsPostNames,
		variables.RequestHeaders, variables.RequestHeadersNames,
		variables.RequestCookies, variables.RequestCookiesNames,
		variables.RequestURI, variables.RequestURIRaw, variables.RequestFilename,
		variables.RequestBasename, variables.RequestLine, variables.RequestMethod,
		variables.RequestProtocol, variables.QueryString, variables.RequestBody,
		variables.Files, variables.FilesNames, variables.MultipartName,
		variables.MultipartFilename, variables.MultipartPartHeaders, variables.XML,
		variables.ResponseHeaders, variables.ResponseHeadersNames, variables.ResponseBody,
		variables.ResponseStatus, variables.ResponseProtocol, variables.StatusLine,
	} {
		stableTargets[v.Name()] = v
	}
}

// Builder collects the rules of one WAF while Coraza compiles it, through
// the rule observer, and turns them into an Index. Create it with
// NewBuilder, pass Observe to experimental.WAFConfigWithRuleObserver,
// record every directive text Coraza reads (the directives and each
// included file) with AddText, call coraza.NewWAF between Begin and End,
// and call Finish after it succeeded.
type Builder struct {
	rules []observed
	texts []string
	index atomic.Pointer[Index] // nil until Finish
	// segment numbers the stretches of the rule set between the places a
	// skipAfter can jump from or to: it grows after each SecMarker and
	// after each rule with skipAfter. Each stretch is screened on its own,
	// when its first rule with a screened operator runs, so a stretch a
	// skipAfter jumps over (the CRS's higher paranoia levels) costs
	// nothing.
	segment int
	// lastTrigger is the last operator built for this rule set (the
	// current rule's, while Coraza parses it).
	lastTrigger *trigger
	// chainOpen: the last rule observed starts a chain, so the operators
	// built until the next one belong to its chained rules.
	chainOpen bool
	// inFactory: one of this project's operator factories is running;
	// a file read now is its data.
	inFactory bool
	// jumps are the IDs of the marker jumps planned into the texts
	// (PlanJumps), screened those of the screened jumps among them.
	jumps, screened []int
	// triggers are the operators built for this rule set, in order.
	triggers []*trigger
	// keepMarkers: the rule set keeps its markers, even where they could
	// be hidden (markers.go).
	keepMarkers bool
}

// Jumps tells the builder the IDs of the marker jumps planned into the
// rule set's texts, which Finish checks on the compiled rules, and of the
// screened jumps among them.
func (b *Builder) Jumps(ids, screened []int) { b.jumps, b.screened = ids, screened }

type observed struct {
	id      int
	phase   types.RulePhase
	raw     string
	tags    []string
	secMark string
	parsed  parsedRule // raw, read once
	seg     int        // see Builder.segment
	// writes is what the rule and its chain may write in TX (set by
	// Finish).
	writes *txWrites
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder { return &Builder{} }

// compileMu serialises the compiles with a builder: while one runs, the
// operators Coraza builds belong to its rule set (see Register).
var (
	compileMu sync.Mutex
	compiling *Builder
)

// Begin marks the start of the compile of the builder's rule set: from
// now until End, the operators Coraza builds (those of filter/fastpath)
// run the builder's screen before their first evaluation in each phase of
// a transaction.
func (b *Builder) Begin() {
	compileMu.Lock()
	compiling = b
}

// End marks the end of the compile Begin started.
func (b *Builder) End() {
	compiling = nil
	compileMu.Unlock()
}

// Observe is the rule observer: Coraza calls it for each top-level rule
// (a chain starter, a SecAction or a SecMarker) in the order of the rule
// set, with the raw text of that rule alone (not its chained rules).
func (b *Builder) Observe(r types.RuleMetadata) {
	o := observed{id: r.ID(), phase: r.Phase(), raw: r.Raw(), tags: r.Tags(), secMark: r.SecMark(), seg: b.segment}
	o.parsed = parseRule(o.raw)
	// The last operator built is this rule's when the rule has one of
	// this project's: Coraza builds a rule's operator while it parses the
	// rule, after every operator of the rules before it and their chains.
	// Built right after a chain, it was taken for one of the chain's.
	own := b.lastTrigger
	if own != nil && !(o.parsed.secRule && fastpath.Owns(o.parsed.opName)) {
		own = nil
	}
	if own != nil {
		own.pos, own.starter = len(b.rules), true
	}
	b.rules = append(b.rules, o)
	if o.secMark != "" || hasAction(o.parsed.actions, "skipafter") {
		if own != nil {
			own.boundary = true
		}
		b.segment++
	}
	b.lastTrigger = nil
	b.chainOpen = hasAction(o.parsed.actions, "chain")
}

// position is the place in the rule set of the rule whose operator is
// being built: the index the next observed rule gets, or, while a chain
// is being read, the index of its starter (the chained rules run as part
// of it).
func (b *Builder) position() int {
	if b.chainOpen {
		return len(b.rules) - 1
	}
	return len(b.rules)
}

// parsedRule is a rule text as this package reads it: a SecRule
// (secRule set, ruleText filled) or a SecAction (secAction set, its
// actions only).
type parsedRule struct {
	ruleText
	secRule, secAction bool
}

// parseRule reads a SecRule or SecAction text; anything else has no
// actions.
func parseRule(raw string) parsedRule {
	if rt, ok := parseSecRule(raw); ok {
		return parsedRule{ruleText: rt, secRule: true}
	}
	a, ok := secActionText(raw)
	if !ok {
		return parsedRule{}
	}
	return parsedRule{ruleText: ruleText{actions: parseActions(a)}, secAction: true}
}

// secActionText returns the actions of a SecAction text, unquoted; ok is
// false for any other directive.
func secActionText(raw string) (actions string, ok bool) {
	dir, a, _ := strings.Cut(strings.TrimSpace(raw), " ")
	if !strings.EqualFold(dir, "secaction") {
		return "", false
	}
	return strings.Trim(strings.TrimSpace(a), `"`), true
}

func hasAction(acts []action, name string) bool {
	for _, a := range acts {
		if a.name == name {
			return true
		}
	}
	return false
}

// AddText records a directive text Coraza read: the rule set's directives
// and each file it included. A file read by one of this project's
// operators while Coraza builds it (the data file of @pmFromFile) holds
// no directives and is left out.
func (b *Builder) AddText(text string) {
	if !b.inFactory {
		b.texts = append(b.texts, text)
	}
}

// Finish builds the index from what was observed. rulesInWAF is the
// number of rules the compiled WAF holds (experimental.WAFWithRules), used
// to check the configuration-time removals it accounted for.
func (b *Builder) Finish(rulesInWAF int) *Index {
	known := make(map[string]*parsedRule, len(b.rules))
	for i := range b.rules {
		known[b.rules[i].raw] = &b.rules[i].parsed
	}
	writes := chainWrites(b.texts, known)
	for i := range b.rules {
		if w := writes[b.rules[i].raw]; w != nil {
			b.rules[i].writes = &w.txWrites
		} else if b.rules[i].secMark == "" {
			// A rule whose text was not found may write anything.
			b.rules[i].writes = &txWrites{any: true}
		} else {
			b.rules[i].writes = &txWrites{}
		}
	}
	facts := scanDirectives(b.texts)
	facts.bodyCtl = bodyProcessorCtls(b.rules, writes)
	facts.screenedJumps = b.screened
	for _, id := range b.jumps {
		if !slices.Contains(b.screened, id) {
			facts.markerJumps = append(facts.markerJumps, id)
		}
	}
	ix := newIndex(b.rules, facts, rulesInWAF, b.segment)
	var tagged map[string][]int // found when a rule needs them
	taggedDone := false
	for _, t := range b.triggers {
		if t.pos < len(b.rules) && !hasAction(b.rules[t.pos].parsed.actions, "chain") {
			r := b.rules[t.pos]
			if t.adds = additionsOf(r, facts); t.adds != nil {
				ix.adders = append(ix.adders, r.id)
			}
			if ctls := targetRemovalsOf(r); ctls != nil {
				if !taggedDone {
					tagged, taggedDone = taggedRules(b.rules, facts, rulesInWAF), true
				}
				if t.ctls = withRules(ctls, tagged); t.ctls != nil {
					ix.adders = append(ix.adders, r.id)
					ix.ctlTriggers = append(ix.ctlTriggers, t)
				}
			}
			t.negated = r.parsed.negated
		}
	}
	ix.findRecords(b.rules, b.triggers, writes, facts)
	ix.findScreened(b.rules, b.triggers, b.screened, facts)
	ix.findLinks(b.rules, writes, facts)
	for _, r := range b.rules {
		if r.secMark == "" && slices.Contains(b.jumps, r.id) && !slices.Contains(b.screened, r.id) {
			ix.jumps = append(ix.jumps, r.id)
		}
	}
	if len(ix.jumps) != 0 {
		// Checked without the prelude, and again by Snapshot with it.
		ix.jumpCheck = &jumpCheck{rules: jumpRules(b.rules), facts: facts}
		ix.jumpsOff = checkJumps(ix.jumpCheck.rules, facts, ix.jumps, nil)
	}
	ix.jumpsOff = append(ix.jumpsOff, ix.refused...)
	if len(facts.updated) == 0 && !facts.updateAll {
		for _, r := range b.rules {
			if w := r.writes; w.any || len(w.keys) != 0 || len(w.prefixes) != 0 {
				ix.txWriters = append(ix.txWriters, ruleWrites{r.id, w})
			}
		}
		ix.knowsWriters = true
	}
	if !b.keepMarkers && b.markerRules(facts) {
		ix.canHide = true
		if len(b.jumps) != 0 {
			ix.jumpRange = [2]int{b.jumps[0], b.jumps[len(b.jumps)-1]}
		}
	}
	b.rules, b.texts, b.triggers = nil, nil, nil
	b.index.Store(ix)
	return ix
}

// directiveFacts is what the rule set's directives say beyond the rules
// themselves.
type directiveFacts struct {
	// defaultsTransform: a SecDefaultAction adds transformations or
	// multiMatch, which a rule inherits unless it starts over with t:none.
	defaultsTransform bool
	// defaultsSkip: a SecDefaultAction has a skip, which would make every
	// rule after a matching one skip others.
	defaultsSkip bool
	// updated are the IDs whose actions or targets a SecRuleUpdate*ById
	// changed after the observer saw the rule (a target update that only
	// excludes, "!VAR:key", narrows the rule and is not listed).
	updated [][2]int
	// updateAll: a SecRuleUpdateTargetByTag/ByMsg added targets to rules
	// the builder cannot name; nothing is screened.
	updateAll bool
	// removedIDs and removedTags are the rules SecRuleRemoveById and
	// SecRuleRemoveByTag took out of the WAF after the observer saw them.
	removedIDs  [][2]int
	removedTags []string
	// runtime are the removals rules make while a transaction runs
	// (ctl:ruleRemoveById, ctl:ruleRemoveByTag, ctl:ruleRemoveByMsg),
	// which change where a skip lands.
	runtime runtimeRemovals
	// The rules whose targets may lose values after the observer saw
	// them, which changes what a count (&VAR) counts: targetsUpdated by
	// SecRuleUpdateTargetById, any rule after a SecRuleUpdateTargetByTag
	// or ByMsg (targetsUpdateAll), and those a ctl:ruleRemoveTarget*
	// names (runtimeTargets).
	targetsUpdated   [][2]int
	targetsUpdateAll bool
	runtimeTargets   runtimeRemovals
	// defaultsWrite: a SecDefaultAction may write TX (setvar, capture, an
	// action of a plugin), for every rule that inherits it.
	defaultsWrite bool
	// defaultsOther: a SecDefaultAction has an action other than the
	// phase, logging and disruptive ones (a ctl, say), which every rule
	// that inherits it runs when it matches.
	defaultsOther bool
	// bodyCtl: the phases in which some rule may change
	// REQBODY_PROCESSOR (skips.go).
	bodyCtl map[types.RulePhase]bool
	// screenedJumps are the IDs of the screened jumps planned into the
	// texts (screenedjumps.go), markerJumps those of the other jumps
	// (jumps.go).
	screenedJumps, markerJumps []int
}

// runtimeRemovals are the rules some ctl action may remove from a
// transaction.
type runtimeRemovals struct {
	ids  [][2]int
	tags []string
	// any: a removal by message, or one whose value could not be read,
	// may remove any rule.
	any bool
}

// mayRemoveKeeping reports whether a removal could take rule r out of a
// transaction while leaving rule s in it. A removal that takes s out too
// does not matter for s's skip: a removed s skips nothing.
func (rr runtimeRemovals) mayRemoveKeeping(r, s observed) bool {
	if rr.any {
		return true
	}
	for _, rg := range rr.ids {
		in := func(id int) bool { return id >= rg[0] && id <= rg[1] }
		if in(r.id) && !in(s.id) {
			return true
		}
	}
	for _, tag := range rr.tags {
		if slices.Contains(r.tags, tag) && !slices.Contains(s.tags, tag) {
			return true
		}
	}
	return false
}

// scan adds the ctl removals of one directive text, written in any case:
// of rules with what = "", of rule targets with what = "target"
// (ctl:ruleRemoveTargetById and so on, whose value names the rule before
// a ';'). It reads the text in place: the CRS's texts are 1.4 MB.
func (rr *runtimeRemovals) scan(text, what string) {
	for i := 0; ; i++ {
		k := strings.IndexByte(text[i:], ':')
		if k < 0 {
			return
		}
		i += k
		if i < 3 || !strings.EqualFold(text[i-3:i], "ctl") {
			continue
		}
		rest, ok := cutFold(text[i+1:], "ruleremove"+what)
		if !ok {
			continue
		}
		kind := ""
		for _, by := range []string{"byid=", "bytag=", "bymsg="} {
			if _, ok := cutFold(rest, by); ok {
				kind = by
				break
			}
		}
		if kind == "" {
			continue
		}
		start := len(text) - len(rest) + len(kind)
		end := start
		for end < len(text) && !strings.ContainsRune(",\"' \t\n\\", rune(text[end])) {
			end++
		}
		value := text[start:end]
		if what != "" {
			value, _, _ = strings.Cut(value, ";")
		}
		switch kind {
		case "byid=":
			ids, ok := idList(value)
			if !ok || len(ids) == 0 {
				rr.any = true
			}
			rr.ids = append(rr.ids, ids...)
		case "bytag=":
			if value == "" || strings.Contains(value, "%{") {
				rr.any = true
			}
			rr.tags = append(rr.tags, value)
		default:
			rr.any = true
		}
	}
}

// scanDirectives reads the directives and files of a rule set.
func scanDirectives(texts []string) directiveFacts {
	var f directiveFacts
	for _, text := range texts {
		if strings.Contains(text, "\\\n") {
			text = strings.ReplaceAll(text, "\\\n", " ")
		}
		f.runtime.scan(text, "")
		f.runtimeTargets.scan(text, "target")
		for rest := text; rest != ""; {
			var line string
			line, rest, _ = strings.Cut(rest, "\n")
			line = strings.TrimSpace(line)
			dir, args, _ := strings.Cut(line, " ")
			args = strings.TrimSpace(args)
			switch factDirective(dir) {
			case "secdefaultaction":
				for _, a := range parseActions(strings.Trim(args, `"`)) {
					switch a.name {
					case "t", "multimatch":
						f.defaultsTransform = true
					case "skip":
						f.defaultsSkip = true
					}
					if w := actionWrites([]action{a}); w.any || len(w.keys) != 0 || len(w.prefixes) != 0 {
						f.defaultsWrite = true
					}
					if !defaultOnly[a.name] {
						f.defaultsOther = true
					}
				}
			case "secruleupdateactionbyid":
				ids, ok := idList(firstField(args))
				if !ok {
					f.updateAll = true
				}
				f.updated = append(f.updated, ids...)
			case "secruleupdatetargetbyid":
				idText, targets, _ := strings.Cut(args, " ")
				ids, ok := idList(idText)
				if !ok {
					f.targetsUpdateAll = true
				}
				f.targetsUpdated = append(f.targetsUpdated, ids...)
				if onlyExclusions(targets) {
					continue
				}
				if !ok {
					f.updateAll = true
				}
				f.updated = append(f.updated, ids...)
			case "secruleupdatetargetbytag", "secruleupdatetargetbymsg":
				f.targetsUpdateAll = true
				if _, targets := cutArg(args); !onlyExclusions(targets) {
					f.updateAll = true
				}
			case "secruleremovebyid":
				if ids, ok := idList(args); ok {
					f.removedIDs = append(f.removedIDs, ids...)
				}
			case "secruleremovebytag":
				f.removedTags = append(f.removedTags, strings.Trim(args, `"'`))
			}
		}
	}
	return f
}

// factDirective returns, in lower case, the directive dir names when
// scanDirectives reads it, "" for any other.
func factDirective(dir string) string {
	for _, d := range []string{"secdefaultaction", "secruleupdateactionbyid", "secruleupdatetargetbyid",
		"secruleupdatetargetbytag", "secruleupdatetargetbymsg", "secruleremovebyid", "secruleremovebytag"} {
		if strings.EqualFold(dir, d) {
			return d
		}
	}
	return ""
}

// defaultOnly are the SecDefaultAction actions that change nothing for a
// rule that has pass and nolog of its own.
var defaultOnly = map[string]bool{
	"phase": true, "log": true, "nolog": true, "auditlog": true, "noauditlog": true,
	"pass": true, "block": true, "deny": true, "drop": true, "status": true,
}

func firstField(s string) string {
	f, _, _ := strings.Cut(s, " ")
	return f
}

// cutArg cuts the first, possibly double-quoted, argument off s.
func cutArg(s string) (arg, rest string) {
	if q, r, ok := cutQuoted(s); ok {
		return q, strings.TrimSpace(r)
	}
	a, r, _ := strings.Cut(s, " ")
	return a, strings.TrimSpace(r)
}

// onlyExclusions reports whether a SecRuleUpdateTarget target list only
// removes targets.
func onlyExclusions(targets string) bool {
	targets = strings.Trim(strings.TrimSpace(targets), `"`)
	ts, ok := parseTargets(targets)
	if !ok {
		return false
	}
	for _, t := range ts {
		if !t.exclusion {
			return false
		}
	}
	return true
}

func inRanges(id int, ranges [][2]int) bool {
	for _, r := range ranges {
		if id >= r[0] && id <= r[1] {
			return true
		}
	}
	return false
}

// mayName reports whether some removal may name rule r.
func (rr runtimeRemovals) mayName(r observed) bool {
	if rr.any || inRanges(r.id, rr.ids) {
		return true
	}
	for _, tag := range rr.tags {
		if slices.Contains(r.tags, tag) {
			return true
		}
	}
	return false
}

// Index is, for one WAF, the rules a screen may remove from a transaction,
// grouped by phase.
type Index struct {
	plans [types.PhaseLogging + 1]*phasePlan
	// alwaysJumps are the gates the prelude found to jump in every
	// transaction (Snapshot; AlwaysJumps).
	alwaysJumps map[int]bool
	// txWriters are the rules that may write TX, when knowsWriters (no
	// SecRuleUpdateActionById may have added a setvar); constTX are the
	// TX values every transaction keeps from the prelude on: no rule left
	// to it writes them (Snapshot).
	txWriters    []ruleWrites
	knowsWriters bool
	constTX      map[string][]string
	// canHide: the rules allow hiding the markers; hideMarkers: Start
	// hides them, and removes the marker and screened jumps, the IDs of
	// jumpRange (zero when there are none) (markers.go).
	canHide, hideMarkers bool
	jumpRange            [2]int
	shown                atomic.Bool // a transaction may have them shown
	// ctlTriggers are the operators that make a rule's target removals
	// themselves (noop.go); Snapshot drops the prelude's rules from them.
	ctlTriggers []*trigger
	// state is what the screens of the transaction in progress share.
	stateMu sync.Mutex
	state   txState
	// Skipped counts, per reason, the rules of the screened phases that
	// are always evaluated (see Reasons).
	Skipped map[string]int
	// why holds the reason of each rule counted in Skipped.
	why map[int]string
	// prelude is what every transaction starts past (prelude.go), nil
	// when there is none; plan is what Snapshot makes it from.
	prelude *prelude
	plan    *preludePlan
	// jumps are the marker jumps the compiled rule set holds (jumps.go),
	// jumpsOff those of them that checkJumps refused, which Start removes
	// from every transaction.
	jumps, jumpsOff []int
	jumpCheck       *jumpCheck // until Snapshot
	// adders are the rules whose additions of 0, or whose ctl removing
	// targets by tag, do not match (noop.go).
	adders []int
	// records are the record rules (records.go).
	records []*record
	// screened are the screened jumps (screenedjumps.go), refused the
	// IDs of those findScreened refused (jumpsOff once Snapshot ran).
	screened []*screenedJump
	refused  []int
}

// jumpCheck is what Snapshot needs to check the jumps again on the
// prelude's removals.
type jumpCheck struct {
	rules []jrule
	facts directiveFacts
}

// Jumps returns the IDs of the marker jumps the rule set holds (the
// screened ones last), and of those among them that every transaction
// removes because they would change a decision, or, screened, could not
// be taken.
func (ix *Index) Jumps() (all, off []int) {
	all = slices.Clone(ix.jumps)
	for _, j := range ix.screened {
		all = append(all, j.id)
	}
	return all, ix.jumpsOff
}

// Quiet returns the IDs of the rules that, with the preselection, may be
// missing from a transaction's matched rules, or be there in addition,
// though they log nothing: the prelude's, the marker jumps and the rules
// whose additions of 0, or whose removals of targets, do not match, and
// the setters (setters.go).
func (ix *Index) Quiet() map[int]bool {
	q := map[int]bool{}
	all, _ := ix.Jumps()
	for _, ids := range [][]int{ix.PreludeIDs(), all} {
		for _, id := range ids {
			q[id] = true
		}
	}
	if ix.prelude != nil {
		for _, id := range ix.adders {
			q[id] = true
		}
		for _, pp := range ix.plans {
			if pp == nil {
				continue
			}
			for _, r := range pp.rules {
				if r.sets != nil {
					q[r.id] = true
				}
			}
		}
	}
	return q
}

// NeedsStart reports whether a transaction must start through Start:
// the rule set has a prelude, or jumps to remove.
func (ix *Index) NeedsStart() bool { return ix.prelude != nil || len(ix.jumpsOff) != 0 }

// Droppable returns the IDs of the rules the screen may remove in phase,
// in rule-set order.
func (ix *Index) Droppable(phase types.RulePhase) []int {
	var ids []int
	if pp := ix.plans[phase]; pp != nil {
		for _, r := range pp.rules {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// Reason returns why the rule with this ID is always evaluated, and false
// when the screen may remove it (or there is no such rule).
func (ix *Index) Reason(id int) (string, bool) {
	r, ok := ix.why[id]
	return r, ok
}

// phasePlan is one phase of the rule set as the screen sees it: its
// screened rules, its stretches and how Coraza goes from one to the next,
// and the trie of the transformation chains of the rules that read only
// collections that are stable during the phase.
type phasePlan struct {
	rules []*srule // in rule-set order; srule.idx indexes it
	// initial is the state every screen of a transaction starts its
	// rules in (by idx): the decisions of the prelude's rules, which no
	// transaction evaluates (preludeStates); nil without a prelude.
	initial []uint8
	segs    []segment
	root    *node
	nodes   []*node
	// vars are the collections the trie's rules read, whole or by a
	// plain key; bit i of srule.vars and node.vars stands for vars[i].
	vars       []varSlot
	keyedSlots int // of vars
	// union finds in one pass over a value which of the @rx rules of the
	// trie may match it (see fastpath.Union); hitWords is the size of its
	// hit set.
	union    *fastpath.Union
	hitWords int
	bySlot   []*srule // the rule of each slot of the union
	united   bool     // unite has built union for the plan as it is
	// triggers are the distinct trigger byte sets of the trie's
	// transformations (node.trig is the bit of one); sigBits[c] holds the
	// bits of those that hold byte c.
	triggers []*[256]bool
	sigBits  [256]uint64
	// memo remembers, across transactions, which trie rules match a
	// value (see memo.go), for the collections memoVar says.
	memo    memo
	memoVar []memoRule
	// order is the order a screen reads the slots in: the collections of
	// names first (exclusions.go).
	order []int
	// ids are the rule set's rules in the order of their IDs, for the
	// ranges a screen removes (removeDropped); slotOf is the place of
	// each of rules there.
	ids    []idSlot
	slotOf []int32
	// skippers are the phase's rules with skip:N whose decisions the
	// screen reads (skips.go).
	skippers []*skipper
	// screened are the phase's screened jumps (screenedjumps.go).
	screened []*screenedJump
	// keyRx holds the expressions of the keys kept rules skip (keyrx.go).
	keyRx keyRxCache
	// tids numbers the trie's transformations by name (node.tid);
	// chainNext[c][tid] is the made chain of chain c followed by
	// transformation tid, 0 while not numbered (made.go).
	tids      map[string]int32
	chainNext [][]int32
}

// idSlot is one rule of the rule set, for the ranges of IDs a screen of
// the phase removes: the rule's index in phasePlan.rules, or slotDone for
// a rule the rest of the transaction never evaluates after the phase has
// begun (a rule of an earlier phase; one the prelude removes from every
// transaction, see Snapshot), or slotKeep for a rule no range may cover
// (a rule of the phase the screen does not decide on, one of a later
// phase).
type idSlot struct {
	id  int
	idx int32
}

const (
	slotDone = -1
	slotKeep = -2
)

// orderByID fills ids and slotOf from the observed rules (the rules of
// the WAF, and those a configuration-time removal took out, which keep
// their slots: a range over a rule that is not there removes nothing).
func (pp *phasePlan) orderByID(rules []observed, p types.RulePhase, byPos map[int]*srule) {
	pp.ids = pp.ids[:0]
	for pos, r := range rules {
		if r.secMark != "" || r.id <= 0 {
			continue
		}
		slot := idSlot{id: r.id, idx: slotKeep}
		switch sr := byPos[pos]; {
		case sr != nil:
			slot.idx = int32(sr.idx)
		case r.phase < p:
			slot.idx = slotDone
		}
		pp.ids = append(pp.ids, slot)
	}
	slices.SortFunc(pp.ids, func(a, b idSlot) int { return cmp.Compare(a.id, b.id) })
	pp.slotOf = make([]int32, len(pp.rules))
	for k, s := range pp.ids {
		if s.idx >= 0 {
			pp.slotOf[s.idx] = int32(k)
		}
	}
}

// segment is one stretch of a phase: the rules between two places a
// skipAfter jumps from or to.
type segment struct {
	rules []*srule // the screened ones
	// jump: the stretch ends with a rule of this phase that has a
	// skipAfter; jumpBy is that rule when the screen judges it (nil when
	// it does not), target the stretch Coraza goes on with when it
	// jumps (-1: no marker of that name follows, the rest of the phase
	// is skipped).
	jump   bool
	jumpBy *srule
	target int
	// screenedJump: the rule with the skipAfter is a screened jump
	// (screenedjumps.go); markerJump: a marker jump (jumps.go), which
	// passes over no rule of its phase, taken or not.
	screenedJump, markerJump bool
}

// srule is one rule the screen may remove.
type srule struct {
	id  int
	idx int // in phasePlan.rules
	seg int // its stretch
	pos int // its place in the rule set (observed order)
	// op is the operator instance the rule uses; judge its decision
	// when it needs no transaction (nil when the argument has a macro:
	// fastpath.JudgeIn expands it per screen).
	op    plugintypes.Operator
	judge func(string) bool
	// argTX: the TX keys the macros of its argument read (none without
	// a macro); Snapshot makes judge once when they are all constant.
	argTX []string
	// slot is the rule's operator in the phase's union, -1 when the union
	// does not stand for it; confirm is then its decision without the
	// literal filter.
	slot    int32
	confirm func(string) bool
	negated bool
	multi   bool // judged at every step of its chain that changed the value
	// A trie rule reads stable collections only: vars are their bits,
	// node is where its chain ends in the trie.
	vars uint64
	node *node
	// A rule judged on its own reads targets, after chain. It reads TX
	// (or expands TX in its argument) when txKeys is not empty; txFinal
	// is where those values are the ones it will read.
	targets []starget
	chain   []plugintypes.Transformation
	txKeys  []string
	txFinal finality
	// rec: a record rule (records.go).
	rec *record
	// windows: the skippers (phasePlan.skippers) whose skip may land on
	// it; it is removed only when none of them matches (skips.go).
	windows []int
	// links: a chain starter's chained rules, read when the rule set has
	// a prelude (links.go).
	links []link
	// sets: a setter (setters.go), judged from its keys (targets), to
	// which it writes these values.
	sets []string
	// adds: an addition (noop.go), dropped when it adds 0; addsFinal is
	// where the TX values its additions read are final.
	adds      []addition
	addsFinal finality
	// excl: for a trie rule Coraza may be told to skip collections of
	// (exclusions.go), each collection it reads with the slots that stand
	// for it; nil for any other rule.
	excl []exclusion
}

// finality is where the TX values some rule reads are the ones it will
// read, for a screen at a position (txState.final): from frozenFrom on,
// one past the last writer; before that, where each writer ahead of the
// screen is dropped.
type finality struct {
	frozenFrom int
	// writers are the rules of the phase before the rule that may write
	// one of the values, in order (r nil where the screen does not judge
	// the rule).
	writers []writer
}

// ruleWrites is what the rule with this ID may write in TX.
type ruleWrites struct {
	id int
	w  *txWrites
}

// writer is a rule that may write a TX key another rule reads.
type writer struct {
	pos int
	r   *srule
}

// starget is one target of a rule judged on its own.
type starget struct {
	v variables.RuleVariable
	// key is the key looked up, as Coraza looks it up (lower case but
	// for the ARGS collections); "" reads the whole collection.
	key   string
	count bool
	// vi indexes phasePlan.vars for a whole stable collection, whose
	// values the screen reads once per phase.
	vi int
}

// node is one transformation chain prefix; the root is the value as read.
// A rule is judged at the node where its chain ends; a multiMatch rule at
// every node of its path, root included.
type node struct {
	name string
	fn   plugintypes.Transformation
	// into is fn writing into the screen's buffer (transform.Into), nil
	// for a transformation without one.
	into     transform.Into
	parent   *node
	children []*node
	rules    []*srule
	vars     uint64 // the collections the rules below read
	idx      int
	tid      int32 // the number of the transformation (phasePlan.tidOf)
	// trig is the bit of the node's trigger bytes (transform.Triggers)
	// in the plan's signatures, 0 when it has none.
	trig uint64
	// byVar[i] are the rules judged here that read collection i of the
	// plan.
	byVar [][]*srule
	// The same rules split by how a screen judges them (unite builds
	// these, slotRules): plain[i] are those the union does not stand for,
	// or that are negated, each judged in turn; united[i] are the others,
	// whose union slots unitedMask[i] holds, so that a screen runs the
	// confirmation of only those whose literals the union found, without
	// going through the rest (a JSON order of the bench tested some
	// 14,000 slots this way, of which 184 held a literal). unite runs
	// before any screen (screenFrom), so every node has these.
	plain, united [][]*srule
	unitedMask    [][]uint64
}

func (n *node) child(name string, fn plugintypes.Transformation, pp *phasePlan) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	into, _ := transform.LookupInto(name)
	c := &node{name: name, fn: fn, into: into, parent: n, idx: len(pp.nodes), tid: pp.tidOf(name)}
	if t, ok := transform.Triggers(name); ok {
		c.trig = pp.triggerBit(t)
	}
	pp.nodes = append(pp.nodes, c)
	n.children = append(n.children, c)
	return c
}

// triggerBit returns the bit of the trigger bytes t in the plan's
// signatures, adding it; 0 (no bit) past 63 sets.
func (pp *phasePlan) triggerBit(t *[256]bool) uint64 {
	for i, u := range pp.triggers {
		if *u == *t {
			return 1 << i
		}
	}
	if len(pp.triggers) == 63 {
		return 0
	}
	bit := uint64(1) << len(pp.triggers)
	pp.triggers = append(pp.triggers, t)
	for c, in := range t {
		if in {
			pp.sigBits[c] |= bit
		}
	}
	return bit
}

// signature is the set of trigger bytes value holds: the bits of the
// plan's trigger sets one of whose bytes it holds.
func (pp *phasePlan) signature(value string) uint64 {
	var sig uint64
	for i := 0; i < len(value); i++ {
		sig |= pp.sigBits[value[i]]
	}
	return sig
}

// bit returns the bit of collection v, adding it.
func (pp *phasePlan) bit(v variables.RuleVariable) (uint64, bool) {
	return pp.slotBit(varSlot{v: v})
}

// varSlot is a collection a trie rule reads: whole (key "") or the values
// of one plain key, as Coraza looks it up (lookupKey).
type varSlot struct {
	v   variables.RuleVariable
	key string
}

// maxSlots is the most collections a phase's trie reads, whole or by key:
// they are the bits of a uint64. Keys take at most the room the whole
// collections leave (maxSlots - len(stableTargets)), so that every whole
// collection always has its slot; a keyed target past them is read as its
// whole collection, a superset.
const maxSlots = 64

// slotBit returns the bit of slot s, adding it; ok is false when there is
// no room for it.
func (pp *phasePlan) slotBit(s varSlot) (uint64, bool) {
	for i, have := range pp.vars {
		if have == s {
			return 1 << i, true
		}
	}
	if len(pp.vars) == maxSlots || s.key != "" && pp.keyedSlots == maxSlots-len(stableTargets) {
		return 0, false
	}
	if s.key != "" {
		pp.keyedSlots++
	}
	pp.vars = append(pp.vars, s)
	return 1 << (len(pp.vars) - 1), true
}

// Reasons a rule of a screened phase is always evaluated.
const (
	reasonNoID        = "no id (SecMarker)"
	reasonNotSecRule  = "SecAction or unreadable text"
	reasonOperator    = "operator not screened"
	reasonMacro       = "a macro in the operator argument that reads more than TX"
	reasonTarget      = "a target the screen does not read"
	reasonSlots       = "more collections in the phase than the screen has slots for"
	reasonCount       = "a count whose values a target exclusion may change"
	reasonTransform   = "a transformation that is not this project's"
	reasonDefaults    = "inherits SecDefaultAction transformations"
	reasonDefaultsTX  = "reads TX, which a SecDefaultAction may write"
	reasonSkipWindow  = "a skip of an earlier rule can land on it"
	reasonUpdated     = "changed by SecRuleUpdate*"
	reasonNoInstance  = "operator instance not found"
	reasonConfigWhole = "SecRuleUpdateTargetByTag/ByMsg adds targets"
)

// newIndex decides, for each observed rule of a screened phase, whether
// the screen may remove it, and builds the phase plans.
// removedAtConfig reports whether a SecRuleRemoveById or ByTag took r
// out of the WAF after the observer saw it.
func removedAtConfig(r observed, facts directiveFacts) bool {
	if r.id == 0 {
		return false
	}
	if inRanges(r.id, facts.removedIDs) {
		return true
	}
	for _, t := range facts.removedTags {
		if slices.Contains(r.tags, t) {
			return true
		}
	}
	return false
}

func newIndex(rules []observed, facts directiveFacts, rulesInWAF, segments int) *Index {
	ix := &Index{Skipped: map[string]int{}, why: map[int]string{}}
	var kept []observedAt
	for i, r := range rules {
		if !removedAtConfig(r, facts) {
			kept = append(kept, observedAt{r, i})
		}
	}
	// When the count disagrees, some removal was not understood: a skip
	// may then land anywhere after its rule.
	skipToEnd := len(kept) != rulesInWAF
	byPhase := map[types.RulePhase][]observedAt{}
	windowed := map[int]bool{} // by position: in some skip window
	for _, p := range screenedPhases {
		pp := &phasePlan{root: &node{}, segs: make([]segment, segments+1)}
		pp.nodes = append(pp.nodes, pp.root)
		var inPhase []observedAt
		for _, r := range kept {
			if r.phase == p {
				inPhase = append(inPhase, r)
			}
		}
		// Positions a skip:N of an earlier rule of this phase can land
		// on, with the rules whose skips can (their indexes in
		// pp.skippers, -1 for one whose decision the screen cannot
		// read: skips.go).
		window := make([][]int, len(inPhase))
		for i, r := range inPhase {
			for _, a := range r.parsed.actions {
				if a.name != "skip" {
					continue
				}
				n, err := strconv.Atoi(a.value)
				if err != nil || skipToEnd {
					n = len(inPhase)
				}
				k := -1
				if sk := skipperOf(r.observed, facts, facts.bodyCtl[p]); sk != nil {
					k = len(pp.skippers)
					pp.skippers = append(pp.skippers, sk)
				}
				// The skip passes over the next n rules still in the
				// transaction; rules a ctl may have removed (while
				// leaving this one) do not count, so the window
				// reaches past them.
				for j, counted := i+1, 0; j < len(inPhase) && counted < n; j++ {
					window[j] = append(window[j], k)
					if !facts.runtime.mayRemoveKeeping(inPhase[j].observed, r.observed) {
						counted++
					}
				}
			}
		}
		byPos := map[int]*srule{}
		for i, r := range inPhase {
			sr, reason := pp.add(r.observed, r.pos, window[i], facts)
			if reason != "" {
				ix.why[r.id] = reason
				ix.Skipped[reason]++
				continue
			}
			byPos[r.pos] = sr
			if sr.txKeys != nil {
				sr.txFinal = finalityOf(inPhase, i, sr.txKeys, byPos)
			}
			if sr.adds != nil {
				sr.addsFinal = finalityOf(inPhase, i, addedKeys(sr.adds), byPos)
			}
		}
		// How each stretch ends in this phase.
		for i, r := range kept {
			if r.secMark != "" || r.phase != p {
				continue
			}
			for _, a := range r.parsed.actions {
				if a.name != "skipafter" {
					continue
				}
				sg := &pp.segs[r.seg]
				sg.jump, sg.jumpBy, sg.target = true, byPos[r.pos], -1
				sg.markerJump = slices.Contains(facts.markerJumps, r.id)
				mark := strings.Trim(a.value, `"'`)
				for _, m := range kept[i+1:] {
					if m.secMark == mark {
						sg.target = m.seg + 1
						break
					}
				}
			}
		}
		for _, sr := range pp.rules {
			pp.segs[sr.seg].rules = append(pp.segs[sr.seg].rules, sr)
			for a := sr.node; a != nil; a = a.parent {
				a.vars |= sr.vars
			}
		}
		// The union is built by the first screen (unite): Snapshot
		// leaves out the rules the prelude decides.
		for _, r := range pp.rules {
			r.slot = -1
		}
		for _, n := range pp.nodes {
			n.byVar = make([][]*srule, len(pp.vars))
			for _, r := range n.rules {
				for i := range pp.vars {
					if r.vars&(1<<i) != 0 {
						n.byVar[i] = append(n.byVar[i], r)
					}
				}
			}
		}
		for _, v := range pp.vars {
			pp.memoVar = append(pp.memoVar, memoized(v.v))
		}
		pp.order = slotOrder(pp.vars)
		pp.orderByID(rules, p, byPos)
		ix.plans[p] = pp
		byPhase[p] = inPhase
		for i, w := range window {
			if len(w) != 0 {
				windowed[inPhase[i].pos] = true
			}
		}
	}
	if !skipToEnd {
		ix.plan = buildPrelude(kept, byPhase, ix.plans, windowed, facts)
	}
	return ix
}

// observedAt is an observed rule with its place among the observed rules
// (trigger positions count the same way).
type observedAt struct {
	observed
	pos int
}

// finalityOf returns where the TX keys rule inPhase[i] reads are final:
// the rules of the phase before it that may write one of them, with the
// screen's rule for each (byPos), and one past the last of them (0 when
// none does).
func finalityOf(inPhase []observedAt, i int, keys []string, byPos map[int]*srule) finality {
	var f finality
	for _, r := range inPhase[:i] {
		for _, k := range keys {
			if r.writes.touches(k) {
				f.writers = append(f.writers, writer{pos: r.pos, r: byPos[r.pos]})
				f.frozenFrom = r.pos + 1
				break
			}
		}
	}
	return f
}

// add indexes one rule, or returns why the screen must keep it.
func (pp *phasePlan) add(r observed, pos int, window []int, facts directiveFacts) (*srule, string) {
	inSkipWindow := slices.Contains(window, -1)
	if r.id == 0 {
		return nil, reasonNoID
	}
	if facts.updateAll {
		return nil, reasonConfigWhole
	}
	rt, ok := r.parsed.ruleText, r.parsed.secRule
	if keys, values, setter := setterOf(r); setter && !inSkipWindow && !facts.defaultsSkip && !facts.defaultsWrite &&
		!inRanges(r.id, facts.updated) {
		sr := setterSrule(r, pos, keys, values)
		sr.idx = len(pp.rules)
		pp.rules = append(pp.rules, sr)
		return sr, ""
	}
	switch {
	case !ok:
		return nil, reasonNotSecRule
	case inSkipWindow || facts.defaultsSkip:
		return nil, reasonSkipWindow
	case inRanges(r.id, facts.updated):
		return nil, reasonUpdated
	case !fastpath.Owns(rt.opName):
		return nil, reasonOperator
	}
	sr := &srule{id: r.id, seg: r.seg, pos: pos, negated: rt.negated, windows: window}
	if strings.Contains(rt.opArgs, "%{") {
		keys, ok := macroTXKeys(rt.opArgs)
		if !ok {
			return nil, reasonMacro
		}
		sr.txKeys = append(sr.txKeys, keys...)
		sr.argTX = keys
	}
	// Targets. Exclusions narrow what a rule reads: a screen that reads
	// the whole collection reads a superset, which is enough for a rule
	// that matches when one value does; a count is changed by them.
	excluded := map[string]bool{}
	for _, t := range rt.targets {
		if t.exclusion {
			excluded[t.name] = true
		}
	}
	countsSafe := !facts.targetsUpdateAll && !inRanges(r.id, facts.targetsUpdated) && !facts.runtimeTargets.mayName(r)
	var vars uint64
	// exclBits: per collection the rule reads, the slots that stand for
	// it (exclusions.go).
	exclBits := map[variables.RuleVariable]uint64{}
	stable, keyed := 0, 0 // whole stable collections read, and those with a plain key
	// The plain keys a trie rule reads, beside whole collections.
	var keys []varSlot
	for _, t := range rt.targets {
		if t.exclusion {
			continue
		}
		if t.name == "TX" {
			if t.key == "" {
				// The whole collection, or a regexp key: any write
				// may change it.
				return nil, reasonTarget
			}
			if t.count && (excluded["TX"] || !countsSafe) {
				return nil, reasonCount
			}
			key := strings.ToLower(t.key)
			sr.txKeys = append(sr.txKeys, key)
			sr.targets = append(sr.targets, starget{v: variables.TX, key: key, count: t.count, vi: -1})
			continue
		}
		v, ok := stableTargets[t.name]
		if !ok {
			return nil, reasonTarget
		}
		if !t.count {
			stable++
		}
		if t.count {
			if (t.keyed && t.key == "") || excluded[t.name] || !countsSafe {
				return nil, reasonCount
			}
			st := starget{v: v, key: lookupKey(v, t.key), count: true, vi: -1}
			if t.key == "" {
				bit, ok := pp.bit(v)
				if !ok {
					return nil, reasonSlots
				}
				st.vi = bits.TrailingZeros64(bit)
			}
			sr.targets = append(sr.targets, st)
			continue
		}
		if t.key != "" && v != variables.Args {
			// Read by key: a slot of its own once the rule is known
			// to be a trie rule (below).
			st := starget{v: v, key: lookupKey(v, t.key), vi: -1}
			keyed++
			sr.targets = append(sr.targets, st)
			keys = append(keys, varSlot{v: v, key: st.key})
			continue
		}
		bit, ok := pp.bit(v)
		if !ok {
			return nil, reasonSlots
		}
		st := starget{v: v, vi: bits.TrailingZeros64(bit)}
		if t.key != "" {
			st.key = lookupKey(v, t.key)
			keyed++
		}
		sr.targets = append(sr.targets, st)
		if v == variables.Args {
			// A trie rule reads ARGS as the three collections Coraza
			// joins into it (corazawaf.NewTransactionVariables), so that
			// the values of the query string and those of the body are
			// told apart (see memoized).
			bit = 0
			for _, a := range []variables.RuleVariable{variables.ArgsGet, variables.ArgsPost, variables.ArgsPath} {
				b, ok := pp.bit(a)
				if !ok {
					return nil, reasonSlots
				}
				bit |= b
			}
		}
		vars |= bit
		exclBits[v] |= bit
	}
	if sr.txKeys != nil && facts.defaultsWrite {
		return nil, reasonDefaultsTX
	}
	if sr.txKeys != nil {
		sr.adds = additionsOf(r, facts)
	}
	var names []string
	reset := false
	for _, a := range rt.actions {
		switch a.name {
		case "t":
			if a.value == "none" {
				sr.chain, names, reset = sr.chain[:0], names[:0], true
				continue
			}
			fn, ok := transform.Lookup(a.value)
			if !ok {
				return nil, reasonTransform
			}
			sr.chain, names = append(sr.chain, fn), append(names, strings.ToLower(a.value))
		case "multimatch":
			sr.multi = true
		}
	}
	if facts.defaultsTransform && !reset {
		return nil, reasonDefaults
	}
	op, ok := fastpath.Instance(rt.opName, rt.opArgs)
	if !ok {
		return nil, reasonNoInstance
	}
	sr.op = op
	// A rule that reads TX but whose argument has no macro is judged by
	// the same function in every transaction: it is made once, here.
	if judge, ok := fastpath.Judge(op); ok {
		sr.judge = judge
	} else if sr.txKeys == nil || !fastpath.JudgesIn(op) {
		return nil, reasonMacro
	}
	// Judged on its own, from its targets: those that read TX or count,
	// and those that read only some keys or are negated, for which the
	// whole collection (what the trie reads) would be a superset that
	// matches far more often than the rule.
	alone := sr.txKeys != nil || hasCount(sr.targets) || sr.negated || (stable > 0 && keyed == stable)
	if !alone {
		// A trie rule reads its plain keys as collections of their own
		// (the values of that key alone, as Coraza reads them:
		// REQUEST_HEADERS:User-Agent is not every header).
		for _, k := range keys {
			bit, ok := pp.slotBit(k)
			if !ok {
				if bit, ok = pp.bit(k.v); !ok {
					return nil, reasonSlots
				}
			}
			vars |= bit
			exclBits[k.v] |= bit
		}
	}
	sr.idx = len(pp.rules)
	pp.rules = append(pp.rules, sr)
	if alone {
		return sr, ""
	}
	// A trie rule: stable collections, whole or by plain key, no macro.
	// It keeps its targets and chain too, for when the screen judges it
	// on its own (a rule with skipAfter, to know where Coraza goes on).
	sr.vars = vars
	if excludable(r, facts) {
		sr.excl = exclusionsOf(exclBits)
	}
	chain := sr.chain
	// Coraza evaluates a multiMatch rule on the value as read and on every
	// value a transformation of its chain changed
	// (corazawaf.Rule.executeTransformationsMultimatch): the screen judges
	// it at the nodes of its path where the value changed.
	n := pp.root
	if sr.multi {
		n.rules = append(n.rules, sr)
	}
	for i, fn := range chain {
		n = n.child(names[i], fn, pp)
		if sr.multi {
			n.rules = append(n.rules, sr)
		}
	}
	sr.node = n
	if !sr.multi {
		n.rules = append(n.rules, sr)
	}
	return sr, ""
}

// lookupKey is key as Coraza looks it up in collection v: lower case, but
// for the ARGS collections, whose keys are case-sensitive
// (corazawaf.newRuleVariableParams).
func lookupKey(v variables.RuleVariable, key string) string {
	switch v {
	case variables.Args, variables.ArgsNames, variables.ArgsGet, variables.ArgsPost,
		variables.ArgsGetNames, variables.ArgsPostNames:
		return key
	}
	return strings.ToLower(key)
}

func hasCount(ts []starget) bool {
	for _, t := range ts {
		if t.count {
			return true
		}
	}
	return false
}

// unite gives the plan the union of the literals of the trie's rules
// whose operators a union stands in for (fastpath.Filtered), but those the
// prelude decides (phasePlan.initial) and the record rules judged from
// their list (records.go): no screen judges the former, and the literals
// of the higher paranoia levels' rules (one letter each, for some) would
// have the union report a literal at most bytes of a text. Snapshot
// builds it, once the prelude is known, or else the first screen of the
// plan (united): a VM's start builds each union once.
func (pp *phasePlan) unite() {
	var ops []plugintypes.Operator
	pp.union, pp.hitWords, pp.united = nil, 0, true
	for _, r := range pp.rules {
		if r.rec != nil && r.rec.on {
			continue // its slot is -1 (activateRecords)
		}
		r.slot = -1
		if r.node != nil && fastpath.Filtered(r.op) && (pp.initial == nil || pp.initial[r.idx] == undecided) {
			r.slot = int32(len(ops))
			ops = append(ops, r.op)
			r.confirm = fastpath.Confirm(r.op)
		}
	}
	if len(ops) != 0 {
		pp.union = fastpath.NewUnion(ops)
		pp.hitWords = (len(ops) + 63) / 64
	}
	pp.slotRules()
}

// slotRules splits each node's rules into those a screen judges one by
// one and those it reaches through the union's hits (node.plain,
// node.united), as the rules' slots are now. A rule without a slot, or
// negated (it matches where the union finds nothing), is plain.
func (pp *phasePlan) slotRules() {
	pp.bySlot = make([]*srule, pp.hitWords*64)
	for _, n := range pp.nodes {
		n.plain = make([][]*srule, len(n.byVar))
		n.united = make([][]*srule, len(n.byVar))
		n.unitedMask = make([][]uint64, len(n.byVar))
		for i, rs := range n.byVar {
			for _, r := range rs {
				if r.slot < 0 || r.negated {
					n.plain[i] = append(n.plain[i], r)
					continue
				}
				pp.bySlot[r.slot] = r
				n.united[i] = append(n.united[i], r)
				if n.unitedMask[i] == nil {
					n.unitedMask[i] = make([]uint64, pp.hitWords)
				}
				n.unitedMask[i][r.slot>>6] |= 1 << (r.slot & 63)
			}
		}
	}
}
