package filter

import (
	"fmt"
	"strings"
	"testing"
)

// XML bodies under the CRS's attribute inspection (tx.crs_xml_attr_inspect,
// which the product's setup turns on): rules target XML://@* as well as
// XML:/*, and when the inspection is off rule 901181 removes XML://@* from
// the attack families at run time (ctl:ruleRemoveTargetByTag=<tag>;XML://@*).
// The preselection must keep every rule Coraza would match on either.

// xmlPayloads are the values placed in XML bodies: attacks of the families
// the CRS inspects attributes for, and benign text.
var xmlPayloads = []struct{ name, value string }{
	{"sqli", "1' UNION SELECT password FROM users--"},
	{"rce", "c99 -wrapper sh,-c,curl google.com ."},
	{"rce-unix", ";cat /etc/passwd"},
	{"xss", "<script>alert(1)</script>"},
	{"lfi", "../../../../etc/shadow"},
	{"php", "<?php system($_GET['c']); ?>"},
	{"rfi", "http://203.0.113.9/shell.txt?"},
	{"benign", "a fine wool jacket, size M"},
}

// xmlEscape escapes a value for an attribute or element text.
func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// xmlPlacements put a value into a document: in an attribute, element
// text, a comment, a CDATA section, a nested element's attribute among
// others; pad is benign text put before it.
var xmlPlacements = []struct {
	name string
	doc  func(v, pad string) string
}{
	{"attribute", func(v, pad string) string {
		return `<?xml version="1.0"?><root><p>` + pad + `</p><a probe="` + xmlEscape(v) + `"></a></root>`
	}},
	{"text", func(v, pad string) string {
		return `<?xml version="1.0"?><root><p>` + pad + `</p><a>` + xmlEscape(v) + `</a></root>`
	}},
	{"comment", func(v, pad string) string {
		return `<?xml version="1.0"?><root><p>` + pad + `</p><!-- ` + strings.ReplaceAll(v, "--", "- -") + ` --><a/></root>`
	}},
	{"cdata", func(v, pad string) string {
		return `<?xml version="1.0"?><root><p>` + pad + `</p><a><![CDATA[` + v + `]]></a></root>`
	}},
	{"nested attribute", func(v, pad string) string {
		return `<?xml version="1.0"?><root id="1"><p>` + pad + `</p><b x="1" y="two"><c lang="en" q="` + xmlEscape(v) + `" z="3">t</c></b></root>`
	}},
}

// xmlRequests is every payload in every placement, small and with 16 KB
// of padding, under the XML media types the recommended configuration
// gives the XML processor.
func xmlRequests() []diffRequest {
	pads := []string{"", strings.Repeat("lorem ipsum dolor sit amet ", 600)}
	types := []string{"application/xml", "text/xml", "application/soap+xml"}
	var out []diffRequest
	i := 0
	for _, p := range xmlPayloads {
		for _, pl := range xmlPlacements {
			for k, pad := range pads {
				ct := types[i%len(types)]
				i++
				out = append(out, diffRequest{
					name:   fmt.Sprintf("xml/%s/%s/%d", p.name, pl.name, len(pad)),
					method: "POST", uri: "/api/xml",
					headers: [][2]string{{"Host", "example.com"}, {"User-Agent", "Mozilla/5.0"}, {"Accept", "*/*"}, {"Content-Type", ct}},
					body:    []byte(pl.doc(p.value, pads[k])),
				})
			}
		}
	}
	return out
}

// xmlAttrOff is a directive that turns the CRS's XML attribute inspection
// off after the product's setup turned it on.
const xmlAttrOff = `SecAction "id:1099001,phase:1,pass,nolog,t:none,setvar:tx.crs_xml_attr_inspect=0"`

// withAttrOff inserts xmlAttrOff after the setup include of directives.
func withAttrOff(directives []string) []string {
	var out []string
	for _, d := range directives {
		out = append(out, d)
		if d == "Include @crs-setup-conf" {
			out = append(out, xmlAttrOff)
		}
	}
	return out
}

// TestPreselection_xml compares the preselection against the full rule set
// on the XML bodies of xmlRequests, at paranoia levels 1 and 4 (every
// level with PRESELECT_FULL=1), with the CRS's attribute inspection on (as
// shipped) and off.
func TestPreselection_xml(t *testing.T) {
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	levels := []int{1, 4}
	if preselectFull() {
		levels = []int{1, 2, 3, 4}
	}
	reqs := xmlRequests()
	for _, pl := range levels {
		for _, attr := range []bool{true, false} {
			directives := crsLevelDirectives(pl)
			if !attr {
				directives = withAttrOff(directives)
			}
			t.Run(fmt.Sprintf("pl%d/attributes=%v", pl, attr), func(t *testing.T) {
				on, off := diffWAFs(t, directives...)
				st := newDiffStats()
				for i := range reqs {
					compareOne(t, on, off, &reqs[i], st)
					if t.Failed() && st.requests > 50 {
						break
					}
				}
				st.log(t)
				st.check(t)
			})
		}
	}
}

// TestXML_attributeInspection: as shipped, an attack in an XML attribute
// value is blocked like one in element text; with the inspection turned
// off in the operator's directives, the published bypasses (SQL injection
// and a shell command in an attribute) pass again, while rules that read
// the raw body still catch some other attribute attacks, and attacks in
// text are blocked; benign XML passes either way.
func TestXML_attributeInspection(t *testing.T) {
	quietLogs(t)
	discardMatchLines(t)
	_, reset := startPluginWith(t, phaseConfig)
	defer reset()
	for _, attr := range []bool{true, false} {
		directives := crsDirectives
		if !attr {
			directives = withAttrOff(directives)
		}
		on, _ := diffWAFs(t, directives...)
		for _, p := range xmlPayloads {
			for _, pl := range xmlPlacements[:2] {
				r := diffRequest{method: "POST", uri: "/api/xml",
					headers: [][2]string{{"Host", "example.com"}, {"User-Agent", "Mozilla/5.0"}, {"Accept", "*/*"}, {"Content-Type", "application/xml"}},
					body:    []byte(pl.doc(p.value, ""))}
				got := runTrace(on, &r, nil).interruption
				blocked := strings.Contains(got, "rule=949110")
				want := p.name != "benign" && (attr || pl.name == "text")
				if !attr && pl.name == "attribute" && p.name != "sqli" && p.name != "rce" && p.name != "benign" {
					continue // the raw body's rules may or may not see it
				}
				if blocked != want {
					t.Errorf("attribute inspection %v, %s in %s: interruption %q, want blocked %v", attr, p.name, pl.name, got, want)
				}
			}
		}
	}
}
