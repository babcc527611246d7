package filter

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"

	"github.com/wafguard/wafguard/filter/preselect"
)

// wafCache holds the WAFs compiled on this VM that a plugin uses, keyed by
// their directives joined with newlines (wafKey). A configuration update on
// the same VM (Envoy keeps Go globals across plugin-configuration updates,
// and starts the new plugin before the old one is done) reuses the WAFs
// whose directives did not change, and two plugins with the same rules on
// one VM share one WAF. wafUsers counts the plugins that hold each entry: a
// WAF leaves the cache, and Coraza's caches of its compiled operators are
// released (closeWAF), when the last plugin holding it is done
// (Plugin.Done). Without that every rule set pushed to a running Envoy
// would stay in each VM's heap until the VM goes away.
var (
	wafCache = map[string]coraza.WAF{}
	wafUsers = map[string]int{}
)

// holdWAF records one more plugin using the cached WAF of key.
func holdWAF(key string) { wafUsers[key]++ }

// releaseWAF records that a plugin no longer uses the WAF of key, and
// drops it from the cache when no plugin does. Transactions still running
// on it keep their rules: closeWAF only empties Coraza's caches.
func releaseWAF(key string) {
	if wafUsers[key]--; wafUsers[key] > 0 {
		return
	}
	delete(wafUsers, key)
	if waf, ok := wafCache[key]; ok {
		delete(wafCache, key)
		closeWAF(waf)
	}
}

// ruleSet is one compiled directives_map entry; key is its wafCache key.
type ruleSet struct {
	name string
	waf  coraza.WAF
	key  string
}

// buildRuleSets compiles every directives_map entry, in name order, reusing
// cached WAFs, and holds each (holdWAF) for the plugin, which releases them
// when it is done. A rule set that does not compile releases those held
// before it. It makes no host calls.
func buildRuleSets(cfg *Config) (map[string]ruleSet, error) {
	sets := make(map[string]ruleSet, len(cfg.DirectivesMap))
	for _, name := range sortedKeys(cfg.DirectivesMap) {
		waf, err := compileRuleSet(name, cfg.DirectivesMap[name], cfg.preselection())
		if err != nil {
			for _, set := range sets {
				releaseWAF(set.key)
			}
			return nil, err
		}
		key := wafKey(cfg.DirectivesMap[name], cfg.preselection())
		holdWAF(key)
		sets[name] = ruleSet{name: name, waf: waf, key: key}
	}
	return sets, nil
}

