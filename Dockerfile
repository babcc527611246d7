# OCI image of the plugin for Istio's WasmPlugin (and any Envoy that pulls
# wasm from a registry): nothing but the module, at the path the image
# specification expects.
#
#   go run mage.go build && docker build -t <registry>/wafguard:$(cat VERSION) .
#
# go run mage.go image writes the same image (the compat format of
# internal/ociimage, with labels, the version from VERSION among them)
# without a Docker daemon, and
# go run mage.go push <registry>/wafguard:<tag> pushes it
# (docs/deployment.md, docs/release.md).
FROM scratch
COPY build/main.wasm /plugin.wasm
