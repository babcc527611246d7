// Command registry serves an in-memory OCI registry (go-containerregistry's
// pkg/registry) over plain HTTP, to try go run mage.go push and the Istio
// fetch (cmd/istiofetch) on one machine. Everything is lost when it stops.
//
//	go -C internal/ociimage/istiopull run ./cmd/registry -listen 127.0.0.1:5000
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:5000", "address to listen on")
	flag.Parse()
	log.Printf("registry: serving an in-memory registry on http://%s (Ctrl-C stops it)", *listen)
	log.Fatal(http.ListenAndServe(*listen, registry.New()))
}
