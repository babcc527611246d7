package wasmhost

import (
	"crypto/rand"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// WASI errno values used by Envoy's host (cpp-host src/exports.cc).
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoExist   = 20 // what cpp-host's fd_readdir returns, though its comment says ENOTDIR
	errnoInval   = 28
	errnoNoent   = 44
	errnoNosys   = 52
	errnoNotsup  = 58
)

var monoStart = time.Now()

// wasiFuncs returns the WASI functions of the selected Envoy profile, each
// behaving as proxy-wasm-cpp-host's src/exports.cc (notes 8.1). The Envoy133
// profile has only the set that existed after cpp-host PR #427; Envoy139
// has PR #533's. The restricted-phase flags follow WasmBase's allowlists.
func (m *Module) wasiFuncs() []*hostFunc {
	full := m.opts.Envoy == Envoy139
	var out []*hostFunc
	add := func(name string, params []api.ValueType, fn func(vm *VM, s []uint64), inInit, inAlloc bool) {
		out = append(out, &hostFunc{module: "wasi", name: name, params: params, results: sig(1), fn: fn, inInit: inInit, inAlloc: inAlloc})
	}
	p := func(types ...api.ValueType) []api.ValueType { return types }
	errno := func(e uint64) func(*VM, []uint64) { return func(_ *VM, s []uint64) { s[0] = e } }

	// The set present before #427.
	add("args_get", sig(2), errno(errnoSuccess), true, false)
	add("args_sizes_get", sig(2), (*VM).wArgsSizesGet, true, false)
	add("environ_get", sig(2), (*VM).wEnvironGet, true, false)
	add("environ_sizes_get", sig(2), (*VM).wEnvironSizesGet, true, false)
	add("clock_time_get", p(i32, i64, i32), (*VM).wClockTimeGet, true, true)
	add("random_get", sig(2), (*VM).wRandomGet, true, false)
	add("fd_write", sig(4), (*VM).wFdWrite, true, true)
	add("fd_read", sig(4), errno(errnoNosys), false, false)
	add("fd_seek", p(i32, i64, i32, i32), wLogged("fd_seek"), false, false)
	add("fd_close", sig(1), wLogged("fd_close"), false, false)
	add("fd_fdstat_get", sig(2), (*VM).wFdFdstatGet, true, false)
	add("fd_prestat_get", sig(2), errno(errnoBadf), true, false)
	add("fd_prestat_dir_name", sig(3), errno(errnoNosys), true, false)
	add("path_open", p(i32, i32, i32, i32, i32, i64, i64, i32, i32), errno(errnoNoent), full, false)
	out = append(out, &hostFunc{module: "wasi", name: "proc_exit", params: sig(1), fn: (*VM).wProcExit})

	// Added by #427.
	add("fd_fdstat_set_flags", sig(2), errno(errnoNosys), true, false)
	add("sched_yield", nil, errno(errnoSuccess), false, false)
	if !full {
		// #427: poll_oneoff exists but answers ENOSYS without writing nevents.
		add("poll_oneoff", sig(4), errno(errnoNosys), false, false)
		return out
	}
	// #533: poll_oneoff succeeds with zero events, and may run during
	// _initialize and allocation ("go runtime gc sleep").
	add("poll_oneoff", sig(4), (*VM).wPollOneoff, true, true)
	add("clock_res_get", sig(2), (*VM).wClockResGet, true, false)
	add("fd_advise", p(i32, i64, i64, i32), errno(errnoSuccess), true, false)
	add("fd_allocate", p(i32, i64, i64), stdio(errnoSuccess), true, false)
	add("fd_datasync", sig(1), stdio(errnoSuccess), true, false)
	add("fd_sync", sig(1), stdio(errnoSuccess), true, false)
	add("fd_fdstat_set_rights", p(i32, i64, i64), stdio(errnoSuccess), true, false)
	add("fd_filestat_set_size", p(i32, i64), stdio(errnoSuccess), true, false)
	add("fd_filestat_set_times", p(i32, i64, i64, i32), stdio(errnoSuccess), true, false)
	add("fd_filestat_get", sig(2), errno(errnoBadf), true, false)
	add("fd_pread", p(i32, i32, i32, i64, i32), errno(errnoNosys), true, false)
	add("fd_pwrite", p(i32, i32, i32, i64, i32), func(vm *VM, s []uint64) {
		s[3] = s[4] // nwritten_ptr moves into fd_write's position
		vm.wFdWrite(s)
	}, true, false)
	add("fd_readdir", p(i32, i32, i32, i64, i32), func(vm *VM, s []uint64) {
		vm.mem.WriteUint32Le(uint32(s[4]), 0)
		s[0] = errnoExist
	}, true, false)
	add("fd_renumber", sig(2), func(_ *VM, s []uint64) {
		if isStdio(s[0]) && isStdio(s[1]) {
			s[0] = errnoNotsup
			return
		}
		s[0] = errnoBadf
	}, true, false)
	add("fd_tell", sig(2), func(vm *VM, s []uint64) {
		if !isStdio(s[0]) {
			s[0] = errnoBadf
			return
		}
		vm.mem.WriteUint64Le(uint32(s[1]), 0)
		s[0] = errnoSuccess
	}, true, false)
	add("path_create_directory", sig(3), errno(errnoNotsup), true, false)
	add("path_filestat_get", sig(5), errno(errnoNotsup), true, false)
	add("path_filestat_set_times", p(i32, i32, i32, i32, i64, i64, i32), errno(errnoNotsup), true, false)
	add("path_link", sig(7), errno(errnoNotsup), true, false)
	add("path_readlink", sig(6), func(vm *VM, s []uint64) {
		vm.mem.WriteUint32Le(uint32(s[5]), 0)
		s[0] = errnoNotsup
	}, true, false)
	add("path_remove_directory", sig(3), errno(errnoNotsup), true, false)
	add("path_rename", sig(6), errno(errnoNotsup), true, false)
	add("path_symlink", sig(5), errno(errnoNotsup), true, false)
	add("path_unlink_file", sig(3), errno(errnoNotsup), true, false)
	add("sock_accept", sig(3), func(vm *VM, s []uint64) {
		vm.mem.WriteUint32Le(uint32(s[2]), 0)
		s[0] = errnoNotsup
	}, true, false)
	add("sock_recv", sig(6), func(vm *VM, s []uint64) {
		vm.mem.WriteUint32Le(uint32(s[4]), 0)
		vm.mem.WriteUint32Le(uint32(s[5]), 0)
		s[0] = errnoNotsup
	}, true, false)
	add("sock_send", sig(5), func(vm *VM, s []uint64) {
		vm.mem.WriteUint32Le(uint32(s[4]), 0)
		s[0] = errnoNotsup
	}, true, false)
	add("sock_shutdown", sig(2), errno(errnoNotsup), true, false)
	return out
}

