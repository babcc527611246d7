// A proxy-wasm host on Node's V8: the engine Envoy runs plugins on. It
// exists to test and measure build/main.wasm on that engine; the product is
// the .wasm alone.
//
// It is driven by the Go package v8host over stdin/stdout, one JSON object
// per line each way: a request {id, op, ...} gets a reply {id, ok, ...} or
// {id, error}. Operations: "start" (a VM with a plugin configuration),
// "exchange" (one HTTP stream, request and upstream response, to its end),
// "begin" and "finish" (the same in two steps, for a proxy), "tick",
// "logs", "metrics", "memory", "usage", "stop", and "serve" (an HTTP front
// in this process, in front of an upstream: see serve).
//
// What it follows of Envoy (the rules of docs/envoy-host-rules.md, as the Go
// host in wasmhost/ does): one VM per "start", shared data and metrics shared by
// all VMs of the process, Envoy's WASI profile of 1.39 (poll_oneoff
// succeeds with no event), the plugin configuration readable only during
// proxy_on_configure, local replies built as Envoy's sendLocalReply does
// and sent through the filter's own response callbacks, a request body
// buffered while the filter answers StopIterationAndBuffer and delivered as
// the total buffered so far, a 413 past the buffer limit. "exchange",
// "begin" and "finish" follow the filter manager further (Stream.start and
// what follows it): headers held with their body, proxy_continue_stream,
// direct local replies once the response headers exist, and an upstream
// that answers before the request has ended (resp_after).
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { HTTPParser } from "node:_http_common";
import readline from "node:readline";
import { randomUUID, webcrypto } from "node:crypto";

const [wasmPath, bufferLimitArg, idleArg] = process.argv.slice(2);
const bufferLimit = Number(bufferLimitArg || 1 << 20);
// idleMS is the HCM's stream idle timeout.
const idleMS = Number(idleArg || 30000);
const wasmModule = new WebAssembly.Module(fs.readFileSync(wasmPath));

// Status codes (proxy_status_t).
const OK = 0, NOT_FOUND = 1, BAD_ARGUMENT = 2, INVALID_MEMORY = 6, CAS_MISMATCH = 8, UNIMPLEMENTED = 12;
// WASI errno values of Envoy's host.
const E_SUCCESS = 0, E_BADF = 8, E_EXIST = 20, E_INVAL = 28, E_NOENT = 44, E_NOSYS = 52, E_NOTSUP = 58;
const LEVELS = ["trace", "debug", "info", "warn", "error", "critical"];
const monoStart = process.hrtime.bigint();
const enc = new TextEncoder();
// EMPTY is the empty buffer, shared: nothing writes into it.
const EMPTY = new Uint8Array(0);
const dec = new TextDecoder("utf-8", { fatal: false });

// Process-wide state, as in one Envoy process.
const shared = new Map(); // vm_id \0 key -> {value: Uint8Array, cas}
let casCounter = 0;
const metrics = []; // id -> {type, name, value}; a histogram's value is its sample count
const metricIds = new Map(); // type + name -> id

// defineMetric keys a metric by type and name, as Envoy does: every VM that
// defines the same one adds to the same value.
function defineMetric(type, name) {
  const key = type + name;
  if (metricIds.has(key)) return metricIds.get(key);
  const id = metrics.length;
  metrics.push({ type, name, value: 0n });
  metricIds.set(key, id);
  return id;
}

class ProcExit extends Error {}

class VM {
  constructor(cfg) {
    this.cfg = cfg;
    this.config = Buffer.from(cfg.configuration || "", "base64");
    this.env = cfg.env || [];
    this.logs = [];
    this.rootID = 1;
    this.nextID = 2;
    this.eff = 0;
    this.streams = new Map(); // open streams by context id
    // pending holds the actions of proxy_continue_stream, run once the
    // outermost callback has returned (Envoy's after-VM-call actions).
    this.pending = [];
    this.configReadable = false;
    this.tickMS = 0;
    this.failed = false;
    // allow_on_headers_stop_iteration (Envoy 1.35+): a pause on headers
    // holds only the headers, and body callbacks keep coming.
    this.allowStopIteration = !!cfg.allow_on_headers_stop_iteration;
    this.instance = new WebAssembly.Instance(wasmModule, { wasi_snapshot_preview1: this.wasi(), env: this.proxy() });
    this.ex = this.instance.exports;
  }

  // Memory access; views are made per call because growth detaches them.
  bytes(ptr, len) {
    const b = new Uint8Array(this.ex.memory.buffer);
    if (ptr + len > b.length) return null;
    return b.subarray(ptr, ptr + len);
  }
  str(ptr, len) {
    const b = this.bytes(ptr, len);
    return b === null ? null : dec.decode(b);
  }
  u32(ptr, v) {
    const dv = new DataView(this.ex.memory.buffer);
    if (ptr + 4 > dv.byteLength) return false;
    dv.setUint32(ptr, v >>> 0, true);
    return true;
  }
  u64(ptr, v) {
    const dv = new DataView(this.ex.memory.buffer);
    if (ptr + 8 > dv.byteLength) return false;
    dv.setBigUint64(ptr, BigInt.asUintN(64, v), true);
    return true;
  }
  // writeOut returns data through an out-pointer pair: one allocation in
  // the guest, or pointer 0 and size 0 for an empty value.
  writeOut(data, ptrPtr, sizePtr) {
    if (data.length === 0) {
      return this.u32(ptrPtr, 0) && this.u32(sizePtr, 0) ? OK : INVALID_MEMORY;
    }
    const p = this.ex.proxy_on_memory_allocate(data.length);
    const dst = this.bytes(p, data.length);
    if (!p || dst === null) return INVALID_MEMORY;
    dst.set(data);
    return this.u32(ptrPtr, p) && this.u32(sizePtr, data.length) ? OK : INVALID_MEMORY;
  }
  log(level, msg) {
    this.logs.push(`${LEVELS[level]}: ${msg}`);
  }

