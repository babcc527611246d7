// Command istiofetch fetches a WasmPlugin's module the way the Istio agent
// does, with istio.io/istio/pkg/wasm's module cache: the url (oci://...)
// and the sha256 of a WasmPlugin in, the module file Envoy would be given
// out, with its size and sha256.
//
//	go -C internal/ociimage/istiopull run ./cmd/istiofetch \
//	    -sha256 <image digest> -insecure oci://127.0.0.1:5000/wafguard:dev
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"
)

func main() {
	sum := flag.String("sha256", "", "the WasmPlugin's sha256 (for an oci:// url: the image's manifest digest)")
	insecure := flag.Bool("insecure", false, "the registry speaks plain HTTP (the agent's WASM_INSECURE_REGISTRIES)")
	dir := flag.String("dir", "", "cache directory (default: a new temporary one)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: istiofetch [-sha256 HEX] [-insecure] oci://REGISTRY/REPOSITORY:TAG")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *sum, *insecure, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "istiofetch:", err)
		os.Exit(1)
	}
}

func run(rawURL, sum string, insecure bool, dir string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "istiofetch"); err != nil {
			return err
		}
	}
	opts := wasm.Options{InsecureRegistries: sets.New[string]()}
	if insecure {
		opts.InsecureRegistries.Insert(u.Host)
	}
	cache := wasm.NewLocalFileCache(dir, opts)
	defer cache.Cleanup()
	start := time.Now()
	path, err := cache.Get(rawURL, wasm.GetOptions{
		Checksum: sum, ResourceName: "istiofetch", ResourceVersion: "1",
		RequestTimeout: time.Minute, PullPolicy: wasm.IfNotPresent,
	})
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	h := sha256.Sum256(b)
	fmt.Printf("istiofetch: %s in %s\nmodule: %s\nsize: %d\nsha256: %s\n",
		rawURL, time.Since(start).Round(time.Millisecond), path, len(b), hex.EncodeToString(h[:]))
	return nil
}
