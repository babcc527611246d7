package e2e

import (
	"net/http"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wafguard/wafguard/envoy"
)

// perRouteConfig has a rule set per route: requests with X-Canary: 1 get
// 451 from the default set and 453 on the route named admin_route.
const perRouteConfig = `{"directives_map": {
  "base": ["SecRuleEngine On", "SecRule REQUEST_HEADERS:X-Canary \"@streq 1\" \"id:1,phase:1,deny,status:451\""],
  "admin": ["SecRuleEngine On", "SecRule REQUEST_HEADERS:X-Canary \"@streq 1\" \"id:1,phase:1,deny,status:453\""]},
 "default_directives": "base",
 "per_route_directives": {"admin_route": "admin"}}`

// TestEnvoy_perRoute: through Envoy, with the shipped bootstrap's route
// split in two named routes (/admin/ named admin_route, the rest
// default_route), per_route_directives applies the admin rule set on the
// admin route only: the plugin reads xds.route_name per stream.
func TestEnvoy_perRoute(t *testing.T) {
	needEnvoy(t)
	up := startUpstream(t, 0)
	e := launch(t, 1, up.addr, func(b *bootstrapv3.Bootstrap) error {
		if _, err := envoy.EditPlugins(b, func(pc *wasmv3.PluginConfig) error { return envoy.SetConfiguration(pc, perRouteConfig) }); err != nil {
			return err
		}
		return splitRoutes(b)
	}, nil)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/admin/users", 453},
		{"/api/users", 451},
		{"/", 451},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.Listen+c.path, nil)
		req.Header.Set("X-Canary", "1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", c.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
	if resp, err := client.Get("http://" + e.Listen + "/admin/users"); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /admin/users without the canary: %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}

// splitRoutes names the first listener's catch-all route default_route
// and puts a route named admin_route for the prefix /admin/ before it.
func splitRoutes(b *bootstrapv3.Bootstrap) error {
	f := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		return err
	}
	vh := hcm.GetRouteConfig().GetVirtualHosts()[0]
	catchAll := vh.GetRoutes()[0]
	catchAll.Name = "default_route"
	admin := proto.Clone(catchAll).(*routev3.Route)
	admin.Name = "admin_route"
	admin.Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/admin/"}}
	vh.Routes = append([]*routev3.Route{admin}, vh.Routes...)
	a, err := anypb.New(&hcm)
	if err != nil {
		return err
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	return nil
}