  wasi() {
    const vm = this;
    const errno = (e) => () => e;
    const envStrings = () => vm.env.map(([k, v]) => `${k}=${v}\0`);
    return {
      args_get: errno(E_SUCCESS),
      args_sizes_get: (argc, size) => (vm.u32(argc, 0) && vm.u32(size, 0) ? E_SUCCESS : E_INVAL),
      environ_sizes_get(countPtr, sizePtr) {
        const s = envStrings();
        return vm.u32(countPtr, s.length) && vm.u32(sizePtr, s.reduce((n, e) => n + enc.encode(e).length, 0)) ? E_SUCCESS : E_INVAL;
      },
      environ_get(ptrs, buf) {
        let off = buf;
        for (const [i, e] of envStrings().entries()) {
          const b = enc.encode(e);
          const dst = vm.bytes(off, b.length);
          if (dst === null || !vm.u32(ptrs + 4 * i, off)) return E_INVAL;
          dst.set(b);
          off += b.length;
        }
        return E_SUCCESS;
      },
      clock_time_get(id, _precision, out) {
        let t;
        if (id === 0) t = BigInt(Date.now()) * 1000000n + (process.hrtime.bigint() % 1000000n);
        else if (id === 1) t = process.hrtime.bigint() - monoStart + 1n;
        else return E_NOTSUP;
        return vm.u64(out, t) ? E_SUCCESS : E_INVAL;
      },
      clock_res_get: (id, out) => (id > 1 ? E_NOTSUP : vm.u64(out, 1n) ? E_SUCCESS : E_INVAL),
      random_get(ptr, len) {
        if (len > 64 << 10) return E_INVAL;
        const b = vm.bytes(ptr, len);
        if (b === null) return E_INVAL;
        webcrypto.getRandomValues(b);
        return E_SUCCESS;
      },
      fd_write(fd, iovs, n, nwritten) {
        if (fd !== 1 && fd !== 2) return E_BADF;
        const dv = new DataView(vm.ex.memory.buffer);
        let out = "";
        let total = 0;
        for (let i = 0; i < n; i++) {
          const p = dv.getUint32(iovs + 8 * i, true), l = dv.getUint32(iovs + 8 * i + 4, true);
          const s = vm.str(p, l);
          if (s === null) return E_INVAL;
          out += s;
          total += l;
        }
        if (!vm.u32(nwritten, total)) return E_INVAL;
        vm.log(fd === 2 ? 4 : 2, out.replace(/\n$/, ""));
        return E_SUCCESS;
      },
      fd_read: errno(E_NOSYS),
      fd_pread: errno(E_NOSYS),
      fd_close: errno(E_SUCCESS),
      fd_seek: errno(E_SUCCESS),
      fd_fdstat_get(fd, out) {
        if (fd !== 1 && fd !== 2) return E_BADF;
        const b = vm.bytes(out, 24);
        if (b === null) return E_INVAL;
        b.fill(0);
        b[0] = 2; // character device
        b[8] = 64; // FD_WRITE
        return E_SUCCESS;
      },
      fd_fdstat_set_flags: errno(E_NOSYS),
      fd_prestat_get: errno(E_BADF),
      fd_prestat_dir_name: errno(E_NOSYS),
      fd_filestat_get: errno(E_BADF),
      fd_readdir: (_fd, _buf, _len, _cookie, used) => (vm.u32(used, 0), E_EXIST),
      path_open: errno(E_NOENT),
      path_create_directory: errno(E_NOTSUP),
      path_filestat_get: errno(E_NOTSUP),
      path_readlink: errno(E_NOTSUP),
      path_remove_directory: errno(E_NOTSUP),
      path_unlink_file: errno(E_NOTSUP),
      sched_yield: errno(E_SUCCESS),
      // Envoy 1.39: succeeds with no event, so Go's scheduler busy-waits.
      poll_oneoff: (_in, _out, _n, nevents) => (vm.u32(nevents, 0) ? E_SUCCESS : E_INVAL),
      proc_exit(code) {
        throw new ProcExit(`proc_exit(${code})`);
      },
    };
  }

  proxy() {
    const vm = this;
    return {
      proxy_log(level, ptr, len) {
        if (level > 5) return BAD_ARGUMENT;
        const m = vm.str(ptr, len);
        if (m === null) return INVALID_MEMORY;
        vm.log(level, m);
        return OK;
      },
      proxy_set_tick_period_milliseconds(ms) {
        vm.tickMS = ms;
        return OK;
      },
      proxy_set_effective_context(id) {
        if (id !== vm.rootID && !vm.streams.has(id)) return BAD_ARGUMENT;
        vm.eff = id;
        return OK;
      },
      proxy_get_buffer_bytes(type, start, max, ptrPtr, sizePtr) {
        let data;
        if (type === 7) {
          if (!vm.configReadable) return NOT_FOUND;
          data = vm.config;
        } else if (type === 6) {
          data = EMPTY;
        } else if (type === 0 || type === 1) {
          const st = vm.effStream();
          if (st === null) return NOT_FOUND;
          data = st.bodyBuffer(type === 1);
        } else {
          return type > 8 ? BAD_ARGUMENT : NOT_FOUND;
        }
        data = start >= data.length ? EMPTY : data.subarray(start, Math.min(data.length, start + max));
        return vm.writeOut(Uint8Array.from(data), ptrPtr, sizePtr);
      },
      proxy_get_header_map_value(type, kPtr, kLen, vPtr, vLen) {
        const key = vm.str(kPtr, kLen);
        if (key === null) return INVALID_MEMORY;
        const st = vm.effStream();
        if (st === null) return BAD_ARGUMENT;
        const h = st.headerMap(type);
        if (h === null) return NOT_FOUND;
        const k = key.toLowerCase();
        const hit = h.find((p) => p[0] === k);
        if (hit === undefined) return NOT_FOUND;
        return vm.writeOut(enc.encode(hit[1]), vPtr, vLen);
      },
      proxy_get_header_map_pairs(type, ptrPtr, sizePtr) {
        const st = vm.effStream();
        if (st === null) return BAD_ARGUMENT;
        const h = st.headerMap(type);
        return vm.writeOut(encodePairs(h || []), ptrPtr, sizePtr);
      },
      // proxy_continue_stream(type) resumes the request (0) or the
      // response (1) once the callback has returned, and drops the request
      // header and body pointers at once (Envoy Context::continueStream).
      // The HTTP front does not model it.
      proxy_continue_stream(type) {
        if (type > 3) return BAD_ARGUMENT;
        if (type > 1) return UNIMPLEMENTED;
        const st = vm.effStream();
        if (st !== null && st.core) {
          st.reqBodyCleared = true;
          vm.pending.push(() => st.resume(type === 1));
        }
        return OK;
      },
      proxy_send_local_response(status, dPtr, dLen, bPtr, bLen, hPtr, hLen, grpc) {
        const details = vm.str(dPtr, dLen), body = vm.bytes(bPtr, bLen), hb = vm.bytes(hPtr, hLen);
        if (details === null || body === null || hb === null) return INVALID_MEMORY;
        const st = vm.effStream();
        if (st !== null) st.pendingReply = { status, details: details.replaceAll(" ", "_"), body: Uint8Array.from(body), headers: decodePairs(hb), grpc };
        return OK;
      },
      proxy_get_shared_data(kPtr, kLen, vPtr, vLen, casPtr) {
        const key = vm.str(kPtr, kLen);
        if (key === null) return INVALID_MEMORY;
        const e = shared.get(vm.cfg.vm_id + "\0" + key);
        if (e === undefined) return NOT_FOUND;
        if (!vm.u32(casPtr, e.cas)) return INVALID_MEMORY;
        return vm.writeOut(e.value, vPtr, vLen);
      },
      proxy_set_shared_data(kPtr, kLen, vPtr, vLen, cas) {
        const key = vm.str(kPtr, kLen), val = vm.bytes(vPtr, vLen);
        if (key === null || val === null) return INVALID_MEMORY;
        const k = vm.cfg.vm_id + "\0" + key;
        const e = shared.get(k);
        // A non-zero cas must match an existing entry; on a missing key
        // Envoy lets the write succeed whatever the cas.
        if (e !== undefined && cas !== 0 && e.cas !== cas) return CAS_MISMATCH;
        casCounter = (casCounter + 1) >>> 0 || 1;
        shared.set(k, { value: Uint8Array.from(val), cas: casCounter });
        return OK;
      },
      proxy_define_metric(type, nPtr, nLen, idPtr) {
        const name = vm.str(nPtr, nLen);
        if (name === null) return INVALID_MEMORY;
        if (type > 2) return BAD_ARGUMENT;
        return vm.u32(idPtr, defineMetric(type, name)) ? OK : INVALID_MEMORY;
      },
      // Envoy's Context::incrementMetric: a counter takes only a positive
      // delta, a gauge adds or subtracts, a histogram is recorded instead.
      proxy_increment_metric(id, delta) {
        const m = metrics[id];
        if (m === undefined) return NOT_FOUND;
        if (m.type === 2 || (m.type === 0 && delta <= 0n)) return BAD_ARGUMENT;
        m.value = BigInt.asUintN(64, m.value + delta);
        return OK;
      },
      // Context::recordMetric: a counter adds, a gauge is set, a histogram
      // records a sample (counted here).
      proxy_record_metric(id, value) {
        const m = metrics[id];
        if (m === undefined) return NOT_FOUND;
        if (m.type === 0) m.value = BigInt.asUintN(64, m.value + BigInt.asUintN(64, value));
        else if (m.type === 1) m.value = BigInt.asUintN(64, value);
        else m.value += 1n;
        return OK;
      },
      // Context::getMetric: a counter's or a gauge's value; a histogram's
      // is BadArgument.
      proxy_get_metric(id, ptr) {
        const m = metrics[id];
        if (m === undefined) return NOT_FOUND;
        if (m.type === 2) return BAD_ARGUMENT;
        return vm.u64(ptr, m.value) ? OK : INVALID_MEMORY;
      },
      proxy_get_property(pPtr, pLen, vPtr, vLen) {
        const path = vm.str(pPtr, pLen);
        if (path === null) return INVALID_MEMORY;
        const v = vm.property(path.split("\0").filter((t, i, a) => !(i === a.length - 1 && t === "")));
        if (v === null) return NOT_FOUND;
        return vm.writeOut(v, vPtr, vLen);
      },
      proxy_set_property(pPtr, pLen, vPtr, vLen) {
        const path = vm.str(pPtr, pLen), val = vm.bytes(vPtr, vLen);
        if (path === null || val === null) return INVALID_MEMORY;
        const st = vm.effStream();
        if (st === null) return NOT_FOUND;
        st.props.set(path.replace(/\0$/, ""), Uint8Array.from(val));
        return OK;
      },
    };
  }

