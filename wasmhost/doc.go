// Package wasmhost runs proxy-wasm HTTP plugins (Go, GOOS=wasip1
// GOARCH=wasm -buildmode=c-shared) on wazero the way Envoy's wasm HTTP
// filter runs them, so the filter can be tested without Envoy. The
// behaviour it copies is described in docs/envoy-host-rules.md ("notes N.N"
// in comments is section N.N there); each
// host function names the Envoy or proxy-wasm-cpp-host code it follows.
//
// # Layers
//
//   - Compile(ctx, wasm, Options) (*Module, error): compiles once, with
//     wazero's on-disk compilation cache (Options.CacheDir), and checks the
//     imports against the Envoy profile (Options.Envoy: Envoy139, the
//     default, or Envoy133).
//   - (*Module).NewVM(ctx, PluginConfig) (*VM, error): one instance (one
//     Envoy worker's VM) with one plugin: _initialize, then
//     proxy_on_context_create(root, 0), proxy_on_vm_start,
//     proxy_on_configure. A refusal returns the plugin's critical lines.
//     (*Module).NewPool starts Options.Concurrency VMs; Pool.Exchange
//     spreads exchanges over them.
//   - (*VM).NewStream(StreamInfo) *Stream and the event methods
//     RequestHeaders, RequestBody, RequestTrailers, ResponseHeaders,
//     ResponseBody, ResponseTrailers, End: drive one stream callback by
//     callback with the filter manager's rules (what is held, buffered,
//     released; after-call actions). Result, LocalReply and
//     UpstreamRequest show what the client and the upstream got.
//   - (*VM).Exchange(ctx, *Request, Upstream) Result: one whole request and
//     response with Envoy's semantics, ending with on_log, on_done,
//     on_delete. One loop hands the stream the events of both sides as
//     they come, as Envoy's dispatcher does: reads of the client's body
//     and of the response body run in goroutines of their own, so an
//     upstream that answers while the client is still sending has its
//     response reach the filter between request chunks (notes 2.6). A
//     StreamingUpstream (HTTPUpstream is one) is opened as soon as the
//     filter lets the request headers continue and gets each body chunk
//     as the filter releases it, as Envoy's router streams the request; a
//     local reply or reset after that aborts it (UpstreamBody fails with
//     ErrUpstreamReset, its context is cancelled). Request.Downstream
//     gets the response as the filter releases it; a plain Upstream is
//     called with the whole request, or, with Request.ResponseAfter, with
//     what the filter released after that many body chunks, its answer
//     coming between request chunks. Result.UpstreamBody is the body the
//     filter released towards the upstream.
//   - Handler (an http.Handler over a Pool), HTTPUpstream (reverse proxy),
//     EchoUpstream (built-in httpbin/albedo-like upstream) and
//     AdminHandler (/stats/prometheus, /stats, /ready) make the HTTP
//     server of cmd/wafhost. Handler hands the plugin the request body as
//     it arrives and writes the response as it is released: a response
//     released whole gets its exact Content-Length, one that streams the
//     upstream's (or goes out chunked), and a reset after the response
//     headers went out cuts the connection. With HTTPUpstream behind it,
//     the upstream sees what Envoy's would: with
//     hold_headers_until_inspected off, the headers of a POST the WAF
//     blocks in phase 2, then the request cut off; with it on, nothing.
//   - Host holds what Envoy keeps per process: shared data (per vm_id, one
//     CAS counter) and queues, metrics (Metric, WritePrometheus with
//     stats_tags extraction) and the log (lines "wasm log <root_id>
//     <vm_id>: <message>", plugin name first for stream contexts).
//
// A VM runs one callback at a time: its methods lock it. Exchanges on one
// VM may interleave between callbacks, as streams do on an Envoy worker.
//
// # What the host implements
//
// Every env host call of ABI 0.2.0 that the Go SDK imports, with Envoy's
// status codes: header maps (availability per phase, first value on get,
// pairs serialization and its limits), body buffers (start/length rules,
// accumulation while paused), properties (plugin_*, source.*,
// destination.*, connection.*, request.*, response.*, values set with
// proxy_set_property), logs, time, metrics, tick timers, shared data and
// queues, proxy_set_effective_context, continue/close stream and local
// replies (deferred until the outermost callback returns). WASI is its own
// implementation of cpp-host's stubs (fd_write to logs, no files, no
// arguments, poll_oneoff per profile), under wasi_snapshot_preview1 and
// wasi_unstable. During _initialize and during the allocator only the
// allowlisted calls run; any other traps, as V8 does in Envoy.
//
// # Known deviations from Envoy
//
//   - A plain Upstream (an UpstreamFunc) is called once the whole request
//     has passed the filter (or as Request.ResponseAfter scripts it); a
//     StreamingUpstream (HTTPUpstream and the built-in EchoUpstream) sees
//     the request start at the headers and its body as it is released.
//     Handler sends an empty end of stream frame after a chunked request
//     body.
//   - After-call actions run once the stream has handled the callback's
//     result; Envoy runs them before. So a proxy_continue_stream(1) from a
//     request body callback that continues releases the response after
//     that chunk went to the upstream, not just before.
//   - The connection: close that Envoy's HCM adds on HTTP/1 to a response
//     that starts before the request ended reaches Request.Downstream
//     (and Handler's client), not Result.Headers.
//   - Pool spreads requests round robin; Envoy pins each connection to one
//     worker.
//   - There is one VM per worker and no base or canary VM and no VM on the
//     main thread, so Go init() runs Concurrency times, not N+3 times.
//   - proxy_http_call always returns BadArgument (no clusters), so
//     proxy_on_http_call_response never runs; gRPC calls are not provided
//     (a module importing them fails to load); proxy_call_foreign_function
//     is NotFound.
//   - proxy_add_header_map_value always adds an entry; Envoy appends with
//     "," for some inline headers. The route cache is not modelled.
//   - Response trailers are not written by Handler; request headers reach
//     the plugin sorted by name (net/http loses their order); the HCM's own
//     headers (date, server, x-envoy-*) are not added, except
//     x-forwarded-proto and x-request-id.
//   - gRPC local replies (trailers-only) and HCM local_reply_config mappers
//     are not modelled. HEAD replies drop the body.
//   - FAIL_RELOAD's backoff has no jitter and no max interval; FailOpen
//     also makes in-flight streams of a failed VM continue (Envoy only does
//     so for the legacy fail_open flag; unconfirmed for failure_policy).
//   - StopIterationNoBuffer (body action ≥ 3) drops the chunk. Watermark
//     back-pressure is not modelled: held data simply accumulates.
//   - proxy_continue_stream on a stream that is not paused is counted
//     (Stream.ContinueWithoutPause) and logged at debug, not asserted.
//   - The log line prefix is "[<time>][<vm>][<level>][wasm] [wasmhost]"; Envoy
//     prints the thread id and its source location there.
//   - The stream idle timeout defaults to 30 s (Envoy: 5 min).
package wasmhost
