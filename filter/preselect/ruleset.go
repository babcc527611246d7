package preselect

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/corazawaf/coraza/v3/types"
	"github.com/wafguard/wafguard/internal/scratch"
)

// The rule set's text, read once.
//
// Every compile-time stage works on what ReadRuleSet reads: the rule
// set's directives and each file they Include, in the order Coraza's
// SecLang parser reads them (internal/seclang, Parser.parseString and
// FromFile), with its line joining (eachLine). One pass gives:
//
//   - items: the top-level rules (with their chains' extent, ID, phase,
//     skipAfter marker, paranoia-level gate), the markers, and the blank
//     or comment lines a jump may take, in order: what the jump planner
//     (jumps.go, screenedjumps.go) and the rules left out of the compile
//     (leftout.go) work on;
//   - chains: by the text of each top-level rule, the texts of its
//     chained rules, which the Builder turns into what each rule may
//     write in TX (writes.go) and into links (links.go);
//   - facts: what the directives say beyond the rules (SecDefaultAction,
//     SecRuleUpdate*, SecRuleRemove*, the removals a ctl may make), which
//     every stage consults before it trusts a rule's own text.
//
// The texts are then rewritten in one place (rewrite.go, JumpPlan) before
// Coraza compiles them; nothing reads them again. A rule set the reader
// cannot read as Coraza will (a rule it cannot split, a phase it cannot
// parse, an Include it cannot follow) gets no jumps, leaves nothing out,
// and the Builder screens none of its rules (Failed).

// jitem is one thing in the rule set's order, as the reader reads it: a
// top-level rule, a marker, or a line a jump could take.
type jitem struct {
	kind  jkind
	phase types.RulePhase // jRule
	mark  string          // jMarker; jRule: the marker of its skipAfter
	file  string          // jFree, jRule
	line  int             // jFree: the line's index in its text
	id    int             // jRule
	// first and last are, for a jRule, the indexes in its text of the
	// rule's first line and of its chain's last one; split, that its
	// chain goes on past an Include, so that its lines are not all in
	// that text (it is never left out).
	first, last int
	split       bool
	// gate is, for a paranoia-level gate, the level N of
	//	SecRule TX:DETECTION_PARANOIA_LEVEL "@lt N" "...,skipAfter:MARK"
	// which jumps to mark below level N.
	gate int
	// barrier: jRule, a rule the screen may not be able to judge, which
	// ends a screened jump's reach (screenedjumps.go); known once
	// RuleSet.barrier has read the rule (a gate is none).
	barrier, known bool
}

type jkind uint8

const (
	jRule jkind = iota
	jMarker
	jFree
)

// RuleSet is a rule set's text as ReadRuleSet read it.
type RuleSet struct {
	fsys  fs.FS
	items []jitem
	reads map[string]int
	// data is what each file held, nil once planned (dropTexts): the
	// texts are then the plan's, or with no plan Coraza's to read again.
	data  map[string][]byte
	ids   map[int]bool
	dupID bool // an ID is given to two rules
	// directives is the rule set's own text; lineStarts are the offsets
	// of each line of a text (RuleSet.ruleText).
	directives string
	lineStarts map[string][]int
	// lineBuf joins the continued lines of the rule ruleText reads.
	lineBuf   []byte
	lastRule  int // the index in items of the last top-level rule
	chainOpen bool
	depth     int
	failed    bool
	// level is the highest paranoia level a setvar of the rule set
	// writes as a number (1 when none does, the CRS's default).
	level int
	// facts are what the directives say beyond the rules; chains the
	// chained rules of each top-level rule, by its text; open is the
	// entry of chains whose chain the current text has open, nil when
	// none.
	facts  directiveFacts
	chains map[string]*ruleChain
	open   *ruleChain
}

// ReadRuleSet reads the directives, and the files they include from fsys,
// as Coraza will when it compiles them.
func ReadRuleSet(directives string, fsys fs.FS) *RuleSet {
	s := &RuleSet{fsys: fsys, reads: map[string]int{}, data: map[string][]byte{}, ids: map[int]bool{}, level: 1,
		directives: directives, chains: map[string]*ruleChain{}}
	s.text(directives, "", "")
	return s
}

// Failed reports whether the rule set could not be read as Coraza will
// read it: nothing may then be planned or screened by what it says.
func (s *RuleSet) Failed() bool { return s.failed }

