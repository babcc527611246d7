package envoy

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// TestUnmarshalYAML_location checks that errors point at the right field
// when multi-byte characters come before it (protojson counts columns in
// runes) and inside lists and maps.
func TestUnmarshalYAML_location(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "after multi-byte characters",
			yaml: "node:\n  id: \"wäfgüärd ✓\"\nstats_confg: {}\n",
			want: `x.yaml:3: stats_confg: unknown field "stats_confg"`,
		},
		{
			name: "in a list element",
			yaml: "static_resources:\n  clusters:\n  - name: a\n  - name: b\n    typ: STATIC\n",
			want: `x.yaml:5: static_resources.clusters[1].typ: unknown field "typ"`,
		},
		{
			name: "in a map value",
			yaml: "static_resources:\n  clusters:\n  - name: a\n    typed_extension_protocol_options:\n      k:\n        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        explicit_http_confg: {}\n",
			want: `x.yaml:7: static_resources.clusters[0].typed_extension_protocol_options.k.explicit_http_confg: unknown field "explicit_http_confg"`,
		},
		{
			name: "duplicate key",
			yaml: "node:\n  id: a\n  id: b\n",
			want: `x.yaml:3: node.id: duplicate key "id" (first on line 2)`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bootstrapv3.Bootstrap
			_, err := UnmarshalYAML("x.yaml", []byte(c.yaml), &b)
			if err == nil || err.Error() != c.want {
				t.Fatalf("got error\n\t%v\nwant\n\t%s", err, c.want)
			}
		})
	}
}