  effStream() {
    return this.streams.get(this.eff) ?? null;
  }

  property(tok) {
    const u64 = (n) => {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
      return b;
    };
    switch (tok.join(".")) {
      case "plugin_name":
        return enc.encode(this.cfg.name);
      case "plugin_root_id":
        return enc.encode(this.cfg.root_id);
      case "plugin_vm_id":
        return enc.encode(this.cfg.vm_id);
    }
    const st = this.effStream();
    if (st === null) return null;
    const set = st.props.get(tok.join("\0"));
    if (set !== undefined) return set;
    switch (tok.join(".")) {
      case "request.protocol":
        return enc.encode(st.info.protocol || "HTTP/1.1");
      case "source.port":
        return u64(Number((st.info.source || "127.0.0.1:40000").match(/:(\d+)$/)?.[1] || 0));
      case "destination.port":
        return u64(Number((st.info.destination || "127.0.0.1:8080").match(/:(\d+)$/)?.[1] || 0));
      // Envoy's source.address and destination.address are ip:port.
      case "source.address":
        return enc.encode(st.info.source || "127.0.0.1:40000");
      case "destination.address":
        return enc.encode(st.info.destination || "127.0.0.1:8080");
      case "xds.route_name":
        return st.info.route_name ? enc.encode(st.info.route_name) : null;
      case "response.code":
        return st.respStatus ? u64(st.respStatus) : null;
      // "via_upstream" for the upstream's response, a local reply's details.
      case "response.code_details":
        return st.respDetails ? enc.encode(st.respDetails) : null;
    }
    return null;
  }

  // call runs a guest export; a trap fails the VM (Envoy then answers
  // every stream of it 503 under fail-closed policies).
  call(name, ...args) {
    if (this.failed) return null;
    try {
      return this.ex[name](...args);
    } catch (e) {
      this.failed = true;
      this.log(5, `Function: ${name} failed: ${e && e.message}`);
      return null;
    }
  }

  start() {
    this.ex._initialize();
    this.call("proxy_on_context_create", this.rootID, 0);
    if (!this.call("proxy_on_vm_start", this.rootID, 0)) throw new Error("proxy_on_vm_start failed:\n" + this.logs.join("\n"));
    this.configReadable = true;
    const ok = this.call("proxy_on_configure", this.rootID, this.config.length);
    this.configReadable = false;
    if (!ok) throw new Error("plugin start failed:\n" + this.logs.join("\n"));
  }

  tick() {
    if (this.tickMS > 0) {
      this.eff = this.rootID;
      this.call("proxy_on_tick", this.rootID);
      // A local reply or a proxy_continue_stream sent from the tick (to a
      // stream made effective) takes effect now, as Envoy's would.
      for (const st of this.streams.values()) {
        if (st.core) st.flush();
        else if (st.pendingReply !== null) st.reply();
      }
      this.pending = [];
    }
  }

}

// Stream is one HTTP stream: the request, the upstream's response, the end.
class Stream {
  constructor(vm, ex) {
    this.vm = vm;
    this.id = vm.nextID++;
    this.info = ex.info || {};
    this.props = new Map();
    this.reqHdrs = ex.headers.map(([k, v]) => [k.toLowerCase(), v]);
    this.respHdrs = null;
    this.req = newDir();
    this.resp = newDir();
    this.pendingReply = null;
    this.out = { status: 0, headers: [], body: [], localReply: false, upstream: false, details: "", reset: false };
    this.respStatus = 0;
    this.respDetails = "";
    // reqHdrsOut: the request headers went upstream (Envoy's router
    // sends them once the filter lets them continue).
    this.reqHdrsOut = false;
  }
  dir(isResp) {
    return isResp ? this.resp : this.req;
  }
  headerMap(type) {
    switch (type) {
      case 0:
        return this.reqHdrs;
      case 2:
        return this.respHdrs;
    }
    return null;
  }
  invoke(name, ...args) {
    this.vm.eff = this.id;
    const r = this.vm.call(name, this.id, ...args);
    return r === null ? -1 : r;
  }
  // bodyBuffer is what the body buffer calls see of a body (Envoy
  // Context::getBuffer): what the filter buffers (its last body callback
  // paused), from any callback, the other direction's included; else the
  // chunk of the callback running. After proxy_continue_stream the
  // request body is gone until its next callback, unless buffered.
  bodyBuffer(isResp) {
    if (!isResp && this.reqBodyCleared && this.req.mode !== "buffer") return EMPTY;
    return this.dir(isResp).buf;
  }
  // reply sends a queued local reply the way Envoy's sendLocalReply
  // does: :status, content-length, content-type text/plain with a body,
  // the plugin's headers, through this filter's response callbacks.
  reply() {
    const lr = this.pendingReply;
    this.pendingReply = null;
    if (this.out.localReply) return;
    this.out.details = lr.details;
    if (this.respHdrsOut) {
      // The response headers already went downstream: Envoy can only
      // reset the stream.
      this.out.reset = true;
      this.out.details = "local_reply_after_response_started";
      return;
    }
    this.out.localReply = true;
    const h = localReplyHeaders(lr);
    this.respHdrs = h;
    this.respStatus = lr.status;
    this.respDetails = lr.details;
    this.invoke("proxy_on_response_headers", h.length, lr.body.length === 0 ? 1 : 0);
    if (lr.body.length > 0) {
      this.resp.buf = lr.body;
      this.invoke("proxy_on_response_body", lr.body.length, 1);
    }
    this.out.status = lr.status;
    this.out.headers = h.filter(([k]) => !k.startsWith(":"));
    this.out.body = [lr.body];
  }
  // body delivers chunks in one direction with Envoy's buffering: while
  // the filter answers StopIterationAndBuffer the data accumulates and the
  // next callback gets the total; Continue releases what is buffered.
  // With lastEOS false the last chunk is not the end of the stream either
  // (the HTTP front delivers data as it arrives).
  body(isResp, chunks, lastEOS = true) {
    const d = this.dir(isResp);
    const name = isResp ? "proxy_on_response_body" : "proxy_on_request_body";
    let released = [];
    for (let i = 0; i < chunks.length; i++) {
      const eos = lastEOS && i === chunks.length - 1;
      const chunk = chunks[i];
      // A chunk the filter is not buffering is used as it came (each
      // caller's chunk is its own); one it buffers is copied on.
      d.buf = d.mode === "buffer" ? concat(d.buf, chunk) : chunk;
      if (d.mode === "buffer" && d.buf.length > bufferLimit) {
        return { overflow: true, released };
      }
      const a = this.invoke(name, d.buf.length, eos ? 1 : 0);
      if (this.vm.failed) return { failed: true, released };
      if (this.pendingReply !== null) return { replied: true, released };
      if (a === 0) {
        released.push(d.buf);
        d.buf = EMPTY;
        d.mode = "none";
        // Continue also releases headers the filter held.
        if (isResp) this.respHdrsOut = true;
        else this.reqHdrsOut = true;
      } else if (a === 1) {
        d.mode = "buffer";
        if (d.buf.length > bufferLimit) return { overflow: true, released };
      } else {
        d.mode = "none";
        d.buf = EMPTY;
      }
    }
    return { done: d.mode === "none", released };
  }
  failReply() {
    this.out = { ...this.out, status: 503, localReply: true, upstream: false, details: "wasm_fail_stream", headers: [["content-length", "0"]], body: [] };
  }
  // settle waits, running the VM's ticks, until a stream that stalled
  // with its headers held is answered (a local reply from the tick), as
  // Envoy would leave it; after 30 s it answers 408 as Envoy's stream idle
  // timeout does. It resolves with the stream ended.
  settle() {
    const started = Date.now();
    return new Promise((resolve) => {
      const poll = () => {
        if (this.out.localReply || this.out.reset || this.vm.failed || Date.now() - started > idleMS) {
          if (!this.out.localReply && !this.out.reset && !this.vm.failed) {
            this.pendingReply = { status: 408, details: "stream_idle_timeout", body: enc.encode("stream timeout"), headers: [], grpc: -1 };
            this.reply();
          }
          if (this.vm.failed) this.failReply();
          this.end();
          resolve(this.result());
          return;
        }
        this.vm.tick();
        setTimeout(poll, Math.max(10, Math.min(this.vm.tickMS || 100, 100)));
      };
      setTimeout(poll, 10);
    });
  }
  // ---- The filter manager, for the exchanges of the protocol ----
  //
  // "exchange", "begin" and "finish" drive a stream through the methods
  // below, which follow Envoy's filter manager around this filter as the
  // Go host in wasmhost/ does (docs/envoy-host-rules.md 2.2-2.6): events of
  // either direction come as they come, a pause on headers holds the body
  // back (StopAllIteration) unless allow_on_headers_stop_iteration is set,
  // a body pause buffers, proxy_continue_stream and local replies run
  // after the callback, a local reply goes through this filter's response
  // callbacks until the response headers exist and straight to the client
  // after, and a response that has ended stops the request. The HTTP
  // front (serve) keeps its own simpler path.

