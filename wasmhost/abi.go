package wasmhost

import (
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// Status is a proxy-wasm status code (proxy_status_t, cpp-host WasmResult).
type Status uint32

// Status codes.
const (
	StatusOK                   Status = 0
	StatusNotFound             Status = 1
	StatusBadArgument          Status = 2
	StatusSerializationFailure Status = 3
	StatusParseFailure         Status = 4
	StatusInvalidMemoryAccess  Status = 6
	StatusEmpty                Status = 7
	StatusCasMismatch          Status = 8
	StatusInternalFailure      Status = 10
	StatusBrokenConnection     Status = 11
	StatusUnimplemented        Status = 12
)

// Buffer types (proxy_buffer_type_t).
const (
	bufRequestBody   = 0
	bufResponseBody  = 1
	bufVMConfig      = 6
	bufPluginConfig  = 7
	bufMaxType       = 8
	mapMaxType       = 7
	streamTypeMaxABI = 3
)

func (vm *VM) read(ptr, size uint32) ([]byte, bool) {
	if size == 0 {
		return nil, true
	}
	return vm.mem.Read(ptr, size)
}

func (vm *VM) readString(ptr, size uint32) (string, bool) {
	b, ok := vm.read(ptr, size)
	return string(b), ok
}

// writeOut returns data to the guest through an out-pointer pair, with the
// allocation discipline of cpp-host (notes 9.9): at most one allocation per
// host call, written immediately, and pointer 0/size 0 without allocating
// for an empty value. data must not alias guest memory.
func (vm *VM) writeOut(data []byte, ptrPtr, sizePtr uint32) Status {
	if _, ok := vm.mem.Read(ptrPtr, 4); !ok {
		return StatusInvalidMemoryAccess
	}
	if _, ok := vm.mem.Read(sizePtr, 4); !ok {
		return StatusInvalidMemoryAccess
	}
	if len(data) == 0 {
		vm.mem.WriteUint32Le(ptrPtr, 0)
		vm.mem.WriteUint32Le(sizePtr, 0)
		return StatusOK
	}
	p := vm.allocate(uint32(len(data)))
	if p == 0 || !vm.mem.Write(p, data) {
		return StatusInvalidMemoryAccess
	}
	if !vm.mem.WriteUint32Le(ptrPtr, p) || !vm.mem.WriteUint32Le(sizePtr, uint32(len(data))) {
		return StatusInvalidMemoryAccess
	}
	return StatusOK
}

func ret(stack []uint64, s Status) { stack[0] = uint64(s) }

func (m *Module) envFuncs() []*hostFunc {
	f := func(name string, n int, fn func(vm *VM, s []uint64)) *hostFunc {
		return &hostFunc{module: "env", name: name, params: sig(n), results: sig(1), fn: fn}
	}
	log := f("proxy_log", 3, (*VM).hProxyLog)
	// proxy_log may run during _initialize and allocation (notes 1.4).
	log.inInit, log.inAlloc = true, true
	notify := &hostFunc{module: "env", name: "emscripten_notify_memory_growth", params: sig(1), fn: func(*VM, []uint64) {}, inInit: true}
	inc := f("proxy_increment_metric", 2, (*VM).hIncrementMetric)
	inc.params = []api.ValueType{i32, i64}
	rec := f("proxy_record_metric", 2, (*VM).hRecordMetric)
	rec.params = []api.ValueType{i32, i64}
	done := &hostFunc{module: "env", name: "proxy_done", results: sig(1), fn: func(_ *VM, s []uint64) { ret(s, StatusNotFound) }}
	return []*hostFunc{
		log, notify, inc, rec, done,
		f("proxy_get_current_time_nanoseconds", 1, (*VM).hCurrentTime),
		f("proxy_set_tick_period_milliseconds", 1, (*VM).hSetTickPeriod),
		f("proxy_set_effective_context", 1, (*VM).hSetEffectiveContext),
		f("proxy_get_property", 4, (*VM).hGetProperty),
		f("proxy_set_property", 4, (*VM).hSetProperty),
		f("proxy_get_buffer_bytes", 5, (*VM).hGetBufferBytes),
		f("proxy_set_buffer_bytes", 5, (*VM).hSetBufferBytes),
		f("proxy_get_buffer_status", 3, (*VM).hGetBufferStatus),
		f("proxy_get_header_map_value", 5, (*VM).hGetHeaderMapValue),
		f("proxy_add_header_map_value", 5, (*VM).hAddHeaderMapValue),
		f("proxy_replace_header_map_value", 5, (*VM).hReplaceHeaderMapValue),
		f("proxy_remove_header_map_value", 3, (*VM).hRemoveHeaderMapValue),
		f("proxy_get_header_map_pairs", 3, (*VM).hGetHeaderMapPairs),
		f("proxy_set_header_map_pairs", 3, (*VM).hSetHeaderMapPairs),
		f("proxy_get_header_map_size", 2, (*VM).hGetHeaderMapSize),
		f("proxy_continue_stream", 1, (*VM).hContinueStream),
		f("proxy_close_stream", 1, (*VM).hCloseStream),
		f("proxy_send_local_response", 8, (*VM).hSendLocalResponse),
		f("proxy_http_call", 10, (*VM).hHTTPCall),
		f("proxy_get_status", 3, (*VM).hGetStatus),
		f("proxy_call_foreign_function", 6, (*VM).hCallForeignFunction),
		f("proxy_get_shared_data", 5, (*VM).hGetSharedData),
		f("proxy_set_shared_data", 5, (*VM).hSetSharedData),
		f("proxy_register_shared_queue", 3, (*VM).hRegisterSharedQueue),
		f("proxy_resolve_shared_queue", 5, (*VM).hResolveSharedQueue),
		f("proxy_enqueue_shared_queue", 3, (*VM).hEnqueueSharedQueue),
		f("proxy_dequeue_shared_queue", 3, (*VM).hDequeueSharedQueue),
		f("proxy_define_metric", 4, (*VM).hDefineMetric),
		f("proxy_get_metric", 2, (*VM).hGetMetric),
	}
}

// hProxyLog: proxy_log(level, msg_ptr, msg_size). Level > 5 is BadArgument
// (cpp-host exports.cc proxy_log), which the Go SDK turns into a panic.
func (vm *VM) hProxyLog(s []uint64) {
	level := uint32(s[0])
	if level > uint32(LevelCritical) {
		ret(s, StatusBadArgument)
		return
	}
	msg, ok := vm.readString(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	vm.logAt(LogLevel(level), vm.eff, msg)
	ret(s, StatusOK)
}

// hCurrentTime: proxy_get_current_time_nanoseconds(time_ptr), Envoy's wall
// clock, not frozen during a callback.
func (vm *VM) hCurrentTime(s []uint64) {
	if !vm.mem.WriteUint64Le(uint32(s[0]), uint64(time.Now().UnixNano())) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// hSetTickPeriod: proxy_set_tick_period_milliseconds(period). From a stream
// context it sets the stream's root context timer (Envoy Context::setTimerPeriod
// uses root_context_id_).
func (vm *VM) hSetTickPeriod(s []uint64) {
	vm.setTickPeriod(time.Duration(uint32(s[0])) * time.Millisecond)
	ret(s, StatusOK)
}

// hSetEffectiveContext: proxy_set_effective_context(id); BadArgument for an
// unknown id (cpp-host exports.cc set_effective_context).
func (vm *VM) hSetEffectiveContext(s []uint64) {
	id := uint32(s[0])
	if id != vm.rootID {
		if st, ok := vm.streams[id]; !ok || st.deleted {
			ret(s, StatusBadArgument)
			return
		}
	}
	vm.eff = id
	ret(s, StatusOK)
}

// hGetBufferBytes: proxy_get_buffer_bytes(type, start, max_size, ptr_ptr,
// size_ptr) with Envoy's Buffer::copyTo clipping (notes 3.5).
func (vm *VM) hGetBufferBytes(s []uint64) {
	typ, start, max := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if typ > bufMaxType {
		ret(s, StatusBadArgument)
		return
	}
	if uint64(start)+uint64(max) > math.MaxUint32 {
		ret(s, StatusBadArgument)
		return
	}
	var data []byte
	switch typ {
	case bufVMConfig:
		data = vm.cfg.VMConfiguration
	case bufPluginConfig:
		// The plugin configuration is only readable while
		// proxy_on_configure (or the root on_context_create) runs.
		if !vm.configReadable {
			ret(s, StatusNotFound)
			return
		}
		data = vm.cfg.Configuration
	case bufRequestBody, bufResponseBody:
		st := vm.effStream()
		if st == nil {
			ret(s, StatusNotFound)
			return
		}
		data = st.bodyBuffer(typ == bufResponseBody)
	default:
		ret(s, StatusNotFound)
		return
	}
	if int(start) >= len(data) {
		data = nil
	} else {
		end := len(data)
		if uint64(start)+uint64(max) < uint64(end) {
			end = int(start + max)
		}
		data = data[start:end]
	}
	ret(s, vm.writeOut(append([]byte(nil), data...), uint32(s[3]), uint32(s[4])))
}

// hSetBufferBytes: proxy_set_buffer_bytes(type, start, size, data_ptr,
// data_size) on HTTP bodies (Envoy Context::setBuffer): start 0 drops size
// bytes from the front and prepends; start ≥ length appends; anything in
// between is BadArgument. Configurations cannot be written.
func (vm *VM) hSetBufferBytes(s []uint64) {
	typ, start, size := uint32(s[0]), uint32(s[1]), uint32(s[2])
	data, ok := vm.read(uint32(s[3]), uint32(s[4]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	st := vm.effStream()
	if (typ != bufRequestBody && typ != bufResponseBody) || st == nil {
		ret(s, StatusBadArgument)
		return
	}
	d := st.dir(typ == bufResponseBody)
	n := uint32(len(d.buf))
	switch {
	case start == 0:
		drop := size
		if drop > n {
			drop = n
		}
		nb := make([]byte, 0, len(data)+int(n-drop))
		nb = append(nb, data...)
		nb = append(nb, d.buf[drop:]...)
		d.buf = nb
	case start >= n:
		d.buf = append(d.buf, data...)
	default:
		ret(s, StatusBadArgument)
		return
	}
	ret(s, StatusOK)
}

// hGetBufferStatus: proxy_get_buffer_status(type, length_ptr, flags_ptr).
func (vm *VM) hGetBufferStatus(s []uint64) {
	typ := uint32(s[0])
	var n int
	switch typ {
	case bufVMConfig:
		n = len(vm.cfg.VMConfiguration)
	case bufPluginConfig:
		if !vm.configReadable {
			ret(s, StatusNotFound)
			return
		}
		n = len(vm.cfg.Configuration)
	case bufRequestBody, bufResponseBody:
		st := vm.effStream()
		if st == nil {
			ret(s, StatusNotFound)
			return
		}
		n = len(st.bodyBuffer(typ == bufResponseBody))
	default:
		if typ > bufMaxType {
			ret(s, StatusBadArgument)
		} else {
			ret(s, StatusNotFound)
		}
		return
	}
	if !vm.mem.WriteUint32Le(uint32(s[1]), uint32(n)) || !vm.mem.WriteUint32Le(uint32(s[2]), 0) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// headerMap finds the map of the effective context (notes 3.2).
func (vm *VM) headerMap(typ uint32, write bool) (*[][2]string, Status) {
	if typ > mapMaxType {
		return nil, StatusBadArgument
	}
	st := vm.effStream()
	if st == nil {
		return nil, StatusBadArgument
	}
	return st.headerMap(typ, write)
}

// hGetHeaderMapValue: proxy_get_header_map_value(map, key_ptr, key_size,
// val_ptr_ptr, val_size_ptr): lower-cased key, first value only.
func (vm *VM) hGetHeaderMapValue(s []uint64) {
	key, ok := vm.readString(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	h, st := vm.headerMap(uint32(s[0]), false)
	if h == nil {
		ret(s, st)
		return
	}
	v, found := headerGet(*h, strings.ToLower(key))
	if !found {
		ret(s, StatusNotFound)
		return
	}
	ret(s, vm.writeOut([]byte(v), uint32(s[3]), uint32(s[4])))
}

func (vm *VM) mutateHeader(s []uint64, f func(h [][2]string, k, v string) [][2]string, withValue bool) {
	key, ok := vm.readString(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	var val string
	if withValue {
		if val, ok = vm.readString(uint32(s[3]), uint32(s[4])); !ok {
			ret(s, StatusInvalidMemoryAccess)
			return
		}
	}
	h, st := vm.headerMap(uint32(s[0]), true)
	if h == nil {
		ret(s, st)
		return
	}
	*h = f(*h, strings.ToLower(key), val)
	if es := vm.effStream(); es != nil {
		es.headersModified(uint32(s[0]))
	}
	ret(s, StatusOK)
}

// hAddHeaderMapValue: proxy_add_header_map_value (HeaderMap::addCopy). The
// host always adds another entry; Envoy appends with "," for some inline
// headers (a documented deviation).
func (vm *VM) hAddHeaderMapValue(s []uint64) { vm.mutateHeader(s, headerAdd, true) }

// hReplaceHeaderMapValue: proxy_replace_header_map_value (setCopy).
func (vm *VM) hReplaceHeaderMapValue(s []uint64) { vm.mutateHeader(s, headerReplace, true) }

// hRemoveHeaderMapValue: proxy_remove_header_map_value; Ok when absent.
func (vm *VM) hRemoveHeaderMapValue(s []uint64) {
	vm.mutateHeader(s, func(h [][2]string, k, _ string) [][2]string { return headerRemove(h, k) }, false)
}

// hGetHeaderMapPairs: proxy_get_header_map_pairs(map, ptr_ptr, size_ptr):
// Ok always; an unavailable or empty map gives pointer 0/size 0.
func (vm *VM) hGetHeaderMapPairs(s []uint64) {
	h, _ := vm.headerMap(uint32(s[0]), false)
	var b []byte
	if h != nil {
		b = encodePairs(*h)
	}
	ret(s, vm.writeOut(b, uint32(s[1]), uint32(s[2])))
}

// hSetHeaderMapPairs: proxy_set_header_map_pairs(map, ptr, size) removes
// every entry and adds the given pairs; a malformed buffer is parsed as zero
// pairs, which clears the map (cpp-host PairsUtil::toPairs).
func (vm *VM) hSetHeaderMapPairs(s []uint64) {
	b, ok := vm.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	h, st := vm.headerMap(uint32(s[0]), true)
	if h == nil {
		ret(s, st)
		return
	}
	pairs, _ := decodePairs(b)
	nh := make([][2]string, 0, len(pairs))
	for _, p := range pairs {
		nh = headerAdd(nh, strings.ToLower(p[0]), p[1])
	}
	*h = nh
	if es := vm.effStream(); es != nil {
		es.headersModified(uint32(s[0]))
	}
	ret(s, StatusOK)
}

// hGetHeaderMapSize: proxy_get_header_map_size(map, size_ptr) gives the
// byte size of the map (Envoy HeaderMap::byteSize), not the entry count.
func (vm *VM) hGetHeaderMapSize(s []uint64) {
	h, st := vm.headerMap(uint32(s[0]), false)
	if h == nil {
		ret(s, st)
		return
	}
	if !vm.mem.WriteUint32Le(uint32(s[1]), uint32(headerSize(*h))) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// hContinueStream: proxy_continue_stream(stream_type). Deferred until the
// outermost callback returns (cpp-host addAfterVmCallAction). Upstream (3)
// is Unimplemented, > 3 BadArgument; in a root context it is a no-op.
func (vm *VM) hContinueStream(s []uint64) {
	typ := uint32(s[0])
	switch {
	case typ > streamTypeMaxABI:
		ret(s, StatusBadArgument)
		return
	case typ >= 2:
		ret(s, StatusUnimplemented)
		return
	}
	if st := vm.effStream(); st != nil {
		st.clearRequestMaps()
		vm.deferAction(func() { st.resume(typ == 1) })
	}
	ret(s, StatusOK)
}

// hCloseStream: proxy_close_stream(stream_type) resets the stream after
// the callback (Envoy resetStream, details wasm_close_stream).
func (vm *VM) hCloseStream(s []uint64) {
	if uint32(s[0]) > streamTypeMaxABI {
		ret(s, StatusBadArgument)
		return
	}
	if st := vm.effStream(); st != nil {
		vm.deferAction(func() { st.resetStream("wasm_close_stream") })
	}
	ret(s, StatusOK)
}

// hSendLocalResponse: proxy_send_local_response(status, details_ptr,
// details_size, body_ptr, body_size, headers_ptr, headers_size,
// grpc_status). Always Ok once the arguments read; malformed headers mean
// no extra headers; spaces in details become "_"; the reply is sent after
// the callback (Envoy Context::sendLocalResponse).
func (vm *VM) hSendLocalResponse(s []uint64) {
	details, ok1 := vm.readString(uint32(s[1]), uint32(s[2]))
	body, ok2 := vm.read(uint32(s[3]), uint32(s[4]))
	hb, ok3 := vm.read(uint32(s[5]), uint32(s[6]))
	if !ok1 || !ok2 || !ok3 {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	st := vm.effStream()
	if st == nil {
		ret(s, StatusOK)
		return
	}
	pairs, _ := decodePairs(hb)
	lr := &LocalReply{
		Status:     int(uint32(s[0])),
		Details:    strings.ReplaceAll(details, " ", "_"),
		Body:       append([]byte(nil), body...),
		Headers:    pairs,
		GRPCStatus: int32(uint32(s[7])),
	}
	st.queueLocalReply(lr)
	ret(s, StatusOK)
}

// hHTTPCall: proxy_http_call. The host has no clusters, and Envoy answers
// BadArgument for an unknown cluster (Context::httpCall), so every call
// gets BadArgument after its arguments are read.
func (vm *VM) hHTTPCall(s []uint64) {
	if _, ok := vm.read(uint32(s[0]), uint32(s[1])); !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusBadArgument)
}

// hGetStatus: proxy_get_status(code_ptr, msg_ptr_ptr, msg_size_ptr). No
// gRPC or HTTP call ever completes here, so it reports 0 and no message.
func (vm *VM) hGetStatus(s []uint64) {
	if !vm.mem.WriteUint32Le(uint32(s[0]), 0) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, vm.writeOut(nil, uint32(s[1]), uint32(s[2])))
}

// hCallForeignFunction: unknown names give NotFound; the host registers none.
func (vm *VM) hCallForeignFunction(s []uint64) {
	if _, ok := vm.read(uint32(s[0]), uint32(s[1])); !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusNotFound)
}

// hGetSharedData: proxy_get_shared_data(key_ptr, key_size, value_ptr_ptr,
// value_size_ptr, cas_ptr) in this VM's vm_id namespace.
func (vm *VM) hGetSharedData(s []uint64) {
	key, ok := vm.readString(uint32(s[0]), uint32(s[1]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	v, cas, found := vm.host.GetSharedData(vm.cfg.VMID, key)
	if !found {
		ret(s, StatusNotFound)
		return
	}
	if !vm.mem.WriteUint32Le(uint32(s[4]), cas) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, vm.writeOut(v, uint32(s[2]), uint32(s[3])))
}

// hSetSharedData: proxy_set_shared_data(key_ptr, key_size, value_ptr,
// value_size, cas); see Host.SetSharedData.
func (vm *VM) hSetSharedData(s []uint64) {
	key, ok1 := vm.readString(uint32(s[0]), uint32(s[1]))
	val, ok2 := vm.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, vm.host.SetSharedData(vm.cfg.VMID, key, val, uint32(s[4])))
}

// hRegisterSharedQueue: proxy_register_shared_queue(name_ptr, name_size,
// queue_id_ptr): a queue of this VM's vm_id, owned by its root context.
func (vm *VM) hRegisterSharedQueue(s []uint64) {
	name, ok := vm.readString(uint32(s[0]), uint32(s[1]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	id := vm.host.registerQueue(vm.cfg.VMID, name, vm, vm.rootID)
	if !vm.mem.WriteUint32Le(uint32(s[2]), id) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// hResolveSharedQueue: proxy_resolve_shared_queue(vm_id_ptr, vm_id_size,
// name_ptr, name_size, queue_id_ptr); an empty vm_id means this VM's own.
func (vm *VM) hResolveSharedQueue(s []uint64) {
	vmID, ok1 := vm.readString(uint32(s[0]), uint32(s[1]))
	name, ok2 := vm.readString(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	if vmID == "" {
		vmID = vm.cfg.VMID
	}
	id, found := vm.host.resolveQueue(vmID, name)
	if !found {
		ret(s, StatusNotFound)
		return
	}
	if !vm.mem.WriteUint32Le(uint32(s[4]), id) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// hEnqueueSharedQueue: proxy_enqueue_shared_queue(queue_id, value_ptr,
// value_size); see Host.enqueue.
func (vm *VM) hEnqueueSharedQueue(s []uint64) {
	data, ok := vm.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, vm.host.enqueue(uint32(s[0]), data))
}

// hDequeueSharedQueue: proxy_dequeue_shared_queue(queue_id, value_ptr_ptr,
// value_size_ptr); Empty when the queue has nothing.
func (vm *VM) hDequeueSharedQueue(s []uint64) {
	data, st := vm.host.dequeue(uint32(s[0]))
	if st != StatusOK {
		ret(s, st)
		return
	}
	ret(s, vm.writeOut(data, uint32(s[1]), uint32(s[2])))
}

// hDefineMetric: proxy_define_metric(type, name_ptr, name_size, id_ptr);
// type > 2 is BadArgument.
func (vm *VM) hDefineMetric(s []uint64) {
	typ := uint32(s[0])
	name, ok := vm.readString(uint32(s[1]), uint32(s[2]))
	if !ok {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	if typ > uint32(MetricHistogram) {
		ret(s, StatusBadArgument)
		return
	}
	id := vm.host.metrics.define(MetricType(typ), name)
	if !vm.mem.WriteUint32Le(uint32(s[3]), id) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

// hIncrementMetric: proxy_increment_metric(metric_id, offset i64); see
// metricStore.increment.
func (vm *VM) hIncrementMetric(s []uint64) {
	ret(s, vm.host.metrics.increment(uint32(s[0]), int64(s[1])))
}

// hRecordMetric: proxy_record_metric(metric_id, value u64); see
// metricStore.record.
func (vm *VM) hRecordMetric(s []uint64) {
	ret(s, vm.host.metrics.record(uint32(s[0]), s[1]))
}

// hGetMetric: proxy_get_metric(metric_id, value_ptr): a counter's or a
// gauge's value; a histogram is BadArgument.
func (vm *VM) hGetMetric(s []uint64) {
	v, st := vm.host.metrics.value(uint32(s[0]))
	if st != StatusOK {
		ret(s, st)
		return
	}
	if !vm.mem.WriteUint64Le(uint32(s[1]), v) {
		ret(s, StatusInvalidMemoryAccess)
		return
	}
	ret(s, StatusOK)
}

func putU64(b []byte, v uint64) []byte {
	var tmp [8]byte
	binary.LittleEndian.PutUint64(tmp[:], v)
	return append(b, tmp[:]...)
}
