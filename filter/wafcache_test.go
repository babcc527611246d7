package filter

import (
	"runtime"
	"testing"

	"github.com/proxy-wasm/proxy-wasm-go-sdk/proxywasm/proxytest"
)

// TestWAFCache_release: a compiled rule set stays in the VM's cache while
// a plugin holds it, and leaves it when the last plugin holding it is done
// (an ECDS push replaces the plugin: without this each pushed rule set
// stays in the heap). A transaction already running keeps its rules.
func TestWAFCache_release(t *testing.T) {
	_, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().WithVMContext(&testVM{}))
	defer reset()
	shared := []string{"SecRuleEngine On", `SecRule ARGS "@rx wafcache-shared" "id:4243001,phase:1,deny,status:403"`}
	onlyA := []string{"SecRuleEngine On", `SecRule ARGS "@rx wafcache-a" "id:4243002,phase:1,deny,status:403"`}
	onlyB := []string{"SecRuleEngine On", `SecRule ARGS "@rx wafcache-b" "id:4243003,phase:1,deny,status:403"`}
	for _, preselection := range []bool{true, false} {
		cfg := func(sets map[string][]string) *Config {
			c := &Config{DirectivesMap: sets, DefaultDirectives: "shared", RulePreselection: &preselection}
			if _, ok := sets["b"]; ok {
				c.PerAuthorityDirectives = map[string]string{"b.example": "b"}
			}
			return c
		}
		cached := func(lines []string) bool {
			_, ok := wafCache[wafKey(lines, preselection)]
			return ok
		}
		a, err := NewPlugin(cfg(map[string][]string{"shared": shared, "a": onlyA}))
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewPlugin(cfg(map[string][]string{"shared": shared, "b": onlyB}))
		if err != nil {
			t.Fatal(err)
		}
		running := b.byHost["b.example"].waf.NewTransaction()
		if !cached(shared) || !cached(onlyA) || !cached(onlyB) {
			t.Fatalf("preselection %v: cached shared %v, a %v, b %v; want all three while both plugins run", preselection, cached(shared), cached(onlyA), cached(onlyB))
		}
		a.Done()
		a.Done()
		if !cached(shared) || cached(onlyA) || !cached(onlyB) {
			t.Errorf("preselection %v: the first plugin done (twice): cached shared %v, a %v, b %v; want shared and b only", preselection, cached(shared), cached(onlyA), cached(onlyB))
		}
		b.Done()
		if cached(shared) || cached(onlyB) {
			t.Errorf("preselection %v: both plugins done: cached shared %v, b %v; want neither", preselection, cached(shared), cached(onlyB))
		}
		running.ProcessURI("/?q=wafcache-b", "GET", "HTTP/1.1")
		if it := running.ProcessRequestHeaders(); it == nil || it.RuleID != 4243003 {
			t.Errorf("preselection %v: a transaction begun before its plugin was done: interruption %+v, want rule 4243003's", preselection, it)
		}
		_ = running.Close()

		// A configuration refused for one rule set lets go of the others.
		good := []string{"SecRuleEngine On", `SecRule ARGS "@rx wafcache-good" "id:4243004,phase:1,deny,status:403"`}
		if _, err := NewPlugin(cfg(map[string][]string{"shared": good, "z": {"SecNoSuchDirective 1"}})); err == nil {
			t.Fatalf("preselection %v: a configuration with a broken rule set started", preselection)
		}
		if cached(good) {
			t.Errorf("preselection %v: the rule set of a refused configuration stays cached", preselection)
		}
	}
}

// TestCompileWAF_collects: a preselected compile collects twice, once the
// plan's texts and once Coraza's parse are garbage, so that a VM keeps
// the peak of its start near what the WAF holds (a wasm VM's linear memory
// never shrinks); a compile without the preselection adds none of its own.
func TestCompileWAF_collects(t *testing.T) {
	quietLogs(t)
	lines := []string{"SecRuleEngine On", `SecRule ARGS "@rx wafcache-collect" "id:4243004,phase:1,deny,status:403"`}
	for _, preselection := range []bool{true, false} {
		delete(wafCache, wafKey(lines, preselection))
		before := gcCount()
		waf, err := compileWAF(lines, preselection)
		if err != nil {
			t.Fatal(err)
		}
		got := gcCount() - before
		delete(wafCache, wafKey(lines, preselection))
		closeWAF(waf)
		if preselection && got < 3 {
			t.Errorf("a preselected compile ran %d collections, want at least 3", got)
		}
		if !preselection && got > 1 {
			t.Errorf("a compile without the preselection ran %d collections, want none of its own", got)
		}
	}
}

func gcCount() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}
