package preselect

import (
	"strconv"
	"strings"
)

// ruleText is what the index needs from one SecRule, read from the rule's
// raw text (types.RuleMetadata.Raw: the logical line, continuations
// joined). Coraza v3.8.1 does not expose a compiled rule's operator,
// targets or transformations, so they are parsed here the way its SecLang
// parser splits them (internal/seclang/rule_parser.go: parseActionOperator,
// cutQuotedString, ParseOperator, parseActions). A rule this parser reads
// differently from Coraza is at worst never dropped: its operator is then
// not found among the ones the rule set built (see screenable).
type ruleText struct {
	targets []target
	// opName is the operator's name, lower case, without '@' or '!@';
	// opArgs its argument text, as Coraza hands it to the operator's
	// factory.
	opName, opArgs string
	negated        bool
	actions        []action
}

// target is one entry of a rule's variable list. Most screens read the
// whole collection (a superset of what the rule reads), so the key only
// matters where a screen reads one key: TX variables and counts.
type target struct {
	name      string // upper case, e.g. ARGS
	count     bool   // &VAR
	exclusion bool   // !VAR:key
	// key is the key as written when it is a plain one (letters, digits,
	// '_', '-', '.'); keyed is set for any key, plain or not (a quoted
	// key, a /regexp/, an XPath).
	key   string
	keyed bool
}

// plainKey reports whether a key is one Coraza's variable parser keeps as
// it is written (no quotes, no regexp, no XPath, no '|').
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

type action struct {
	name  string // lower case
	value string
}

// parseSecRule parses "SecRule VARIABLES "OPERATOR" "ACTIONS"". ok is
// false for anything else (SecAction, SecMarker) or text it cannot split.
func parseSecRule(raw string) (ruleText, bool) {
	vars, op, actions, ok := splitSecRule(raw)
	if !ok {
		return ruleText{}, false
	}
	var rt ruleText
	if rt.targets, ok = parseTargets(vars); !ok {
		return ruleText{}, false
	}
	rt.opName, rt.opArgs, rt.negated = splitOperator(unescapeQuotes(op))
	if actions != "" {
		rt.actions = parseActions(actions)
	}
	return rt, true
}

// splitSecRule splits "SecRule VARIABLES "OPERATOR" "ACTIONS"" into its
// three arguments, without the quotes (the operator's escaped quotes kept
// as written), allocating nothing. ok is false for anything else.
func splitSecRule(raw string) (vars, op, actions string, ok bool) {
	dir, rest, ok := strings.Cut(strings.TrimSpace(raw), " ")
	if !ok || !strings.EqualFold(dir, "secrule") {
		return "", "", "", false
	}
	rest = strings.Trim(rest, " ")
	vars, rest, ok = strings.Cut(rest, " ")
	if !ok {
		return "", "", "", false
	}
	rest = strings.TrimLeft(rest, " ")
	op, rest, ok = cutQuoted(rest)
	if !ok {
		return "", "", "", false
	}
	rest = strings.TrimLeft(rest, " ")
	if rest != "" {
		if len(rest) < 2 || rest[0] != '"' || rest[len(rest)-1] != '"' {
			return "", "", "", false
		}
		actions = rest[1 : len(rest)-1]
	}
	return vars, op[1 : len(op)-1], actions, true
}

// cutQuoted returns the leading double-quoted string of s (quotes
// included) and what follows. A quote preceded by an odd number of
// backslashes is part of the string.
func cutQuoted(s string) (quoted, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	backslashes := 0
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\':
			backslashes++
		case s[i] == '"' && backslashes%2 == 0:
			return s[:i+1], s[i+1:], true
		default:
			backslashes = 0
		}
	}
	return "", "", false
}

// unescapeQuotes turns every \" into ".
func unescapeQuotes(s string) string {
	if !strings.Contains(s, `\"`) {
		return s
	}
	return strings.ReplaceAll(s, `\"`, `"`)
}