// text reads one text the way Coraza's parser does (eachLine). A blank or
// comment line outside a directive is free for a jump; of a run of them,
// the planner keeps maxFree.
func (s *RuleSet) text(data, file, dir string) {
	s.removals(data)
	// What a chain writes is followed within one text: a chain that an
	// Include interrupts, or that the text ends open, may write anything
	// (chainWrites).
	outer := s.open
	s.open = nil
	free, last := 0, -2
	eachLineAt(data, func(l string, first, last int) bool {
		s.directive(l, file, dir, first, last)
		return !s.failed
	}, func(i int) {
		if i != last+1 {
			free = 0
		}
		last = i
		// A line between a chain's rules is not free: a rule put there
		// would join the chain.
		if free < maxFree && !s.chainOpen {
			s.items = append(s.items, jitem{kind: jFree, file: file, line: i})
			free++
		}
	})
	if s.open != nil {
		s.open.any = true
	}
	s.open = outer
}

// directive reads one directive of file, on its lines first to last: an
// Include is read in place, a rule or marker becomes an item, any other
// directive may add to the facts.
func (s *RuleSet) directive(l, file, dir string, first, last int) {
	name, opts, _ := strings.Cut(l, " ")
	if len(opts) >= 3 && opts[0] == '"' && opts[len(opts)-1] == '"' {
		opts = strings.Trim(opts, `"`)
	}
	var it jitem
	var actions string
	switch {
	case strings.EqualFold(name, "include"):
		if s.chainOpen {
			s.items[s.lastRule].split = true
		}
		if s.open != nil {
			// The chain may go on in the included file.
			s.open.any = true
		}
		s.include(strings.Clone(opts), dir)
		return
	case strings.EqualFold(name, "secmarker"):
		s.chainOpen = false
		s.open = nil
		s.items = append(s.items, jitem{kind: jMarker, mark: strings.Clone(opts)})
		return
	case strings.EqualFold(name, "secrule"):
		vars, op, acts, ok := splitSecRule(l)
		if !ok {
			s.failed = true
			return
		}
		child := s.chainOpen
		s.chainOpen = false
		eachAction(acts, func(name, _ string) {
			if strings.EqualFold(name, "chain") {
				s.chainOpen = true
			}
		})
		s.chain(l, child)
		if child {
			s.chained(file, last)
			return
		}
		actions = acts
		if level, ok := strings.CutPrefix(op, "@lt "); ok && strings.EqualFold(vars, "TX:DETECTION_PARANOIA_LEVEL") {
			if n, err := strconv.Atoi(strings.TrimSpace(level)); err == nil && n > 0 {
				it.gate = n
			}
		}
	case strings.EqualFold(name, "secaction"):
		if s.chainOpen {
			// Coraza appends it to the open chain.
			s.chainOpen = false
			s.chain(l, true)
			s.chained(file, last)
			return
		}
		s.chain(l, false)
		actions = opts
	default:
		s.fact(name, l)
		return
	}
	it.kind, it.phase = jRule, types.PhaseRequestBody
	it.file, it.first, it.last = file, first, last
	eachAction(actions, func(name, value string) {
		switch {
		case strings.EqualFold(name, "phase"):
			ph, err := types.ParseRulePhase(strings.Trim(value, `'"`))
			if err != nil {
				s.failed = true
			}
			it.phase = ph
		case strings.EqualFold(name, "id"):
			if n, err := strconv.Atoi(strings.Trim(value, `'"`)); err == nil {
				if s.ids[n] {
					s.dupID = true
				}
				s.ids[n] = true
				it.id = n
			}
		case strings.EqualFold(name, "skipafter"):
			it.mark = strings.Clone(strings.Trim(value, `'"`))
		case strings.EqualFold(name, "setvar"):
			k, v, _ := strings.Cut(strings.Trim(value, `'"`), "=")
			if !strings.EqualFold(k, "tx.detection_paranoia_level") && !strings.EqualFold(k, "tx.blocking_paranoia_level") {
				break
			}
			if n, err := strconv.Atoi(v); err == nil && n > s.level {
				s.level = n
			}
		}
	})
	if it.mark == "" {
		it.gate = 0
	}
	it.known = it.gate != 0
	s.lastRule = len(s.items)
	s.items = append(s.items, it)
}

// chain adds the rule text l, a chained rule when child is set, to
// chains. A chained rule whose starter is in another text belongs to no
// entry: its starter's entry may write anything.
func (s *RuleSet) chain(l string, child bool) {
	if child {
		if s.open != nil {
			s.open.links = append(s.open.links, strings.Clone(l))
			if !s.chainOpen {
				s.open = nil
			}
		}
		return
	}
	e := s.chains[l]
	if e == nil {
		e = &ruleChain{}
		s.chains[strings.Clone(l)] = e
	} else {
		e.shared = true
	}
	s.open = nil
	if s.chainOpen {
		s.open = e
	}
}

