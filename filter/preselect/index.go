package preselect

import (
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
}

type observed struct {
	id      int
	phase   types.RulePhase
	raw     string
	tags    []string
	secMark string
	seg     int // see Builder.segment
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
	b.rules = append(b.rules, o)
	if o.secMark != "" || hasAction(ruleActions(o.raw), "skipafter") {
		// The last operator built is this rule's when the rule has one
		// of this project's: Coraza builds a rule's operator while it
		// parses the rule, after every operator of the rules before it
		// and their chains.
		if rt, ok := parseSecRule(o.raw); ok && b.lastTrigger != nil && fastpath.Owns(rt.opName) {
			b.lastTrigger.boundary = true
		}
		b.segment++
	}
	b.lastTrigger = nil
}

// ruleActions returns the actions of a SecRule or SecAction text.
func ruleActions(raw string) []action {
	if rt, ok := parseSecRule(raw); ok {
		return rt.actions
	}
	dir, a, _ := strings.Cut(strings.TrimSpace(raw), " ")
	if !strings.EqualFold(dir, "secaction") {
		return nil
	}
	return parseActions(strings.Trim(strings.TrimSpace(a), `"`))
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
// and each file it included.
func (b *Builder) AddText(text string) { b.texts = append(b.texts, text) }

// Finish builds the index from what was observed. rulesInWAF is the
// number of rules the compiled WAF holds (experimental.WAFWithRules), used
// to check the configuration-time removals it accounted for.
func (b *Builder) Finish(rulesInWAF int) *Index {
	ix := newIndex(b.rules, scanDirectives(b.texts), rulesInWAF, b.segment)
	b.rules, b.texts = nil, nil
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

// asciiLower lower-cases ASCII letters only, so that offsets into the
// result are offsets into s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// scan adds the ctl removals of one directive text.
func (rr *runtimeRemovals) scan(text string) {
	lower := asciiLower(text)
	for _, kind := range []string{"ctl:ruleremovebyid=", "ctl:ruleremovebytag=", "ctl:ruleremovebymsg="} {
		for rest := lower; ; {
			i := strings.Index(rest, kind)
			if i < 0 {
				break
			}
			start := len(lower) - len(rest) + i + len(kind)
			rest = rest[i+len(kind):]
			end := start
			for end < len(text) && !strings.ContainsRune(",\"' \t\n\\", rune(text[end])) {
				end++
			}
			value := text[start:end]
			switch kind {
			case "ctl:ruleremovebyid=":
				ids, ok := idList(value)
				if !ok || len(ids) == 0 {
					rr.any = true
				}
				rr.ids = append(rr.ids, ids...)
			case "ctl:ruleremovebytag=":
				if value == "" || strings.Contains(value, "%{") {
					rr.any = true
				}
				rr.tags = append(rr.tags, value)
			default:
				rr.any = true
			}
		}
	}
}

// scanDirectives reads the directives and files of a rule set.
func scanDirectives(texts []string) directiveFacts {
	var f directiveFacts
	for _, text := range texts {
		text = strings.ReplaceAll(text, "\\\n", " ")
		f.runtime.scan(text)
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			dir, args, _ := strings.Cut(line, " ")
			args = strings.TrimSpace(args)
			switch strings.ToLower(dir) {
			case "secdefaultaction":
				for _, a := range parseActions(strings.Trim(args, `"`)) {
					switch a.name {
					case "t", "multimatch":
						f.defaultsTransform = true
					case "skip":
						f.defaultsSkip = true
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
				if onlyExclusions(targets) {
					continue
				}
				ids, ok := idList(idText)
				if !ok {
					f.updateAll = true
				}
				f.updated = append(f.updated, ids...)
			case "secruleupdatetargetbytag", "secruleupdatetargetbymsg":
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

// Index is, for one WAF, the rules a screen may remove from a transaction,
// grouped by phase.
type Index struct {
	// parts[phase][segment] are the screened rules of one stretch of a
	// phase (nil where there are none).
	parts [types.PhaseLogging + 1][]*phaseIndex
	// state is what the screens of the transaction in progress share.
	stateMu sync.Mutex
	state   txState
	// Skipped counts, per reason, the rules of the screened phases that
	// are always evaluated (see Reasons).
	Skipped map[string]int
}

// Droppable returns the IDs of the rules the screen may remove in phase,
// in rule-set order.
func (ix *Index) Droppable(phase types.RulePhase) []int {
	var ids []int
	for _, pi := range ix.parts[phase] {
		if pi != nil {
			for _, r := range pi.rules {
				ids = append(ids, r.id)
			}
		}
	}
	return ids
}

// phaseIndex holds one phase's screened rules and the trie of their
// transformation chains.
type phaseIndex struct {
	rules []*srule
	root  *node
	nodes []*node
	// vars are the collections the rules read; bit i of srule.vars and
	// node.vars stands for vars[i].
	vars []variables.RuleVariable
	// open[i] is the number of rules below node i (itself included): a
	// screen starts from a copy and counts down as rules are kept.
	open []int32
	pool sync.Pool
}

// srule is one rule the screen may remove.
type srule struct {
	id    int
	idx   int
	judge func(string) bool // the operator's decision (fastpath.Judge)
	vars  uint64
	node  *node // where its chain ends in the trie
	multi bool  // judged at every node of its path where the value changed
}

// node is one transformation chain prefix; the root is the value as read.
// A rule is judged at the node where its chain ends; a multiMatch rule at
// every node of its path, root included.
type node struct {
	name     string
	fn       plugintypes.Transformation
	parent   *node
	children []*node
	rules    []*srule
	vars     uint64 // the collections the rules below read
	idx      int
}

func (n *node) child(name string, fn plugintypes.Transformation, pi *phaseIndex) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	c := &node{name: name, fn: fn, parent: n, idx: len(pi.nodes)}
	pi.nodes = append(pi.nodes, c)
	n.children = append(n.children, c)
	return c
}

// Reasons a rule of a screened phase is always evaluated.
const (
	reasonNoID        = "no id (SecMarker)"
	reasonNotSecRule  = "SecAction or unreadable text"
	reasonOperator    = "operator not screened"
	reasonNegated     = "negated operator"
	reasonMacro       = "macro in the operator argument"
	reasonTarget      = "a target the screen does not read"
	reasonCount       = "a count target (&VAR)"
	reasonTransform   = "a transformation that is not this project's"
	reasonDefaults    = "inherits SecDefaultAction transformations"
	reasonSkipWindow  = "a skip of an earlier rule can land on it"
	reasonUpdated     = "changed by SecRuleUpdate*"
	reasonNoInstance  = "operator instance not found"
	reasonConfigWhole = "SecRuleUpdateTargetByTag/ByMsg adds targets"
)

// newIndex decides, for each observed rule of a screened phase, whether
// the screen may remove it, and builds the phase tries.
func newIndex(rules []observed, facts directiveFacts, rulesInWAF, segments int) *Index {
	ix := &Index{Skipped: map[string]int{}}
	removed := func(r observed) bool {
		if r.id == 0 {
			return false
		}
		if inRanges(r.id, facts.removedIDs) {
			return true
		}
		for _, t := range facts.removedTags {
			for _, rt := range r.tags {
				if rt == t {
					return true
				}
			}
		}
		return false
	}
	kept := rules[:0:0]
	for _, r := range rules {
		if !removed(r) {
			kept = append(kept, r)
		}
	}
	// When the count disagrees, some removal was not understood: a skip
	// may then land anywhere after its rule.
	skipToEnd := len(kept) != rulesInWAF
	for _, p := range screenedPhases {
		parts := make([]*phaseIndex, segments+1)
		ix.parts[p] = parts
		// Positions a skip:N of an earlier rule of this phase can land on.
		var inPhase []observed
		for _, r := range kept {
			if r.phase == p {
				inPhase = append(inPhase, r)
			}
		}
		window := make([]bool, len(inPhase))
		for i, r := range inPhase {
			for _, a := range ruleActions(r.raw) {
				if a.name != "skip" {
					continue
				}
				n, err := strconv.Atoi(a.value)
				if err != nil || skipToEnd {
					n = len(inPhase)
				}
				// The skip passes over the next n rules still in the
				// transaction; rules a ctl may have removed (while
				// leaving this one) do not count, so the window
				// reaches past them.
				for j, counted := i+1, 0; j < len(inPhase) && counted < n; j++ {
					window[j] = true
					if !facts.runtime.mayRemoveKeeping(inPhase[j], r) {
						counted++
					}
				}
			}
		}
		for i, r := range inPhase {
			pi := parts[r.seg]
			if pi == nil {
				pi = &phaseIndex{root: &node{}}
				pi.nodes = append(pi.nodes, pi.root)
			}
			reason := pi.add(r, window[i], facts)
			if reason != "" {
				ix.Skipped[reason]++
			} else {
				parts[r.seg] = pi
			}
		}
		for _, pi := range parts {
			if pi == nil {
				continue
			}
			pi.open = make([]int32, len(pi.nodes))
			for _, r := range pi.rules {
				for a := r.node; a != nil; a = a.parent {
					a.vars |= r.vars
					pi.open[a.idx]++
				}
			}
		}
	}
	return ix
}

// add indexes one rule, or returns why the screen must keep it.
func (pi *phaseIndex) add(r observed, inSkipWindow bool, facts directiveFacts) string {
	if r.id == 0 {
		return reasonNoID
	}
	if facts.updateAll {
		return reasonConfigWhole
	}
	rt, ok := parseSecRule(r.raw)
	switch {
	case !ok:
		return reasonNotSecRule
	case inSkipWindow || facts.defaultsSkip:
		return reasonSkipWindow
	case inRanges(r.id, facts.updated):
		return reasonUpdated
	case rt.negated:
		return reasonNegated
	case !fastpath.Owns(rt.opName):
		return reasonOperator
	case strings.Contains(rt.opArgs, "%{"):
		return reasonMacro
	}
	var vars uint64
	for _, t := range rt.targets {
		if t.exclusion {
			continue // a superset is read
		}
		if t.count {
			return reasonCount
		}
		v, ok := stableTargets[t.name]
		if !ok {
			return reasonTarget
		}
		vars |= pi.bit(v)
	}
	var chain []plugintypes.Transformation
	var names []string
	multi, reset := false, false
	for _, a := range rt.actions {
		switch a.name {
		case "t":
			if a.value == "none" {
				chain, names, reset = chain[:0], names[:0], true
				continue
			}
			fn, ok := transform.Lookup(a.value)
			if !ok {
				return reasonTransform
			}
			chain, names = append(chain, fn), append(names, strings.ToLower(a.value))
		case "multimatch":
			multi = true
		}
	}
	if facts.defaultsTransform && !reset {
		return reasonDefaults
	}
	op, ok := fastpath.Instance(rt.opName, rt.opArgs)
	if !ok {
		return reasonNoInstance
	}
	judge, ok := fastpath.Judge(op)
	if !ok {
		return reasonMacro
	}
	sr := &srule{id: r.id, idx: len(pi.rules), judge: judge, vars: vars, multi: multi}
	pi.rules = append(pi.rules, sr)
	// Coraza evaluates a multiMatch rule on the value as read and on every
	// value a transformation of its chain changed
	// (corazawaf.Rule.executeTransformationsMultimatch): the screen judges
	// it at the nodes of its path where the value changed.
	n := pi.root
	if multi {
		n.rules = append(n.rules, sr)
	}
	for i, fn := range chain {
		n = n.child(names[i], fn, pi)
		if multi {
			n.rules = append(n.rules, sr)
		}
	}
	sr.node = n
	if !multi {
		n.rules = append(n.rules, sr)
	}
	return ""
}

// bit returns the bit of collection v, adding it.
func (pi *phaseIndex) bit(v variables.RuleVariable) uint64 {
	for i, have := range pi.vars {
		if have == v {
			return 1 << i
		}
	}
	pi.vars = append(pi.vars, v)
	return 1 << (len(pi.vars) - 1)
}
