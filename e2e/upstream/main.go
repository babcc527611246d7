// Command upstream is the upstream of the docker-compose e2e setup. It serves
// the wasmhost package's built-in upstream (wasmhost.EchoUpstream: /anything,
// /status/N, /delay/N, /reflect, ...) over plain HTTP, so that the e2e tests
// get the same answers behind Envoy as behind the in-process test host.
//
// Usage: upstream [-addr :8000]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/wafguard/wafguard/wasmhost"
)

// maxBody bounds the request body the server reads.
const maxBody = 16 << 20

func main() {
	addr := flag.String("addr", ":8000", "listen address")
	flag.Parse()
	srv := &http.Server{
		Addr:              *addr,
		Handler:           wasmhost.ServeUpstream(wasmhost.EchoUpstream{}, maxBody),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("upstream: listening on %s", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}

// handler adapts a wasmhost.Upstream to net/http.