  // start begins a scripted exchange: ex's request, and the upstream's
  // answer when given is true (else finish gives it).
  start(ex, given) {
    this.core = true;
    const resp = given ? { status: ex.resp_status, headers: ex.resp_headers, body: ex.resp_body } : null;
    this.x = {
      reqBody: chunks(ex.body),
      next: 0,
      fed: 0,
      reqDone: false,
      reset: !!ex.reset,
      after: ex.resp_after || 0,
      endsEarly: !!ex.resp_ends_early,
      given: resp,
      waiting: false, // the upstream is due to answer and no answer was given
      resp: null,
      respHdrs: false,
      respNext: 0,
      respBodyOver: false,
      respEnded: false,
    };
    if (this.vm.failed) return;
    this.invoke("proxy_on_context_create", this.vm.rootID);
    this.fmHeaders(false, this.x.reqBody.length === 0 && !this.x.reset);
  }
  // advance hands the filter every event that can come now; it returns
  // true once the stream is over.
  advance() {
    for (;;) {
      if (this.over()) return true;
      if (!(this.upstreamStep() || this.respStep() || this.reqStep())) return false;
    }
  }
  over() {
    if (this.vm.failed) {
      if (!this.final) {
        this.failReply();
        this.final = true;
      }
      return true;
    }
    return this.resp.complete || this.out.reset || (this.x.reset && this.x.reqDone);
  }
  // upstreamStep takes the upstream's answer once it is due: when the
  // whole request has passed the filter, or after x.after body chunks
  // once the request headers went upstream.
  upstreamStep() {
    const x = this.x;
    if (x.resp !== null || this.out.reset || this.req.aborted || this.replying) return false;
    if (!(this.req.complete || (x.after > 0 && x.fed >= x.after && this.reqHdrsOut))) return false;
    if (x.given === null) {
      x.waiting = true;
      return false;
    }
    x.waiting = false;
    const r = x.given;
    x.resp = { status: r.status || 200, headers: (r.headers || []).map(([k, v]) => [k.toLowerCase(), v]), body: chunks(r.body) };
    x.respHasBody = x.resp.body.some((c) => c.length > 0);
    return true;
  }
  // endDue: an early answer from a full-duplex server ends once the whole
  // request has passed to it, unless it ends early.
  endDue() {
    const x = this.x;
    return x.after <= 0 || x.endsEarly || this.req.complete || this.req.aborted || this.out.reset;
  }
  respStep() {
    const x = this.x, r = x.resp;
    if (r === null || x.respEnded) return false;
    if (this.out.reset || this.resp.aborted || this.replying) {
      x.respEnded = true;
      return false;
    }
    if (!x.respHdrs) {
      x.respHdrs = true;
      this.respHdrs = [[":status", String(r.status)], ...r.headers];
      this.respStatus = r.status;
      this.respDetails = "via_upstream";
      const end = !x.respHasBody && this.endDue();
      x.respEnded = end;
      x.respBodyOver = !x.respHasBody;
      this.fmHeaders(true, end);
      return true;
    }
    if (!x.respBodyOver) {
      const i = x.respNext++;
      const last = i === r.body.length - 1;
      const eos = last && this.endDue();
      x.respEnded = eos;
      x.respBodyOver = last;
      this.fmData(true, r.body[i], eos);
      return true;
    }
    if (!this.endDue()) return false;
    x.respEnded = true;
    this.fmData(true, EMPTY, true);
    return true;
  }
  reqStep() {
    const x = this.x;
    if (x.reqDone) return false;
    if (this.out.reset || this.req.aborted || this.out.localReply) {
      x.reqDone = true;
      return false;
    }
    if (x.next < x.reqBody.length) {
      const i = x.next++;
      this.fmData(false, x.reqBody[i], !x.reset && i === x.reqBody.length - 1);
      x.fed++;
      return true;
    }
    x.reqDone = true;
    return true;
  }
  // fmHeaders delivers headers: the callback, then the headers go on or
  // are held (0 and 2 continue; 1 and 3+ stop all iteration).
  fmHeaders(isResp, eos) {
    const d = this.dir(isResp);
    if (!isResp && eos) this.clientDone = true;
    if (this.ended || this.out.reset || d.aborted || d.seen) return;
    d.seen = true;
    d.eosIn = d.eosDelivered = eos;
    const n = isResp ? this.respHdrs.length : this.reqHdrs.length;
    const a = this.invoke(isResp ? "proxy_on_response_headers" : "proxy_on_request_headers", n, eos ? 1 : 0);
    if (!this.stopped(d)) {
      if (a === 0 || a === 2) this.releaseHeaders(isResp);
      else d.hdrsHeld = true;
    }
    this.pump(isResp);
    this.flush();
  }
  // fmData delivers one body chunk as it arrives. Request data that comes
  // once the response has ended is dropped before any filter
  // (FilterManager::decodeData on local_complete_).
  fmData(isResp, chunk, eos) {
    const d = this.dir(isResp);
    if (!isResp && eos) this.clientDone = true;
    if (this.ended || this.out.reset || d.aborted || !d.seen || d.eosIn || (!isResp && this.resp.eosIn)) return;
    d.eosIn = eos;
    if (chunk.length > 0) d.held.push(chunk);
    if (chunk.length === 0 && !eos) return;
    this.pump(isResp);
    this.flush();
  }
  stopped(d) {
    return this.ended || this.out.reset || d.aborted || this.pendingReply !== null || this.vm.failed;
  }
  // pump delivers what the filter manager would deliver next in one
  // direction: the data held so far in one callback with the total
  // buffered, and marks the direction complete once its end has passed.
  pump(isResp) {
    const d = this.dir(isResp);
    while (!this.stopped(d)) {
      const blocked = d.hdrsHeld && !this.vm.allowStopIteration;
      if (!blocked && (d.held.length > 0 || (d.eosIn && !d.eosDelivered))) {
        d.buf = d.buf.length === 0 && d.held.length === 1 ? d.held[0] : Uint8Array.from(Buffer.concat([d.buf, ...d.held]));
        d.held = [];
        if (d.mode === "buffer" && d.buf.length > bufferLimit) {
          this.overflow(isResp);
          return;
        }
        this.deliverBody(isResp);
        continue;
      }
      if (!d.hdrsHeld && d.mode === "none" && d.eosIn && d.eosDelivered && !d.complete) d.complete = true;
      return;
    }
  }
  deliverBody(isResp) {
    const d = this.dir(isResp);
    const eos = d.eosIn;
    if (eos) d.eosDelivered = true;
    if (!isResp) this.reqBodyCleared = false;
    const a = this.invoke(isResp ? "proxy_on_response_body" : "proxy_on_request_body", d.buf.length, eos ? 1 : 0);
    if (this.stopped(d)) return;
    if (a === 0) {
      if (d.hdrsHeld) this.releaseHeaders(isResp);
      this.releaseBody(isResp);
    } else if (a === 1) {
      d.mode = "buffer";
      if (d.buf.length > bufferLimit) this.overflow(isResp);
    } else if (a === 2) {
      d.mode = "watermark";
    } else {
      d.buf = EMPTY;
      d.mode = "none";
    }
  }
  releaseHeaders(isResp) {
    const d = this.dir(isResp);
    d.hdrsHeld = false;
    if (isResp) this.respHdrsOut = true;
    else this.reqHdrsOut = true;
  }
  releaseBody(isResp) {
    const d = this.dir(isResp);
    if (d.buf.length > 0) d.out.push(d.buf);
    d.buf = EMPTY;
    d.mode = "none";
  }
  // resume is proxy_continue_stream's action (continueDecoding,
  // continueEncoding): what the filter held goes on, and held data comes
  // to it. The request cannot continue once the response has ended.
  resume(isResp) {
    const d = this.dir(isResp);
    if (this.ended || this.out.reset || d.aborted || !d.seen || (!isResp && this.resp.eosIn)) return;
    if (d.hdrsHeld) this.releaseHeaders(isResp);
    if (d.mode !== "none") this.releaseBody(isResp);
    this.pump(isResp);
  }
  // flush runs what the callbacks queued, once the outermost one has
  // returned: a local reply, then proxy_continue_stream's actions.
  flush() {
    if (this.flushing) return;
    this.flushing = true;
    for (;;) {
      if (this.pendingReply !== null) {
        this.fmReply();
        continue;
      }
      const act = this.vm.pending.shift();
      if (act === undefined) break;
      act();
    }
    this.flushing = false;
  }
  // fmReply sends the queued local reply as FilterManager::sendLocalReply
  // does: before any response headers, through this filter's response
  // callbacks (the request side stops); once the upstream's headers
  // exist but have not gone downstream, straight to the client in their
  // place; after, a reset.
  fmReply() {
    const lr = this.pendingReply;
    this.pendingReply = null;
    if (this.ended || this.out.reset) return;
    this.out.details = lr.details;
    if (!this.resp.seen && !this.replying) {
      this.req.aborted = true;
      this.req.held = [];
      this.req.buf = EMPTY;
      this.replying = true;
      this.out.localReply = true;
      this.respHdrs = localReplyHeaders(lr);
      this.respStatus = lr.status;
      this.respDetails = lr.details;
      this.fmHeaders(true, lr.body.length === 0);
      if (lr.body.length > 0) this.fmData(true, lr.body, true);
      return;
    }
    if (!this.respHdrsOut) {
      this.directReply(lr);
      return;
    }
    this.out.reset = true;
    this.out.details = "local_reply_after_response_started";
  }
  directReply(lr) {
    this.req.aborted = true;
    this.resp.aborted = true;
    this.out.localReply = true;
    this.out.details = lr.details;
    this.respHdrs = localReplyHeaders(lr);
    this.respStatus = lr.status;
    this.respDetails = lr.details;
    this.respHdrsOut = true;
    this.resp.out = lr.body.length > 0 ? [lr.body] : [];
    this.resp.complete = true;
  }
  // overflow is the buffer limit: 413 for a request; for a response 500
  // while its headers are held, else a reset.
  overflow(isResp) {
    if (!isResp) {
      this.req.aborted = true;
      this.pendingReply = { status: 413, details: "request_payload_too_large", body: enc.encode("Payload Too Large"), headers: [], grpc: -1 };
      this.fmReply();
    } else if (!this.respHdrsOut) {
      this.directReply({ status: 500, details: "response_payload_too_large", body: enc.encode("Internal Server Error"), headers: [] });
    } else {
      this.out.reset = true;
      this.out.details = "response_payload_too_large";
    }
  }
  // wait lets a stream that cannot go on by itself wait, running the VM's
  // ticks, for the plugin to answer or resume it; it applies Envoy's
  // stream idle timeout (408 while the response has not gone downstream,
  // else a reset; a reset the second time). It resolves once the stream
  // is over, or is waiting for the upstream's answer.
  wait() {
    return new Promise((resolve) => {
      let since = Date.now(), fired = false;
      const poll = () => {
        this.vm.tick();
        if (this.advance() || this.x.waiting) {
          resolve();
          return;
        }
        if (Date.now() - since > idleMS) {
          if (fired || this.respHdrsOut) {
            this.out.reset = true;
            this.out.details = "stream_idle_timeout";
          } else {
            fired = true;
            since = Date.now();
            this.pendingReply = { status: 408, details: "stream_idle_timeout", body: enc.encode("stream timeout"), headers: [], grpc: -1 };
            this.flush();
          }
          if (this.advance()) {
            resolve();
            return;
          }
        }
        setTimeout(poll, Math.max(10, Math.min(this.vm.tickMS || 100, 100)));
      };
      setTimeout(poll, 10);
    });
  }
  // run advances the stream as far as it goes: to its end, or to the
  // point where the upstream must answer (x.waiting); it resolves (or
  // returns, when nothing had to wait) with the stream ended or open.
  run() {
    if (this.advance() || this.x.waiting) return this.settled();
    return this.wait().then(() => this.settled());
  }
  settled() {
    if (this.x.waiting && !this.over()) return { ...this.result(), open: true };
    if (this.x.reset) {
      this.out.reset = true;
      this.out.details ||= "downstream_remote_disconnect";
    }
    this.end();
    return { ...this.result(), open: false };
  }
  // end runs proxy_on_log, proxy_on_done and proxy_on_delete.
  end() {
    this.ended = true;
    if (!this.vm.failed) {
      this.invoke("proxy_on_log");
      this.invoke("proxy_on_done");
      this.invoke("proxy_on_delete");
    }
    this.pendingReply = null;
    if (this.core) this.flush(); // actions queued now find the stream ended
    this.vm.streams.delete(this.id);
  }
  result() {
    const out = this.out;
    if (this.core && !this.final) {
      // What the filter released to the client and to the upstream.
      if (this.respHdrsOut && !out.reset) {
        out.status = this.respStatus;
        out.headers = this.respHdrs.filter(([k]) => !k.startsWith(":"));
        out.body = this.resp.out;
      }
      out.upstream = this.req.complete && !this.replying;
    }
    return {
      upstream_body: this.core ? Buffer.concat(this.req.out).toString("base64") : "",
      stream: this.id,
      status: out.status,
      local_reply: out.localReply,
      upstream: out.upstream,
      upstream_headers: this.reqHdrsOut,
      reset: out.reset,
      details: out.details,
      headers: out.headers,
      body: Buffer.concat(out.body.map((b) => Buffer.from(b))).toString("base64"),
      failed: this.vm.failed,
      filter_state: Object.fromEntries([...this.props].map(([k, v]) => [k.replaceAll("\0", "."), dec.decode(v)])),
    };
  }
}

