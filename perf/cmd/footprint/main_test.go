package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestRun_bad(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-top", "0"}, 2, "usage"},
		{[]string{"extra"}, 2, "usage"},
		{[]string{"-wasm", "/nonexistent/main.wasm"}, 1, "go run mage.go build"},
		{[]string{"-wasm", "main_test.go"}, 1, "not a WebAssembly module"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// TestRun reads the build's module and compiles the CRS natively: the
// tables are there, the groups add up to the code, and the start keeps
// live memory in this project's and Coraza's packages.
func TestRun(t *testing.T) {
	if _, err := os.Stat("../../../build/main.wasm"); err != nil {
		t.Skipf("no build/main.wasm (go run mage.go build): %v", err)
	}
	t.Chdir("../../..")
	var out, errOut bytes.Buffer
	if code := run([]string{"-top", "5"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{"| code by group | MB | share |", "| this project |", "| Coraza |", "| Go runtime |",
		"| code by package (top 5) |", "| runtime |", "## The start, natively", "| github.com/wafguard/wafguard/filter/fastpath |"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in:\n%s", want, s)
		}
	}
	if strings.Count(s, "\n| ") > 40 {
		t.Errorf("-top 5 printed more rows than the sections, the groups and 2 x 5 packages:\n%s", s)
	}
}

func TestGroup(t *testing.T) {
	for pkg, want := range map[string]string{
		"github.com/wafguard/wafguard/filter":               "this project",
		"github.com/corazawaf/coraza/v3/internal/seclang":   "Coraza",
		"github.com/corazawaf/libinjection-go":              "Coraza's other modules (libinjection, regexp, JSON, Aho-Corasick)",
		"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm": "proxy-wasm Go SDK",
		"internal/runtime/maps":                             "Go runtime",
		"crypto/internal/fips140/nistec":                    "cryptography and math/big",
		"vendor/golang.org/x/crypto/chacha20":               "cryptography and math/big",
		"vendor/golang.org/x/net/idna":                      "other standard packages",
		"regexp/syntax":                                     "regexp",
		"other":                                             "linker-made (type equality, wrappers)",
		"encoding/json":                                     "other standard packages",
	} {
		if got := group(pkg); got != want {
			t.Errorf("group(%q) = %q, want %q", pkg, got, want)
		}
	}
}