func isStdio(fd uint64) bool { return uint32(fd) == 1 || uint32(fd) == 2 }

// stdio answers success for fds 1 and 2 and EBADF otherwise.
func stdio(e uint64) func(*VM, []uint64) {
	return func(_ *VM, s []uint64) {
		if isStdio(s[0]) {
			s[0] = e
			return
		}
		s[0] = errnoBadf
	}
}

// wArgsSizesGet writes argc 0 and size 0: Envoy passes no arguments.
func (vm *VM) wArgsSizesGet(s []uint64) {
	if !vm.mem.WriteUint32Le(uint32(s[0]), 0) || !vm.mem.WriteUint32Le(uint32(s[1]), 0) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

func (vm *VM) envStrings() []string {
	out := make([]string, 0, len(vm.cfg.Env))
	for _, kv := range vm.cfg.Env {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}

// wEnvironSizesGet: the count and total size (with NULs) of
// vm_config.environment_variables.
func (vm *VM) wEnvironSizesGet(s []uint64) {
	env := vm.envStrings()
	n := 0
	for _, e := range env {
		n += len(e) + 1
	}
	if !vm.mem.WriteUint32Le(uint32(s[0]), uint32(len(env))) || !vm.mem.WriteUint32Le(uint32(s[1]), uint32(n)) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

func (vm *VM) wEnvironGet(s []uint64) {
	ptrs, buf := uint32(s[0]), uint32(s[1])
	for i, e := range vm.envStrings() {
		if !vm.mem.WriteUint32Le(ptrs+uint32(4*i), buf) || !vm.mem.WriteString(buf, e) || !vm.mem.WriteByte(buf+uint32(len(e)), 0) {
			s[0] = errnoInval
			return
		}
		buf += uint32(len(e)) + 1
	}
	s[0] = errnoSuccess
}

// wClockTimeGet: id 0 is the wall clock, 1 monotonic; others NOTSUP.
func (vm *VM) wClockTimeGet(s []uint64) {
	var t uint64
	switch uint32(s[0]) {
	case 0:
		t = uint64(time.Now().UnixNano())
	case 1:
		t = uint64(time.Since(monoStart).Nanoseconds()) + 1
	default:
		s[0] = errnoNotsup
		return
	}
	if !vm.mem.WriteUint64Le(uint32(s[2]), t) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

func (vm *VM) wClockResGet(s []uint64) {
	if id := uint32(s[0]); id > 1 {
		s[0] = errnoNotsup
		return
	}
	if !vm.mem.WriteUint64Le(uint32(s[1]), 1) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

// wRandomGet: more than 64 KiB in one call is EINVAL (cpp-host
// PROXY_WASM_HOST_WASI_RANDOM_GET_MAX_SIZE_BYTES).
func (vm *VM) wRandomGet(s []uint64) {
	n := uint32(s[1])
	if n > 64<<10 {
		s[0] = errnoInval
		return
	}
	b, ok := vm.read(uint32(s[0]), n)
	if !ok {
		s[0] = errnoInval
		return
	}
	_, _ = rand.Read(b)
	s[0] = errnoSuccess
}

// wFdWrite: fd 1 is logged at info, fd 2 at error, each call one line with
// one trailing newline removed; other fds are EBADF.
func (vm *VM) wFdWrite(s []uint64) {
	fd, iovs, n, nwPtr := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	if fd != 1 && fd != 2 {
		s[0] = errnoBadf
		return
	}
	var b strings.Builder
	for i := uint32(0); i < n; i++ {
		ptr, ok1 := vm.mem.ReadUint32Le(iovs + 8*i)
		l, ok2 := vm.mem.ReadUint32Le(iovs + 8*i + 4)
		if !ok1 || !ok2 {
			s[0] = errnoInval
			return
		}
		data, ok := vm.read(ptr, l)
		if !ok {
			s[0] = errnoInval
			return
		}
		b.Write(data)
	}
	written := b.Len()
	if !vm.mem.WriteUint32Le(nwPtr, uint32(written)) {
		s[0] = errnoInval
		return
	}
	level := LevelInfo
	if fd == 2 {
		level = LevelError
	}
	vm.logAt(level, vm.eff, strings.TrimSuffix(b.String(), "\n"))
	s[0] = errnoSuccess
}

// wFdFdstatGet: fds 1/2 get a 24-byte fdstat with filetype character
// device and rights FD_WRITE; others EBADF.
func (vm *VM) wFdFdstatGet(s []uint64) {
	if !isStdio(s[0]) {
		s[0] = errnoBadf
		return
	}
	var st [24]byte
	st[0] = 2  // filetype character_device
	st[8] = 64 // rights_base FD_WRITE
	if !vm.mem.Write(uint32(s[1]), st[:]) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

// wPollOneoff (#533): writes nevents 0 and succeeds, so Go's scheduler
// busy-waits instead of aborting (golang/go#78513).
func (vm *VM) wPollOneoff(s []uint64) {
	if !vm.mem.WriteUint32Le(uint32(s[3]), 0) {
		s[0] = errnoInval
		return
	}
	s[0] = errnoSuccess
}

// wLogged: Envoy logs these through Context::error at trace level and
// returns success without writing anything.
func wLogged(name string) func(*VM, []uint64) {
	return func(v *VM, s []uint64) {
		v.logAt(LevelTrace, v.eff, "wasi "+name+" called")
		s[0] = errnoSuccess
	}
}

// wProcExit logs and returns: Envoy does not stop the VM.
func (vm *VM) wProcExit(s []uint64) {
	vm.logAt(LevelTrace, vm.eff, "wasi proc_exit called")
}
