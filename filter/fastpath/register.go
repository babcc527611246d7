package fastpath

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// operators are this package's operators, under the names Coraza registers
// its own under (names are case-sensitive in rules).
var operators = []struct {
	name    string
	factory plugintypes.OperatorFactory
}{
	{"rx", newRx},
	{"pm", newPM},
	{"pmFromFile", newPMFromFile},
	{"pmf", newPMFromFile},
	{"contains", newContains},
	{"beginsWith", newBeginsWith},
	{"endsWith", newEndsWith},
	{"streq", newStreq},
	{"within", newWithin},
	{"detectSQLi", newDetectSQLi},
	{"detectXSS", newDetectXSS},
	{"validateByteRange", newByteRange},
	{"eq", newEq},
	{"ge", newGe},
	{"gt", newGt},
	{"le", newLe},
	{"lt", newLt},
}

// owned holds the lower-case names of operators.
var owned = func() map[string]bool {
	m := map[string]bool{}
	for _, o := range operators {
		m[strings.ToLower(o.name)] = true
	}
	return m
}()

// registered is set once Register has run: from then on the built-in
// operators are no longer used by WAFs compiled in this process.
var registered atomic.Bool

// Register replaces Coraza's @rx, @pm, @pmFromFile, @pmf, @contains,
// @beginsWith, @endsWith, @streq, @within, @detectSQLi and @detectXSS with
// this package's operators for every WAF compiled afterwards, and from then
// on records each operator it builds for Instance.
func Register() {
	registered.Store(true)
	for _, o := range operators {
		plugins.RegisterOperator(o.name, recording(strings.ToLower(o.name), o.factory))
	}
}

// Owns reports whether the operator name (lower case, without '@', e.g.
// "pm", "pmfromfile", "detectsqli") is one Register replaces with this
// package's code.
func Owns(name string) bool {
	return owned[name]
}

// Instance returns the operator this package built for the named operator (lower-case name
// without '@', e.g. "pm", "rx") and argument text, for a WAF compiled in this process after
// Register; false when none was built or the operator is not this package's.
//
// The argument is the text Coraza hands the operator: what follows the
// operator name in the rule, trimmed, with \" unescaped. When two compiles
// built operators for the same name and argument that may judge a value
// differently (@pmFromFile over data files with different contents),
// Instance returns false for them.
//
// It is meant for a screen that evaluates rules' operators itself, outside
// Coraza's rule evaluation, to tell which rules cannot match. Such a screen
// calls Evaluate with a TransactionState whose Capturing() is false and
// whose other methods may panic; every operator of this package touches
// nothing but Capturing() then, with one exception: an operator whose
// argument contains a macro ("%{") expands it from the transaction, so the
// screen never evaluates those.
func Instance(name, args string) (plugintypes.Operator, bool) {
	if !Owns(name) {
		return nil, false
	}
	return built.get(name, args)
}

// sameAsser is implemented by operators whose behaviour may differ between
// two builds for the same name and argument; for the others the argument
// alone decides.
type sameAsser interface {
	sameAs(plugintypes.Operator) bool
}

type instanceKey struct{ name, args string }

type instanceEntry struct {
	op plugintypes.Operator
	// ambiguous: two builds for this key may judge values differently.
	ambiguous bool
}

// instances remembers the operators the factories built. It is written
// while WAFs compile and read at run time, possibly concurrently.
type instances struct {
	mu sync.Mutex
	m  map[instanceKey]*instanceEntry
}

var built = instances{m: map[instanceKey]*instanceEntry{}}

func (in *instances) put(name, args string, op plugintypes.Operator) {
	k := instanceKey{name, args}
	in.mu.Lock()
	defer in.mu.Unlock()
	e, ok := in.m[k]
	if !ok {
		in.m[k] = &instanceEntry{op: op}
		return
	}
	if s, ok := e.op.(sameAsser); ok && !s.sameAs(op) {
		e.ambiguous = true
	}
	// Keep the newest build, so that an older WAF's compiled state can be
	// freed.
	e.op = op
}

func (in *instances) get(name, args string) (plugintypes.Operator, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	e, ok := in.m[instanceKey{name, args}]
	if !ok || e.ambiguous {
		return nil, false
	}
	return e.op, true
}

// recording wraps factory so that what it builds is remembered under name
// (lower case) and the argument.
func recording(name string, factory plugintypes.OperatorFactory) plugintypes.OperatorFactory {
	return func(opts plugintypes.OperatorOptions) (plugintypes.Operator, error) {
		op, err := factory(opts)
		if err != nil {
			return nil, err
		}
		built.put(name, opts.Arguments, op)
		return op, nil
	}
}

// Factories returns the factories Register installs, by the names Coraza
// registers operators under, each recording what it builds for Instance.
// A wrapper that installs them under the same names after Register (the
// rule preselection does) keeps Instance working.
func Factories() map[string]plugintypes.OperatorFactory {
	m := make(map[string]plugintypes.OperatorFactory, len(operators))
	for _, o := range operators {
		m[o.name] = recording(strings.ToLower(o.name), o.factory)
	}
	return m
}

// Judge returns the match decision of an operator this package built, as
// a function of the value alone: no capture, no memo, no transaction. It
// is what a screen asks about many values that no rule will see again, so
// it skips the memo that helps the rules themselves. ok is false for an
// operator whose argument has a macro (its decision needs a transaction)
// and for operators that are not this package's.
func Judge(op plugintypes.Operator) (judge func(value string) bool, ok bool) {
	switch o := op.(type) {
	case *rx:
		if o.filter == nil {
			return o.matches, true
		}
		return func(value string) bool { return o.filter.mayMatch(value) && o.matches(value) }, true
	case *byteRx:
		return o.matches, true
	case *pm:
		return o.judge, true
	case *strMatch:
		return o.matches, o.expand == nil
	case detectSQLi:
		return o.matches, true
	case detectXSS:
		return o.matches, true
	case *byteRange:
		return o.matches, true
	case *numeric:
		return o.matches, o.isFixed
	}
	return nil, false
}

// JudgesIn reports whether JudgeIn gives a decision for op: an operator
// this package built whose argument has no macro, or has one and is
// @eq, @ge, @gt, @le, @lt, @contains, @beginsWith, @endsWith, @streq or
// @within.
func JudgesIn(op plugintypes.Operator) bool {
	switch o := op.(type) {
	case *numeric:
		return true
	case *strMatch:
		return true
	default:
		_, ok := Judge(o)
		return ok
	}
}

// JudgeIn is Judge for an operator whose argument may hold macros: they
// are expanded from tx now, once, so the decision is the operator's as
// long as the variables the macros read keep their values.
func JudgeIn(op plugintypes.Operator, tx plugintypes.TransactionState) (judge func(value string) bool, ok bool) {
	switch o := op.(type) {
	case *numeric:
		if !o.isFixed {
			arg, _ := strconv.Atoi(o.arg.Expand(tx))
			cmp := o.cmp
			return func(value string) bool {
				v, _ := strconv.Atoi(value)
				return cmp(v, arg)
			}, true
		}
	case *strMatch:
		if o.expand != nil {
			arg, test := o.expand.Expand(tx), o.test
			return func(value string) bool { return test(value, arg) }, true
		}
	}
	return Judge(op)
}