// chained adds a chained rule of file, ending on line last, to the last
// top-level rule.
func (s *RuleSet) chained(file string, last int) {
	r := &s.items[s.lastRule]
	if r.file != file {
		r.split = true
	}
	r.last = last
}

// barrier reports whether the rule items[k] is a barrier, reading it the
// first time it is asked (most rules never are: those of the phases a
// screened jump does not reach, those the prelude removes).
func (s *RuleSet) barrier(k int) bool {
	it := &s.items[k]
	if !it.known {
		s.ruleText(*it, func(d string) {
			// The parsed rule shares the scan's line buffer: it is
			// judged here, during the call, and not kept.
			it.barrier = !screenable(parseRule(d))
		})
		it.known = true
	}
	return it.barrier
}

// dropTexts lets go of the texts read and what ruleText kept of them.
func (s *RuleSet) dropTexts() {
	s.data, s.lineStarts, s.lineBuf = nil, nil, nil
}

// ruleText calls fn with the text of the rule it (without its chain),
// valid only during the call.
func (s *RuleSet) ruleText(it jitem, fn func(string)) {
	data := s.directives
	if it.file != "" {
		b := s.data[it.file]
		data = unsafe.String(unsafe.SliceData(b), len(b))
	}
	starts := s.lineStarts[it.file]
	if starts == nil {
		starts = []int{0}
		for i := 0; i < len(data); i++ {
			if data[i] == '\n' {
				starts = append(starts, i+1)
			}
		}
		if s.lineStarts == nil {
			s.lineStarts = map[string][]int{}
		}
		s.lineStarts[it.file] = starts
	}
	eachLineIn(&s.lineBuf, data[starts[it.first]:], func(d string, _, _ int) bool {
		fn(d)
		return false
	}, nil)
}

// include reads an Included file, or each file a pattern matches, as
// Coraza's Parser.FromFile does.
func (s *RuleSet) include(path, dir string) {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > 100 || s.fsys == nil {
		s.failed = true
		return
	}
	var files []string
	glob := strings.Contains(path, "*")
	if glob {
		var err error
		if files, err = fs.Glob(s.fsys, path); err != nil {
			s.failed = true
			return
		}
	} else {
		files = []string{path}
	}
	for _, f := range files {
		f = strings.TrimSpace(f)
		if !glob && !strings.HasPrefix(f, "/") {
			f = filepath.Join(dir, f)
		}
		data, err := fs.ReadFile(s.fsys, f)
		if err != nil {
			s.failed = true
			return
		}
		s.reads[f]++
		s.data[f] = data
		// data is this scan's own copy and is never written, so the
		// text can share it.
		s.text(unsafe.String(unsafe.SliceData(data), len(data)), f, filepath.Dir(f))
		if s.failed {
			return
		}
	}
}

// checkJumps finds the planned jumps (ids) among the compiled rules and
// returns those that would change what the rule set decides: a jump must
// land on a marker of its name, pass over nothing but markers and rules
// of other phases, and lie outside every skip of its phase. With a
// SecDefaultAction that adds actions to every rule, or a ctl that may
// remove markers, no jump holds.
//
// removed are the rules every transaction goes without (the prelude's):

