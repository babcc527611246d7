# OCI image of the plugin for Istio's WasmPlugin (and any Envoy that pulls
# wasm from a registry): nothing but the module, at the path the image
# specification expects.
#
#   go run mage.go build && docker build -t <registry>/wafguard:<tag> .
FROM scratch
COPY build/main.wasm /plugin.wasm
