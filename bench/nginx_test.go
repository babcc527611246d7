package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteModSecurity(t *testing.T) {
	dir := t.TempDir()
	main, rewritten, err := WriteModSecurity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rewritten != 2 {
		t.Errorf("rewritten rule files: got %d, want 2 (949 and 959)", rewritten)
	}
	b, err := os.ReadFile(filepath.Join(dir, "rules", "REQUEST-949-BLOCKING-EVALUATION.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `SecRule TX:EARLY_BLOCKING "@eq 1" "t:none"`) {
		t.Error("chained rule of 949111 not given an action list")
	}
	if _, err := os.Stat(filepath.Join(dir, "rules", "sql-errors.data")); err != nil {
		t.Error(err)
	}
	m, _ := os.ReadFile(main)
	if !strings.Contains(string(m), filepath.Join(dir, "rules", "*.conf")) {
		t.Errorf("main.conf does not include the rules:\n%s", m)
	}
}

func TestNginxConfig(t *testing.T) {
	plain := NginxConfig("/w", "127.0.0.1:1", "127.0.0.1:2", "", 1)
	if strings.Contains(plain, "modsecurity") || !strings.Contains(plain, "worker_processes 1;") {
		t.Errorf("plain nginx config mentions modsecurity or has not 1 worker:\n%s", plain)
	}
	ms := NginxConfig("/w", "127.0.0.1:1", "127.0.0.1:2", "/w/main.conf", 2)
	for _, want := range []string{"worker_processes 2;", "load_module " + ModSecurityModule, "modsecurity_rules_file /w/main.conf;", "server 127.0.0.1:2;", "listen 127.0.0.1:1;"} {
		if !strings.Contains(ms, want) {
			t.Errorf("config lacks %q:\n%s", want, ms)
		}
	}
}