// tags returns the tags of the rule it.
func (s *RuleSet) tags(it jitem) []string {
	var tags []string
	s.ruleText(it, func(d string) {
		_, _, actions, ok := splitSecRule(d)
		if !ok {
			actions, _ = secActionText(d)
		}
		eachAction(actions, func(name, value string) {
			if strings.EqualFold(name, "tag") {
				tags = append(tags, strings.Clone(strings.Trim(value, `'"`)))
			}
		})
	})
	return tags
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

// chainWrites returns, by the text of each top-level rule (what the rule
// observer sees as RuleMetadata.Raw), what that rule and its chained
// rules may write in TX, and the texts of its chained rules. Two rules
// with the same text share one entry, the union of both. known holds the
// rules to answer for, parsed already, by their text: the compiled ones
// (not those left out of the compile, which no one asks about); nil
// answers for every rule read, parsing each. The entries are new: the
// rule set stays as read.
func (s *RuleSet) chainWrites(known map[string]*parsedRule) map[string]*ruleChain {
	entry := func(e *ruleChain, p parsedRule) *ruleChain {
		c := &ruleChain{links: e.links, shared: e.shared, txWrites: txWrites{any: e.any}}
		c.add(writesOf(p))
		for _, l := range e.links {
			c.add(writesOf(parseRule(l)))
		}
		return c
	}
	if known == nil {
		out := make(map[string]*ruleChain, len(s.chains))
		for raw, e := range s.chains {
			out[raw] = entry(e, parseRule(raw))
		}
		return out
	}
	out := make(map[string]*ruleChain, len(known))
	for raw, p := range known {
		if e := s.chains[raw]; e != nil {
			out[raw] = entry(e, *p)
		}
	}
	return out
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
	// engineNotOn: the last SecRuleEngine directive says DetectionOnly
	// or Off, so no rule interrupts a transaction (prelude guards).
	engineNotOn bool
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
	// idCols and tagCols are, for removals of targets, the collection
	// each entry of ids and tags removes a target of (upper case: XML
	// for XML://@*), "" when it could not be read.
	idCols, tagCols []string
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
		col := ""
		if what != "" {
			var tgt string
			value, tgt, _ = strings.Cut(value, ";")
			col = targetCollection(tgt)
		}
		switch kind {
		case "byid=":
			ids, ok := idList(value)
			if !ok || len(ids) == 0 {
				rr.any = true
			}
			rr.ids = append(rr.ids, ids...)
			for range ids {
				rr.idCols = append(rr.idCols, col)
			}
		case "bytag=":
			if value == "" || strings.Contains(value, "%{") {
				rr.any = true
			}
			rr.tags = append(rr.tags, value)
			rr.tagCols = append(rr.tagCols, col)
		default:
			rr.any = true
		}
	}
}

// removals adds the ctl removals of one text to the facts. It reads the
// text as written, comments too, for any ctl that names a removal, in
// any case (runtimeRemovals.scan); a line continued with a backslash is
// joined first.
func (s *RuleSet) removals(text string) {
	if strings.Contains(text, "\\\n") {
		text = strings.ReplaceAll(text, "\\\n", " ")
	}
	s.facts.runtime.scan(text, "")
	s.facts.runtimeTargets.scan(text, "target")
}

// fact adds to the facts what the directive l, named name, says, when it
// is one that changes rules already read or yet to come.
func (s *RuleSet) fact(name, l string) {
	f := &s.facts
	_, args, _ := strings.Cut(l, " ")
	args = strings.TrimSpace(args)
	switch factDirective(name) {
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
			return
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
		// args may be in the line buffer of a continued directive.
		f.removedTags = append(f.removedTags, strings.Clone(strings.Trim(args, `"'`)))
	case "secruleengine":
		f.engineNotOn = !strings.EqualFold(strings.Trim(args, `"'`), "on")
	}
}

// factDirective returns, in lower case, the directive dir names when
// fact reads it, "" for any other.
func factDirective(dir string) string {
	for _, d := range []string{"secdefaultaction", "secruleupdateactionbyid", "secruleupdatetargetbyid",
		"secruleupdatetargetbytag", "secruleupdatetargetbymsg", "secruleremovebyid", "secruleremovebytag", "secruleengine"} {
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

// targetCollection is the collection of a ctl target removal's target
// (XML for XML://@*, ARGS for ARGS:id), upper case; "" when it is not a
// plain collection name, or has a macro.
func targetCollection(t string) string {
	name, _, _ := strings.Cut(t, ":")
	name = strings.TrimSpace(name)
	if name == "" || strings.Contains(t, "%{") {
		return ""
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_') {
			return ""
		}
	}
	return strings.ToUpper(name)
}

// removesFrom reports whether a removal of targets of collection rem ("":
// unread) may remove a target of collection col. Coraza built for
// multiphase evaluation turns a removal of ARGS into ARGS_GET and
// ARGS_POST, and of ARGS_NAMES into their names' collections.
func removesFrom(rem, col string) bool {
	switch {
	case rem == "" || rem == col:
		return true
	case rem == "ARGS":
		return col == "ARGS_GET" || col == "ARGS_POST"
	case rem == "ARGS_NAMES":
		return col == "ARGS_GET_NAMES" || col == "ARGS_POST_NAMES"
	}
	return false
}

// mayChangeCount reports whether a removal of targets may change what a
// count of collection col (upper case) counts in rule r: one that may
// name r and removes a target of col, or of a collection it could not
// read. Removing XML://@* from a rule changes no count of its headers.
func (rr runtimeRemovals) mayChangeCount(r observed, col string) bool {
	if rr.any {
		return true
	}
	for i, rg := range rr.ids {
		if r.id >= rg[0] && r.id <= rg[1] && removesFrom(rr.idCols[i], col) {
			return true
		}
	}
	for i, tag := range rr.tags {
		if slices.Contains(r.tags, tag) && removesFrom(rr.tagCols[i], col) {
			return true
		}
	}
	return false
}