// newDir is one direction of a stream as the filter manager sees it
// around this filter.
function newDir() {
  return {
    buf: EMPTY, // what the filter saw and has not released
    mode: "none", // "buffer" after a body pause, "watermark" after 2
    seen: false, // the headers reached the filter
    hdrsHeld: false, // the headers callback stopped iteration
    held: [], // data that arrived and has not reached the filter
    eosIn: false, // the end of stream arrived
    eosDelivered: false, // the filter saw it
    complete: false, // the end passed the filter
    aborted: false,
    out: [], // released past the filter
  };
}

// localReplyHeaders builds a local reply's headers as Envoy's
// Utility::sendLocalReply does: :status, content-length, content-type
// text/plain with a body (unless the plugin set one), then the plugin's.
function localReplyHeaders(lr) {
  const h = [[":status", String(lr.status)]];
  const hasCT = lr.headers.some(([k]) => k.toLowerCase() === "content-type");
  if (lr.body.length > 0) {
    h.push(["content-length", String(lr.body.length)]);
    if (!hasCT) h.push(["content-type", "text/plain"]);
  } else {
    h.push(["content-length", "0"]);
  }
  for (const [k, v] of lr.headers) h.push([k.toLowerCase(), v]);
  return h;
}

// chunks reads body chunks: base64 strings from the protocol, or bytes
// from the HTTP front.
const chunks = (list) => (list || []).map((b) => (typeof b === "string" ? Buffer.from(b, "base64") : b));

