package ociimage

import (
	"os"
	"strings"
	"testing"
)

// TestDockerfile: the repository's Dockerfile builds the compat image
// by hand (docker build): nothing but the module, at /plugin.wasm, the
// file the compat layer holds and Istio looks for.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			got = append(got, strings.Join(strings.Fields(line), " "))
		}
	}
	want := []string{"FROM scratch", "COPY build/main.wasm /" + ModuleFile}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Dockerfile instructions %q, want %q (the compat image of package ociimage)", got, want)
	}
	img, err := Build(fakeModule("x"), Compat, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.History) != 1 || cf.History[0].CreatedBy != want[1] {
		t.Errorf("compat image history %+v, want one step %q", cf.History, want[1])
	}
}
