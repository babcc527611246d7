package filter

import (
	"strings"
	"testing"
)

// TestPlugin_perRoute: per_route_directives picks the rule set by the name
// of the route Envoy chose for the stream (xds.route_name), before
// per_authority_directives and default_directives.
func TestPlugin_perRoute(t *testing.T) {
	canary := func(status string) []string {
		return []string{"SecRuleEngine On", `SecRule REQUEST_HEADERS:X-Canary "@streq 1" "id:1,phase:1,deny,status:` + status + `"`}
	}
	config := configJSON(map[string]any{
		"directives_map":           map[string][]string{"base": canary("451"), "api": canary("452"), "admin": canary("453")},
		"default_directives":       "base",
		"per_authority_directives": map[string]string{"api.example.com": "api"},
		"per_route_directives":     map[string]string{"admin_route": "admin"},
	})
	cases := []struct {
		route, authority string
		status           int
	}{
		{"admin_route", "api.example.com", 453},
		{"admin_route", "www.example.com", 453},
		{"other_route", "api.example.com", 452},
		{"", "api.example.com", 452},
		{"other_route", "www.example.com", 451},
		{"", "www.example.com", 451},
	}
	forEachRunner(t, func(t *testing.T, r runner) {
		p, err := r.load(t, config)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		for _, c := range cases {
			out := p.do(t, exchange{route: c.route, authority: c.authority, headers: [][2]string{{"x-canary", "1"}}})
			if out.status != c.status {
				t.Errorf("route %q, authority %q: status %d, want %d", c.route, c.authority, out.status, c.status)
			}
		}
	})
}

// TestConfig_perRoute refuses a route entry that names no rule set, or no
// route, with a message naming it.
func TestConfig_perRoute(t *testing.T) {
	for _, c := range []struct {
		routes map[string]string
		want   string
	}{
		{map[string]string{"admin": "nope"}, `per_route_directives["admin"]: "nope" names no entry in directives_map; want one of "crs"`},
		{map[string]string{"": "crs"}, `per_route_directives: empty route name`},
	} {
		cfg := &Config{DirectivesMap: map[string][]string{"crs": {"SecRuleEngine On"}}, DefaultDirectives: "crs", PerRouteDirectives: c.routes}
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.routes, err, c.want)
		}
	}
}