// splitOperator splits "@name args", "!@name args" or a bare pattern (an
// @rx) into the operator's name, argument and negation.
func splitOperator(op string) (name, args string, negated bool) {
	switch {
	case op == "" || op[0] != '@' && op[0] != '!':
		op = "@rx " + op
	case op == "!":
		op = "!@rx"
	case len(op) > 1 && op[0] == '!' && op[1] != '@':
		op = "!@rx " + op[1:]
	}
	head, tail, _ := strings.Cut(op, " ")
	head, args = strings.TrimSpace(head), strings.TrimSpace(tail)
	if strings.HasPrefix(head, "!") {
		negated = true
		head = head[1:]
	}
	return strings.ToLower(strings.TrimPrefix(head, "@")), args, negated
}

// parseTargets splits a variable list on '|', skipping over keys that are
// regular expressions (/.../) or quoted ('...'), which may hold '|'.
func parseTargets(s string) ([]target, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	var out []target
	for s != "" {
		var t target
		switch s[0] {
		case '!':
			t.exclusion = true
			s = s[1:]
		case '&':
			t.count = true
			s = s[1:]
		}
		i := 0
		for i < len(s) && (s[i] == '_' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z') {
			i++
		}
		if i == 0 {
			return nil, false
		}
		t.name = strings.ToUpper(s[:i])
		s = s[i:]
		if s != "" && s[0] == ':' {
			s = s[1:]
			t.keyed = true
			end := 0
			switch {
			case s != "" && s[0] == '/' && strings.IndexByte(s[1:], '/') >= 0:
				end = closing(s, '/')
			case s != "" && s[0] == '\'':
				end = closing(s, '\'')
			}
			if end < 0 {
				return nil, false
			}
			k := strings.IndexByte(s[end:], '|')
			if k < 0 {
				k = len(s) - end
			}
			if end == 0 && plainKey(s[:k]) {
				t.key = s[:k]
			}
			s = s[end+k:]
		}
		if s != "" {
			if s[0] != '|' {
				return nil, false
			}
			s = s[1:]
		}
		out = append(out, t)
	}
	return out, len(out) != 0
}

// closing returns the index just past the unescaped delimiter that closes
// the one at s[0], or -1.
func closing(s string, delim byte) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == delim {
			return i + 1
		}
	}
	return -1
}

// parseActions splits an action list on commas outside single quotes;
// a character after a backslash is never a separator.
func parseActions(s string) []action {
	// Every action but the last ends at a comma: sized once, instead of
	// grown by doubling (a CRS rule has a dozen actions or more).
	out := make([]action, 0, strings.Count(s, ",")+1)
	eachAction(s, func(name, value string) {
		out = append(out, action{name: strings.ToLower(name), value: value})
	})
	return out
}

// eachAction calls fn with each action of the list s, as parseActions
// splits it, its name as written (fn compares it with strings.EqualFold),
// allocating nothing.
func eachAction(s string, fn func(name, value string)) {
	start, colon := 0, -1
	inQuotes := false
	emit := func(end int) {
		key, val := s[start:end], ""
		if colon >= 0 {
			key, val = s[start:colon], s[colon+1:end]
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '\'' && val[len(val)-1] == '\'' {
			val = val[1 : len(val)-1]
		}
		fn(strings.TrimSpace(key), val)
	}
	for i := 1; i < len(s); i++ {
		if s[i-1] == '\\' {
			continue
		}
		switch c := s[i]; {
		case c == '\'':
			inQuotes = !inQuotes
		case inQuotes:
		case c == ':' && colon < 0:
			colon = i
		case c == ',':
			emit(i)
			start, colon = i+1, -1
		}
	}
	if s != "" {
		emit(len(s))
	}
}

// idList parses the ID arguments of SecRuleRemoveById and
// SecRuleUpdate*ById: IDs and ranges ("920100", "920100-920199"),
// separated by spaces or commas. ok is false when one cannot be read.
func idList(s string) (ids [][2]int, ok bool) {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '"' || r == '\'' }) {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, false
			}
		}
		ids = append(ids, [2]int{a, b})
	}
	return ids, true
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