// CheckRuleSets compiles every rule set natively, without a VM and without
// host calls, as NewPlugin would (with or without the rule preselection, as
// rule_preselection says), and returns one error per rule set that does not
// compile, in name order, where NewPlugin stops at the first. It needs no
// Validate first, so a configuration checker (pluginconfig.Check) also
// compiles the rule sets of a configuration whose other keys it refuses.
func (c *Config) CheckRuleSets() []error {
	var errs []error
	for _, name := range sortedKeys(c.DirectivesMap) {
		if _, err := compileRuleSet(name, c.DirectivesMap[name], c.preselection()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// preselection is rule_preselection with its default, true.
func (c *Config) preselection() bool {
	return c.RulePreselection == nil || *c.RulePreselection
}

// compileRuleSet is the one way a rule set is compiled: compileWAF, with
// the error naming the rule set.
func compileRuleSet(name string, directives []string, withPreselection bool) (coraza.WAF, error) {
	waf, err := compileWAF(directives, withPreselection)
	if err != nil {
		return nil, fmt.Errorf("directives_map[%q]: invalid SecLang, fix or remove the directive: %w", name, err)
	}
	return waf, nil
}

// compileWAF returns the WAF for these directives, from the cache when it
// was compiled before on this VM. With withPreselection, the rule set also
// gets the preselection's index, and its operators run the screen
// (filter/preselect).
func compileWAF(lines []string, withPreselection bool) (coraza.WAF, error) {
	directives := strings.Join(lines, "\n")
	key := wafKey(lines, withPreselection)
	if waf, ok := wafCache[key]; ok {
		return waf, nil
	}
	if err := unavailableDirective(directives); err != nil {
		return nil, err
	}
	compiled := directives
	if fix := inMemoryLimitDirective(directives); fix != "" {
		compiled += "\n" + fix
	}
	cfg := coraza.NewWAFConfig().WithErrorCallback(newErrorLog().log).WithDebugLogger(newDebugLogger())
	if !withPreselection {
		waf, err := coraza.NewWAF(cfg.WithRootFS(rulesFS{}).WithDirectives(compiled))
		if err != nil {
			return nil, err
		}
		wafCache[key] = waf
		return waf, nil
	}
	waf, held, err := compilePreselected(cfg, compiled, true)
	if err == nil && !held {
		// A gate that rules were left out behind does not jump in every
		// transaction: compile them too.
		first := waf
		waf, _, err = compilePreselected(cfg, compiled, false)
		closeWAF(first)
	}
	if err != nil {
		return nil, err
	}
	wafCache[key] = waf
	return waf, nil
}

// wafKey is the wafCache key of a rule set.
func wafKey(lines []string, withPreselection bool) string {
	key := strings.Join(lines, "\n")
	if !withPreselection {
		key = "rule_preselection=false\n" + key
	}
	return key
}

// compilePreselected compiles the directives with the rule preselection;
// with leaveOut, without the rules the paranoia-level gates jump over in
// every transaction (preselect.PlanLeavingOut). held is false when a gate
// that rules were left out behind turns out not to: the WAF is then not
// the rule set's.
func compilePreselected(cfg coraza.WAFConfig, compiled string, leaveOut bool) (waf coraza.WAF, held bool, err error) {
	set := preselect.ReadRuleSet(compiled, rulesFS{})
	b := preselect.NewBuilder(set)
	var jumps *preselect.JumpPlan
	if leaveOut {
		jumps = preselect.PlanLeavingOut(set)
	} else {
		jumps = preselect.PlanJumps(set)
	}
	compiled = jumps.Directives(compiled)
	// A VM's linear memory keeps the heap's peak for the VM's whole life.
	// One collection once the texts read for the plan are garbage, one once
	// Coraza's parse is, before the index is built, and one once the
	// builder's work is, before the prelude's transaction, hold the start's
	// peak near what it keeps live (with admission.StartGCPercent between
	// them; docs/performance.md has the measurements).
	runtime.GC()
	b.Jumps(jumps.IDs(), jumps.ScreenedIDs())
	mentioned := mentionsResBodyProcessor(compiled)
	cfg = experimental.WAFConfigWithRuleObserver(cfg, b.Observe).WithRootFS(plannedFS{jumps: jumps, mentioned: &mentioned})
	b.Begin()
	waf, err = coraza.NewWAF(cfg.WithDirectives(compiled))
	b.End()
	if err != nil {
		return nil, false, err
	}
	runtime.GC()
	counted, ok := waf.(experimental.WAFWithRules)
	if !ok {
		return nil, false, errors.New("rule_preselection: this Coraza build does not report its rule count; set rule_preselection to false")
	}
	ix := b.Finish(counted.RulesCount())
	runtime.GC()
	// Without a prelude (err says why) every transaction evaluates the
	// opening of phase 1 itself.
	_, _ = ix.Snapshot(waf)
	if gates := jumps.Gates(); len(gates) != 0 && !ix.AlwaysJumps(gates) {
		return waf, false, nil
	}
	w := preludeWAF{WAF: waf, rawResponse: !mentioned}
	if ix.NeedsStart() {
		w.ix = ix
	}
	if w.ix != nil || w.rawResponse {
		waf = w
	}
	return waf, true, nil
}

// closeWAF releases what Coraza keeps for waf beyond its life (its
// compiled operators, shared by pattern with the other WAFs of the VM).
func closeWAF(waf coraza.WAF) {
	if p, ok := waf.(preludeWAF); ok {
		waf = p.WAF
	}
	if c, ok := waf.(experimental.WAFCloser); ok {
		_ = c.Close()
	}
}

// preludeWAF starts each transaction past the rule set's prelude: the
// rules that decide and write the same in every transaction, with the TX
// values they leave (preselect.Index.Start, docs/preselection.md), when ix
// is set; and with the plugin's response body processor (respbody.go)
// when rawResponse is.
type preludeWAF struct {
	coraza.WAF
	ix          *preselect.Index
	rawResponse bool
}

// NewTransaction implements coraza.WAF.
func (w preludeWAF) NewTransaction() types.Transaction {
	return w.start(w.WAF.NewTransaction())
}

// NewTransactionWithID implements coraza.WAF.
func (w preludeWAF) NewTransactionWithID(id string) types.Transaction {
	return w.start(w.WAF.NewTransactionWithID(id))
}

func (w preludeWAF) start(tx types.Transaction) types.Transaction {
	if w.ix != nil {
		w.ix.Start(tx)
	}
	if w.rawResponse {
		useRawResponse(tx)
	}
	return tx
}

// plannedFS is rulesFS with the marker jumps planned into its files (and
// the lines of the rules left out blank), that also notes whether a file
// Coraza reads names RES_BODY_PROCESSOR.
type plannedFS struct {
	rulesFS
	jumps *preselect.JumpPlan
	// mentioned is set when a file names RES_BODY_PROCESSOR
	// (mentionsResBodyProcessor).
	mentioned *bool
}

// ReadFile implements fs.ReadFileFS.
func (r plannedFS) ReadFile(name string) ([]byte, error) {
	data, ok := r.jumps.ReadFile(name)
	if !ok {
		var err error
		if data, err = (rulesFS{}).ReadFile(name); err != nil {
			return nil, err
		}
	}
	// The scan reads data in place: nothing writes it during the call.
	if mentionsResBodyProcessor(unsafe.String(unsafe.SliceData(data), len(data))) {
		*r.mentioned = true
	}
	return data, nil
}

// auditWriterName is the SecAuditLogType value that sends audit log entries
// to the proxy log.
const auditWriterName = "proxywasm"

func init() {
	// Registration only fills a map in Coraza; it makes no host call, so it
	// is allowed while the VM initialises.
	plugins.RegisterAuditLogWriter(auditWriterName, func() plugintypes.AuditLogWriter {
		return &proxyLogAuditWriter{}
	})
}

// proxyLogAuditWriter writes each audit log entry, formatted by
// SecAuditLogFormat (Native, the ModSecurity serial format, by default), as
// one info-level proxy log message. SecAuditLog (the file path) is ignored.
type proxyLogAuditWriter struct {
	formatter plugintypes.AuditLogFormatter
}

// Init implements plugintypes.AuditLogWriter.
func (w *proxyLogAuditWriter) Init(c plugintypes.AuditLogConfig) error {
	w.formatter = c.Formatter
	return nil
}

// Write implements plugintypes.AuditLogWriter.
func (w *proxyLogAuditWriter) Write(al plugintypes.AuditLog) error {
	if w.formatter == nil {
		return nil
	}
	b, err := w.formatter.Format(al)
	if err != nil {
		return fmt.Errorf("formatting the audit log entry: %w", err)
	}
	if len(b) != 0 {
		proxywasm.LogInfo(string(b))
	}
	return nil
}

// Close implements plugintypes.AuditLogWriter.
func (*proxyLogAuditWriter) Close() error { return nil }
