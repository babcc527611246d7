package preselect

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Keys a kept rule is told to skip.
//
// A rule the screen keeps for one value of ARGS is evaluated by Coraza on
// every value of ARGS: for a JSON body of 500 values, each kept XSS rule
// transforms 500 values through six transformations and tries each.
// Coraza's transformation cache does not share that work between the
// rules: its key holds the value's position in the collection, and
// Coraza lists a collection's values in the order of a Go map, which
// differs from one listing to the next. So every kept rule misses the
// cache on nearly every value, and adds an entry per value and step: for
// one XSS attack in a 16 KB JSON body, 48,000 map operations.
//
// The screen knows which values of the collection the rule matched in
// the rule can match: the memo's answer for each value (memo.go) lists
// every rule of the batch that matches it, and a value without one is
// judged with the rule's own chain and operator, unless the screen judged
// the rule on it before the rule matched. It tells Coraza to skip the
// other keys, as ctl:ruleRemoveTargetById=ID;ARGS:/regex/ would
// (Transaction.RemoveRuleTargetByID with keyRx; Coraza tries each
// exception on each key in lower case, corazawaf.Transaction.GetField):
// literal prefixes for the keys' common branches, then one expression for
// the rest (skipSources). The rule matches the same values as before with
// the same captures, so its actions, matched data and log line are the
// same. Every value of a key that one matching value has stays: an
// exception drops a key, not a value.

const (
	// minKeyValues is the fewest values a collection must have for its
	// keys to be skipped: below it the regular expression costs about
	// what it saves.
	minKeyValues = 8
	// maxKeptKeys and maxKeyRunes bound the expression: the keys kept,
	// and the length of each (its nesting is that deep).
	maxKeptKeys = 16
	maxKeyRunes = 256
	// maxKeyRxCache is how many expressions a phase keeps compiled; the
	// cache starts over when full.
	maxKeyRxCache = 256
	// maxKeyPrefixes is the most literal prefixes a rule is told to skip
	// before the trie's expression (skipSources).
	maxKeyPrefixes = 4
)

// keyRxCache holds compiled expressions by their source, so that an
// attack that comes back does not compile its expressions again. Only
// screens use it, and they take turns (Index.stateMu).
type keyRxCache struct {
	rx map[string]*regexp.Regexp
}

// compile returns the compiled expression src.
func (c *keyRxCache) compile(src string) (*regexp.Regexp, error) {
	if rx, ok := c.rx[src]; ok {
		return rx, nil
	}
	rx, err := regexp.Compile(src)
	if err != nil {
		return nil, err
	}
	if c.rx == nil || len(c.rx) >= maxKeyRxCache {
		c.rx = make(map[string]*regexp.Regexp)
	}
	c.rx[src] = rx
	return rx, nil
}

// skipSources returns the expressions by which the keys of all (any
// case) other than kept (lower case, sorted, distinct) are skipped, in
// the order Coraza is to try them: first a literal prefix for each of the
// most common places where the keys leave the kept ones, then, for the
// keys those do not cover, notAmong(kept).
//
// Coraza tries a key against a rule's exceptions in turn until one
// matches. A literal prefix ("json.i" where the kept key is
// "json.contact.first_name") is a prefix test for Go (natively 36 ns a
// key, against 300-400 for the trie's expression), so the keys of a JSON
// body's common branches are skipped at that cost. A prefix is taken
// when it covers at least an eighth of the keys skipped, at most
// maxKeyPrefixes of them. Each prefix ends with the first rune where its
// keys leave the trie of the kept keys, so no kept key has it; a key that
// ends inside the trie is matched whole ("^json\.contact$").
func skipSources(all, kept []string) []string {
	root, nodes := trieOf(kept)
	type branch struct {
		text  string // the prefix, or the whole key
		whole bool
	}
	var branches []branch
	count := map[branch]int{}
	for _, k := range all {
		text, whole, ok := root.leaves(strings.ToLower(k))
		if !ok {
			continue // a kept key
		}
		b := branch{text, whole}
		if count[b] == 0 {
			branches = append(branches, b)
		}
		count[b]++
	}
	slices.SortStableFunc(branches, func(a, b branch) int { return count[b] - count[a] })
	skipped := 0
	for _, n := range count {
		skipped += n
	}
	var out []string
	left := skipped
	for _, b := range branches {
		if len(out) == maxKeyPrefixes || count[b]*8 < skipped {
			break
		}
		// The key is valid UTF-8: strings.ToLower, as Coraza lowers it,
		// writes U+FFFD for an invalid byte.
		src := `(?s)^` + regexp.QuoteMeta(b.text)
		if b.whole {
			src += `$`
		}
		out = append(out, src)
		left -= count[b]
	}
	if left > 0 {
		out = append(out, root.expression(nodes > maxBacktrackNodes))
	}
	return out
}