function concat(a, b) {
  if (a.length === 0) return Uint8Array.from(b);
  const c = new Uint8Array(a.length + b.length);
  c.set(a, 0);
  c.set(b, a.length);
  return c;
}

// encodePairs is the proxy-wasm header map serialisation: a count, the
// sizes of every name and value, then each NUL-terminated.
function encodePairs(pairs) {
  // The strings are written straight into the buffer (encodeInto); a
  // string's UTF-8 size is its length when it is ASCII, else measured once.
  const sizes = new Array(2 * pairs.length);
  let n = 4 + 8 * pairs.length;
  for (let i = 0; i < pairs.length; i++) {
    const [k, v] = pairs[i];
    const kl = utf8Length(k), vl = utf8Length(v);
    sizes[2 * i] = kl;
    sizes[2 * i + 1] = vl;
    n += kl + vl + 2;
  }
  const b = new Uint8Array(n);
  const dv = new DataView(b.buffer);
  dv.setUint32(0, pairs.length, true);
  let off = 4;
  for (let i = 0; i < sizes.length; i++, off += 4) dv.setUint32(off, sizes[i], true);
  for (let i = 0; i < pairs.length; i++) {
    const [k, v] = pairs[i];
    enc.encodeInto(k, b.subarray(off, off + sizes[2 * i]));
    off += sizes[2 * i] + 1;
    enc.encodeInto(v, b.subarray(off, off + sizes[2 * i + 1]));
    off += sizes[2 * i + 1] + 1;
  }
  return b;
}

// utf8Length returns the size of s in UTF-8.
function utf8Length(s) {
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) return enc.encode(s).length;
  }
  return s.length;
}

function decodePairs(b) {
  if (b.length < 4) return [];
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = dv.getUint32(0, true);
  const sizes = [];
  let off = 4;
  for (let i = 0; i < n; i++, off += 8) sizes.push([dv.getUint32(off, true), dv.getUint32(off + 4, true)]);
  const out = [];
  for (const [kl, vl] of sizes) {
    const k = dec.decode(b.subarray(off, off + kl));
    off += kl + 1;
    const v = dec.decode(b.subarray(off, off + vl));
    off += vl + 1;
    out.push([k, v]);
  }
  return out;
}

// The protocol loop.
const vms = new Map();
let nextVM = 1;
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const send = (o) => process.stdout.write(JSON.stringify(o) + "\n");
// The Go side going away ends the host, HTTP fronts included.
rl.on("close", () => process.exit(0));
rl.on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    send({ id: 0, error: "bad request: " + e.message });
    return;
  }
  const fail = (e) => send({ id: req.id, error: String(e && e.message ? e.message : e) });
  try {
    const r = handle(req);
    if (r instanceof Promise) r.then((v) => send({ id: req.id, ok: true, ...v }), fail);
    else send({ id: req.id, ok: true, ...r });
  } catch (e) {
    fail(e);
  }
});

function handle(req) {
  const vm = vms.get(req.vm);
  switch (req.op) {
    case "start": {
      const v = new VM(req.config);
      const id = nextVM++;
      try {
        v.start();
      } catch (e) {
        throw new Error(e instanceof ProcExit ? e.message + "\n" + v.logs.join("\n") : e.message);
      }
      vms.set(id, v);
      return { vm: id };
    }
    // One whole stream, the upstream's answer given with the request (and
    // handed to the filter when resp_after says).
    case "exchange":
    // A stream in two steps, for a proxy that asks the upstream in between:
    // "begin" runs the stream until the upstream must answer (the result
    // says open), "finish" gives the answer.
    case "begin": {
      const ex = req.exchange;
      const st = new Stream(vm, ex);
      vm.streams.set(st.id, st);
      st.start(ex, req.op === "exchange");
      return st.run();
    }
    case "finish": {
      const st = vm.streams.get(req.stream);
      if (st === undefined || !st.core) throw new Error(`no open stream ${req.stream}`);
      if (req.response) {
        st.x.given = req.response;
      } else {
        // No response: the upstream failed, and Envoy's router answers 503.
        st.pendingReply = { status: 503, details: "upstream_reset_before_response_started{connection_failure}", body: enc.encode("upstream connect error"), headers: [], grpc: -1 };
        st.x.waiting = false;
        st.flush();
      }
      return st.run();
    }
    case "tick":
      vm.tick();
      return {};
    case "logs": {
      const l = vm.logs;
      vm.logs = [];
      return { logs: l };
    }
    case "metrics":
      return {
        metrics: Object.fromEntries(metrics.filter((m) => m.type !== 2).map((m) => [m.name, m.value.toString()])),
        histograms: Object.fromEntries(metrics.filter((m) => m.type === 2).map((m) => [m.name, m.value.toString()])),
      };
    case "memory":
      return { bytes: vm.ex.memory.buffer.byteLength, failed: vm.failed };
    case "usage": {
      const u = process.cpuUsage();
      return { cpu_us: u.user + u.system };
    }
    case "stop":
      vms.delete(req.vm);
      return {};
    case "serve":
      return serve(vm, req.listen, req.upstream);
  }
  throw new Error("unknown op " + req.op);
}

