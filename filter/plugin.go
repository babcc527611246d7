package filter

import (
	"errors"
	"strings"

	"github.com/corazawaf/coraza/v3"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm"
	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/wafguard/wafguard/filter/rules"
	"github.com/wafguard/wafguard/internal/httpsyntax"
)

// Plugin is one started plugin configuration on one VM: its compiled rule
// sets, which authority uses which, and its metric handles. Create it with
// NewPlugin; the zero value is unusable.
type Plugin struct {
	defaultSet *hostRules
	// byHost maps a lower-case host without port to its rule set.
	byHost map[string]*hostRules
	// byRoute maps an Envoy route name to its rule set; nil without
	// per_route_directives.
	byRoute map[string]*hostRules
	metrics *metrics
	ops     operability
	// logBuf is the scratch buffer of the JSON transaction log; a VM runs
	// one callback at a time, so one buffer per plugin is enough.
	logBuf []byte
	// held are the streams whose held headers are watched, by context id,
	// until holdSeen: a body callback came while headers were held
	// (hold.go).
	held     map[uint32]*stream
	holdSeen bool
	// wafKeys are the wafCache entries the plugin holds, released by
	// Done.
	wafKeys []string
	done    bool
}

// hostRules is what a request's authority selects: a compiled rule set and
// its custom deny reply (nil for the default empty-body reply).
type hostRules struct {
	name string
	waf  coraza.WAF
	deny *denyResponse
}

// NewPlugin validates the configuration (Config.Validate), compiles its
// rule sets (reusing the WAFs this VM compiled before for the same
// directives) and defines the metrics. It makes host calls, so call it from
// OnPluginStart, never from init(). The error names the key, or the rule
// set with Coraza's message.
func NewPlugin(cfg *Config) (*Plugin, error) {
	if cfg == nil {
		return nil, errors.New("filter: nil configuration; parse one with pluginconfig.Parse")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sets, err := buildRuleSets(cfg)
	if err != nil {
		return nil, err
	}
	// Validate checked that default_directives and every
	// per_authority_directives value name a rule set.
	byName := make(map[string]*hostRules, len(sets))
	for name, set := range sets {
		byName[name] = &hostRules{name: name, waf: set.waf, deny: cfg.ops.deny[name]}
	}
	p := &Plugin{
		defaultSet: byName[cfg.DefaultDirectives],
		byHost:     make(map[string]*hostRules, len(cfg.PerAuthorityDirectives)),
		ops:        cfg.ops,
	}
	for _, set := range sets {
		p.wafKeys = append(p.wafKeys, set.key)
	}
	for authority, name := range cfg.PerAuthorityDirectives {
		p.byHost[httpsyntax.AuthorityHost(authority)] = byName[name]
	}
	if len(cfg.PerRouteDirectives) != 0 {
		p.byRoute = make(map[string]*hostRules, len(cfg.PerRouteDirectives))
		for route, name := range cfg.PerRouteDirectives {
			p.byRoute[route] = byName[name]
		}
	}
	p.metrics = newMetrics(cfg.MetricLabels, cfg.ops.ruleTopN, cfg.Digest)
	proxywasm.LogInfo(startLine(sortedKeys(sets), cfg.Digest))
	return p, nil
}

// startLine is the info line a plugin writes when it has started: the
// CRS release it embeds, its rule sets and its configuration's digest.
func startLine(sets []string, digest string) string {
	line := "waf: started with OWASP CRS " + rules.CRSVersion + " (commit " + rules.CRSCommit + ") embedded"
	if p := rules.Plugins(); len(p) != 0 {
		line += ", with the CRS plugin files " + strings.Join(p, ", ")
	}
	line += "; rule sets: " + strings.Join(sets, ", ")
	if digest != "" {
		line += "; configuration " + digest
	}
	return line
}

// Done records that the plugin's configuration no longer runs here
// (Envoy replaced or removed it): its waf_filter.config_info gauge goes
// to 0, and it lets go of its compiled rule sets, which leave the VM's
// cache unless a newer plugin uses them too. The plugin context calls it
// from OnPluginDone; a second call does nothing.
func (p *Plugin) Done() {
	if p.done {
		return
	}
	p.done = true
	if c := p.metrics.configInfo; c != 0 {
		c.Record(0)
	}
	for _, key := range p.wafKeys {
		releaseWAF(key)
	}
	p.wafKeys = nil
}

// rulesFor returns the rule set for a stream: per_route_directives by
// the name of the route Envoy chose for it, then per_authority_directives
// by its :authority, then default_directives.
func (p *Plugin) rulesFor(authority string) *hostRules {
	if p.byRoute != nil {
		if r, ok := p.byRoute[getStringProperty(propRouteName)]; ok {
			return r
		}
	}
	if len(p.byHost) != 0 {
		if r, ok := p.byHost[httpsyntax.AuthorityHost(authority)]; ok {
			return r
		}
	}
	return p.defaultSet
}

// NewHttpContext returns the context of one HTTP stream; it implements the
// factory of types.PluginContext.NewHttpContext. The Coraza transaction is
// created when the request headers arrive.
func (p *Plugin) NewHttpContext(contextID uint32) types.HttpContext {
	return &stream{plugin: p, id: contextID}
}