// leaves returns where key leaves the trie: its prefix up to the first
// rune no kept key has there, or the whole key when it ends at a node
// where no kept key ends; ok is false for a kept key.
func (root *keyNode) leaves(key string) (text string, whole, ok bool) {
	n := root
	for i, r := range key {
		c := n.child(r)
		if c == nil {
			_, size := utf8.DecodeRuneInString(key[i:])
			return key[:i+size], false, true
		}
		n = c
	}
	if n.end {
		return "", false, false
	}
	return key, true, true
}

// notAmong returns a regular expression that matches every string but
// those of keys, read whole. It walks the trie of the keys, a rune at a
// time: a string is not a key when it ends at a node where no key ends,
// goes on with a rune no key has there, or goes on past a key that no
// other key extends.
//
// Go's regular expressions read text as UTF-8 and take each byte of an
// invalid sequence as U+FFFD, so two keys that differ only in such bytes
// read the same: the trie is made of the runes as the expression reads
// them, and a string that reads as a key is never matched, whatever its
// bytes. That errs on the side of keeping a key.
func notAmong(keys []string) string {
	root, nodes := trieOf(keys)
	return root.expression(nodes > maxBacktrackNodes)
}

// trieOf returns the trie of keys, a rune at a time, and its size.
func trieOf(keys []string) (root *keyNode, nodes int) {
	root = &keyNode{}
	for _, k := range keys {
		n := root
		for _, r := range k {
			c := n.child(r)
			if c == nil {
				c = &keyNode{r: r}
				n.next = append(n.next, c)
				nodes++
			}
			n = c
		}
		n.end = true
	}
	return root, nodes
}

// maxBacktrackNodes is the largest trie notAmong writes for Go's
// backtracker; past it (some 500 instructions) Go would run the
// expression on its slowest matcher, and it is anchored at both ends for
// the one-pass one instead (see write).
const maxBacktrackNodes = 80

// expression is the expression of the trie at root, anchored at the
// start, and at the end too when whole.
func (root *keyNode) expression(whole bool) string {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	root.write(&b, whole)
	if whole {
		b.WriteString(`$`)
	}
	return b.String()
}

type keyNode struct {
	r    rune
	end  bool
	next []*keyNode
}

func (n *keyNode) child(r rune) *keyNode {
	for _, c := range n.next {
		if c.r == r {
			return c
		}
	}
	return nil
}

// write writes the alternatives by which a string that reached n is not
// a key. Anchored at the start only, the match ends where the string
// leaves the keys, and Go runs it with its backtracker; whole (anchored
// at both ends too), Go runs it one-pass, which reads the whole string:
// natively a third faster on keys of 20 bytes, on V8 3% slower on the
// bench's attacks (Wasm_ab, both orders), where it is tried on every key
// of a JSON body once per kept rule.
func (n *keyNode) write(b *strings.Builder, whole bool) {
	rest := `.`
	if whole {
		rest = `.+`
	}
	b.WriteString(`(?:`)
	if !n.end {
		b.WriteString(`$|`)
	}
	if len(n.next) == 0 {
		b.WriteString(rest + `)`)
		return
	}
	slices.SortFunc(n.next, func(x, y *keyNode) int { return int(x.r) - int(y.r) })
	b.WriteString(`[^`)
	for _, c := range n.next {
		fmt.Fprintf(b, `\x{%x}`, c.r)
	}
	b.WriteString(`]`)
	if whole {
		b.WriteString(`.*`)
	}
	for _, c := range n.next {
		fmt.Fprintf(b, `|\x{%x}`, c.r)
		c.write(b, whole)
	}
	b.WriteString(`)`)
}

// keptKeys returns, in lower case, sorted and distinct, the keys of kept,
// and whether it is worth skipping the other keys of all: the collection
// has at least minKeyValues values, some of them under a key not kept,
// and at most maxKeptKeys keys of at most maxKeyRunes runes each are
// kept.
func keptKeys(all, kept []string) ([]string, bool) {
	if len(all) < minKeyValues || len(kept) == 0 {
		return nil, false
	}
	lower := make([]string, 0, len(kept))
	for _, k := range kept {
		k = strings.ToLower(k)
		if utf8.RuneCountInString(k) > maxKeyRunes {
			return nil, false
		}
		lower = append(lower, k)
	}
	slices.Sort(lower)
	lower = slices.Compact(lower)
	if len(lower) > maxKeptKeys {
		return nil, false
	}
	for _, k := range all {
		if _, found := slices.BinarySearch(lower, strings.ToLower(k)); !found {
			return lower, true
		}
	}
	return nil, false
}