// serve runs an HTTP front in this process: every request on listen
// (host:port) goes through the VM as one stream, to the upstream (a base
// URL), and back through the response side. It streams the way Envoy's
// HCM and router do: the upstream request starts as soon as the filter
// lets the request headers continue, each body chunk the filter releases
// is written to it as it is released, and a local reply after that
// destroys the upstream request (the upstream sees it cut off); response
// headers and body go to the client as the filter releases them, and a
// local reply after the response headers went out resets the client's
// stream. It is the bench's V8 server; being in the same process as the
// VM, it adds only the HTTP handling to what the plugin costs: Node's
// server for the client, and for the upstream an UpstreamPool (kept-alive
// connections read with Node's HTTP parser, no http.Agent). A request
// costs one write to the upstream and one to the client (the response's
// headers go with its first body bytes). Ticks run at the period the
// plugin set, as Envoy's dispatcher runs them.
function serve(vm, listen, upstream) {
  const pool = new UpstreamPool(new URL(upstream));
  const colon = listen.lastIndexOf(":");
  const host = listen.slice(0, colon), port = Number(listen.slice(colon + 1));
  const server = http.createServer((req, res) => front(vm, pool, req, res));
  server.keepAliveTimeout = 90000;
  if (vm.tickMS > 0) setInterval(() => vm.tick(), vm.tickMS).unref();
  return new Promise((resolve, reject) => {
    server.once("error", (e) => reject(new Error(`serve on ${listen}: ${e.message}`)));
    server.listen(port, host, () => resolve({ listen }));
  });
}

// headerPairs turns Node's raw header list into lower-case pairs.
function headerPairs(raw) {
  const out = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i].toLowerCase(), raw[i + 1]]);
  return out;
}

// invalidHeader is what Node's HTTP client refuses in a header value.
const invalidHeader = /[^\t\x20-\x7e\x80-\xff]/;
const invalidToken = /[^^_`a-zA-Z\-0-9!#$%&'*+.|~]/;

const hopHeaders = new Set(["connection", "keep-alive", "proxy-connection", "upgrade", "te"]);

// front runs one request of the HTTP front as one stream.
function front(vm, pool, req, res) {
  // As Envoy's HCM hands them over: x-forwarded-proto and x-request-id
  // added when missing (the wazero host's front does the same). One pass
  // over the raw headers; Node's header object is never built.
  const reqHeaders = [[":method", req.method], [":path", req.url], [":authority", ""], [":scheme", "http"]];
  const raw = req.rawHeaders;
  let authority, contentLength, chunkedIn = false, proto = false, requestID = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i].toLowerCase(), v = raw[i + 1];
    if (k === "host") {
      if (authority === undefined) authority = v;
      continue;
    }
    if (k === "content-length") contentLength ??= v;
    else if (k === "transfer-encoding") chunkedIn = true;
    else if (k === "x-forwarded-proto") proto = true;
    else if (k === "x-request-id") requestID = true;
    reqHeaders.push([k, v]);
  }
  reqHeaders[2][1] = authority ?? "";
  const hasBody = Number(contentLength || 0) > 0 || chunkedIn;
  if (!proto) reqHeaders.push(["x-forwarded-proto", "http"]);
  if (!requestID) reqHeaders.push(["x-request-id", randomUUID()]);
  const ex = {
    headers: reqHeaders,
    info: { source: `${req.socket.remoteAddress}:${req.socket.remotePort}`, destination: "127.0.0.1:8080", protocol: "HTTP/" + req.httpVersion },
  };
  const st = new Stream(vm, ex);
  vm.streams.set(st.id, st);
  let ureq = null, upDone = false, done = false, sentHeaders = false;
  // abortUp cuts the upstream request off, as the router's reset does.
  const abortUp = () => {
    if (ureq !== null && !upDone) {
      upDone = true;
      ureq.destroy();
    }
  };
  // answer ends the stream with what st.out holds: a local reply, or a
  // reset once response headers went to the client.
  const answer = () => {
    if (done) return;
    done = true;
    abortUp();
    if (!st.ended) st.end();
    if (sentHeaders) {
      flushHead(); // the client gets the headers, then the reset
      res.destroy();
    } else {
      if (!req.complete) {
        res.shouldKeepAlive = false;
        // Envoy closes such a connection after a delay (its
        // delayed_close_timeout, 1 s): it half-closes and keeps reading
        // what the client still sends, so that the client reads the reply
        // rather than a reset of a write.
        req.socket.destroySoon = function () {
          this.end();
          setTimeout(() => this.destroy(), 1000).unref();
        };
      }
      reply(res, st.out);
    }
    req.resume();
  };
  const localReply = (status, details, body) => {
    st.pendingReply = { status, details, body: enc.encode(body), headers: [], grpc: -1 };
    st.reply();
    answer();
  };
  const stuck = () => {
    // A pause on headers holds the body back as well: no body callback
    // until the plugin answers from its tick (or the idle timeout).
    done = true;
    abortUp();
    st.settle().then(() => {
      reply(res, st.out);
      req.resume();
    });
  };
  // openUp sends the request head upstream, with the headers as the
  // filter left them (the client's Host, no hop-by-hop ones; a header
  // Node's client would refuse is left out), framed as Node's client
  // frames it: the body as is with a content-length, else chunked.
  const openUp = () => {
    if (ureq !== null) return;
    let head = req.method + " " + req.url + " HTTP/1.1\r\nhost: " + reqHeaders[2][1] + "\r\n";
    let length = false, chunked = false;
    for (const [k, v] of st.reqHdrs) {
      if (k.charCodeAt(0) === 58 || k === "host" || hopHeaders.has(k) || invalidToken.test(k) || invalidHeader.test(v)) continue;
      if (k === "content-length") length = true;
      else if (k === "transfer-encoding") chunked = true;
      head += k + ": " + v + "\r\n";
    }
    if (hasBody && !length && !chunked) {
      head += "transfer-encoding: chunked\r\n";
      chunked = true;
    }
    ureq = pool.request(head + "\r\n", chunked, req.method === "HEAD", upstreamEvents);
  };
  // feedBody hands one body chunk to the VM and returns what it released,
  // or null when the stream ended there: the VM failed, answered, or the
  // body passed its buffer limit (Envoy's local reply status and details).
  const feedBody = (response, chunk, eos, status, details, text) => {
    const r = st.body(response, [chunk], eos);
    if (vm.failed) {
      st.failReply();
      answer();
    } else if (r.replied) {
      st.reply();
      answer();
    } else if (r.overflow) {
      localReply(status, details, text);
    } else {
      return r;
    }
    return null;
  };
  const reqBody = (chunk, eos) => {
    if (done) return;
    const r = feedBody(false, chunk, eos, 413, "request_payload_too_large", "Payload Too Large");
    if (r === null) return;
    if (st.reqHdrsOut) openUp();
    for (const b of r.released) if (b.length > 0) ureq.write(b);
    if (eos && r.done) {
      st.out.upstream = true;
      ureq.end();
    }
  };
  const writeHeaders = (contentLength) => {
    sentHeaders = true;
    const h = [];
    for (const [k, v] of st.respHdrs) {
      if (k.startsWith(":") || k === "transfer-encoding" || hopHeaders.has(k)) continue;
      if (k === "content-length" && contentLength !== undefined) continue;
      h.push(k, v);
    }
    if (contentLength !== undefined) h.push("content-length", String(contentLength));
    res.writeHead(st.respStatus, h);
    // The headers go out with the first body bytes, in one write; when
    // none came in the same read from the upstream (it streams), on
    // their own once that read is handled.
    queueMicrotask(flushHead);
  };
  const flushHead = () => {
    if (!res._headerSent && !res.destroyed) res.flushHeaders();
  };
  const respBody = (chunk, eos) => {
    if (done) return;
    const r = feedBody(true, chunk, eos, 500, "response_payload_too_large", "Internal Server Error");
    if (r === null) return;
    if (st.respHdrsOut && !sentHeaders) writeHeaders(eos && r.done ? r.released.reduce((n, b) => n + b.length, 0) : undefined);
    // Corked: the headers, if still unsent, and the released chunks go
    // out in one write.
    res.cork();
    for (const b of r.released) if (b.length > 0) res.write(b);
    if (eos && r.done) {
      done = true;
      upDone = true;
      st.out.status = st.respStatus;
      st.end();
      res.end();
    }
    res.uncork();
  };
  // What the upstream connection reports: the response head, its body as
  // it is read, its end, and a failure (before the response began, or
  // cutting it off).
  const upstreamEvents = {
    response: onResponse,
    body: (b) => respBody(b, false),
    end: () => respBody(EMPTY, true),
    failed: (beforeResponse) => {
      if (done || upDone) return;
      if (beforeResponse) {
        upDone = true;
        // Envoy's router answers 503 when the upstream fails.
        localReply(503, "upstream_reset_before_response_started{connection_failure}", "upstream connect error");
        return;
      }
      // The upstream went away mid-response: Envoy resets the stream.
      upDone = true;
      st.out.reset = true;
      answer();
    },
  };
  function onResponse(status, raw) {
    if (done) return;
    const rh = [[":status", String(status)], ...headerPairs(raw)];
    let eos = status === 204 || status === 304 || req.method === "HEAD";
    for (let i = 1; i < rh.length && !eos; i++) {
      if (rh[i][0] === "content-length") {
        eos = rh[i][1] === "0";
        break;
      }
    }
    st.respHdrs = rh;
    st.respStatus = status;
    st.respDetails = "via_upstream";
    const ha = st.invoke("proxy_on_response_headers", rh.length, eos ? 1 : 0);
    st.respHdrsOut = st.pendingReply === null && (ha === 0 || ha === 2);
    if (vm.failed) {
      st.failReply();
      answer();
      return;
    }
    if (st.pendingReply !== null) {
      st.reply();
      answer();
      return;
    }
    // A HEAD response keeps the length the upstream gave.
    if (st.respHdrsOut) writeHeaders(eos && req.method !== "HEAD" ? 0 : undefined);
    if (eos) {
      done = upDone = true;
      st.end();
      res.end();
      return;
    }
    if (!st.respHdrsOut && !vm.allowStopIteration) stuck();
  }

  if (vm.failed) {
    st.failReply();
    answer();
    return;
  }
  st.invoke("proxy_on_context_create", vm.rootID);
  const ha = st.invoke("proxy_on_request_headers", st.reqHdrs.length, hasBody ? 0 : 1);
  if (vm.failed) {
    st.failReply();
    answer();
    return;
  }
  if (st.pendingReply !== null) {
    st.reply(); // the upstream never sees the request
    answer();
    return;
  }
  const held = !(ha === 0 || ha === 2);
  if (!held) {
    st.reqHdrsOut = true;
    openUp();
  }
  if (!hasBody) {
    if (held) {
      stuck();
      return;
    }
    st.out.upstream = true;
    ureq.end();
    return;
  }
  if (held && !vm.allowStopIteration) {
    stuck();
    return;
  }
  req.on("data", (c) => reqBody(c, false));
  req.on("end", () => reqBody(EMPTY, true));
  req.on("close", () => {
    // The client went away: the stream ends without a response.
    if (done || req.complete) return;
    st.out.reset = true;
    answer();
  });
  req.on("error", () => res.destroy());
}

// UpstreamPool is the front's client to its upstream: kept-alive
// connections, the last released taken first, each with Node's HTTP
// parser (llhttp) reading the responses. Node's http.Agent and
// ClientRequest do the same with an object, listeners and a stream per
// request; this does it with what a connection already holds.
class UpstreamPool {
  constructor(url) {
    this.host = url.hostname;
    this.port = Number(url.port || 80);
    this.idle = [];
  }
  // request sends head (the request line and headers, latin1 as Node's
  // client writes them) and returns the connection, which takes the body
  // (write, end) and reports to events.
  request(head, chunked, isHead, events) {
    const c = this.idle.pop() ?? new UpstreamConn(this);
    c.start(head, chunked, isHead, events);
    return c;
  }
}

const { kOnHeaders, kOnHeadersComplete, kOnBody, kOnMessageComplete, kOnMessageBegin } = HTTPParser;
const upstreamReadBuffer = Buffer.allocUnsafe(64 << 10);

// UpstreamConn is one connection of an UpstreamPool, carrying one request
// at a time.
class UpstreamConn {
  constructor(pool) {
    this.pool = pool;
    this.events = null; // the request in progress; null while idle
    this.partial = [];
    const p = (this.parser = new HTTPParser());
    p.initialize(HTTPParser.RESPONSE, {}, 0, 0);
    p[kOnMessageBegin] = () => {};
    // Headers that came in several reads arrive in parts.
    p[kOnHeaders] = (h) => {
      for (const x of h) this.partial.push(x);
    };
    p[kOnHeadersComplete] = (_maj, _min, headers, _method, _url, status, _msg, _upgrade, keepAlive) => {
      if (headers === undefined) {
        headers = this.partial;
        this.partial = [];
      }
      // An informational response (100 Continue) is skipped, as Node's
      // client does.
      if (status < 200 && status !== 101) {
        this.info = true;
        return 1;
      }
      this.started = true;
      this.keepAlive = keepAlive;
      this.events?.response(status, headers);
      return this.isHead ? 1 : 0;
    };
    p[kOnBody] = (b) => this.events?.body(b);
    p[kOnMessageComplete] = () => {
      if (this.info) {
        this.info = false;
        return;
      }
      const ev = this.events;
      if (ev === null) return;
      this.events = null;
      ev.end();
      // Kept alive only when the request went out whole and the
      // upstream keeps it; otherwise (a response before the request's
      // end, or Connection: close) the connection is closed.
      if (this.keepAlive && this.reqDone && !this.sock.destroyed) this.pool.idle.push(this);
      else this.sock.destroy();
    };
    // Reads land in one buffer shared by the pool's connections (the
    // parser copies what it keeps), without a stream in between.
    const s = (this.sock = net.connect({
      host: pool.host,
      port: pool.port,
      noDelay: true,
      onread: {
        buffer: upstreamReadBuffer,
        callback: (n, buf) => {
          if (this.events === null) {
            // Bytes on an idle connection: nothing to read them as.
            s.destroy();
            return false;
          }
          if (p.execute(buf.subarray(0, n)) instanceof Error) {
            s.destroy();
            return false;
          }
        },
      },
    }));
    // A close-delimited body ends with the connection.
    s.on("end", () => {
      if (this.events !== null) p.finish();
    });
    s.on("error", () => {});
    s.on("close", () => {
      const i = this.pool.idle.indexOf(this);
      if (i >= 0) this.pool.idle.splice(i, 1);
      const ev = this.events;
      this.events = null;
      if (ev !== null) ev.failed(!this.started);
      p.free();
    });
  }
  start(head, chunked, isHead, events) {
    this.events = events;
    this.chunked = chunked;
    this.isHead = isHead;
    this.started = this.reqDone = this.info = false;
    this.sock.write(head, "latin1");
  }
  write(b) {
    if (!this.chunked) {
      this.sock.write(b);
      return;
    }
    this.sock.cork();
    this.sock.write(b.length.toString(16) + "\r\n", "latin1");
    this.sock.write(b);
    this.sock.write("\r\n", "latin1");
    this.sock.uncork();
  }
  end() {
    this.reqDone = true;
    if (this.chunked) this.sock.write("0\r\n\r\n", "latin1");
  }
  // destroy cuts the request off: the upstream sees the connection close.
  destroy() {
    this.events = null;
    this.sock.destroy();
  }
}

// reply writes what the client gets: the status, headers and body, or a
// reset.
function reply(res, out) {
  if (out.reset || out.status === 0) {
    res.destroy();
    return;
  }
  const body = Buffer.concat(out.body.map((b) => Buffer.from(b)));
  const h = [];
  for (const [k, v] of out.headers) {
    if (k === "content-length" || k === "transfer-encoding" || k === "connection") continue;
    h.push(k, v);
  }
  h.push("content-length", String(body.length));
  res.writeHead(out.status, h);
  res.end(body);
}
