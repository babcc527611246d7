package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes
// USER_HZ at 100 on every architecture it exposes to user space.
const userHZ = 100

// Proc is a server process started by the bench, pinned to one CPU, in its
// own process group so that Stop also ends its children (nginx workers).
type Proc struct {
	Name string
	Log  string // path of the file that holds its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
}

var (
	procsMu sync.Mutex
	procs   = map[*Proc]struct{}{}
)

// StartProc runs bin with args under `taskset -c cpus` (a CPU list such as
// "1" or "0,1"), with env added to the bench's environment, output in
// logDir/name.log.
func StartProc(name string, cpus string, env []string, logDir, bin string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig ends the server if the bench dies without running its
	// cleanup (SIGKILL); Setpgid lets Stop signal nginx's workers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	procsMu.Lock()
	procs[p] = struct{}{}
	procsMu.Unlock()
	return p, nil
}

// PID returns the process ID of the server (taskset execs it in place).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) {
	procsMu.Lock()
	delete(procs, p)
	procsMu.Unlock()
	if p.Exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	// Also when the leader has gone: a worker may outlive its master.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// StopAll stops every process StartProc started that is still running.
func StopAll() {
	procsMu.Lock()
	list := make([]*Proc, 0, len(procs))
	for p := range procs {
		list = append(list, p)
	}
	procsMu.Unlock()
	for _, p := range list {
		p.Stop(2 * time.Second)
	}
}

// LogTail returns the last n bytes of the process log, for error messages.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// WaitHTTP polls url until it answers with want (0: any status below 500),
// the process exits, ctx ends or timeout passes.
func (p *Proc) WaitHTTP(ctx context.Context, url string, want int, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited before it was ready (%v); log %s:\n%s", p.Name, p.err, p.Log, p.LogTail(2000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Host = Host
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if (want == 0 && resp.StatusCode < 500) || resp.StatusCode == want {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s at %s (last: %s); log %s:\n%s", p.Name, timeout, url, last, p.Log, p.LogTail(2000))
}

// Usage is the resource use of a process tree.
type Usage struct {
	CPUSeconds float64 // utime+stime of the process and its children alive now
	PeakRSSKB  int64   // VmHWM, summed over the tree
	PIDs       int
}

// Usage reads /proc for the process and its descendants.
func (p *Proc) Usage() (Usage, error) {
	pids := append([]int{p.PID()}, descendants(p.PID())...)
	var u Usage
	for _, pid := range pids {
		cpu, err := cpuSeconds(pid)
		if err != nil {
			if pid == p.PID() {
				return u, err
			}
			continue // a child that just ended
		}
		hwm, err := peakRSSKB(pid)
		if err != nil {
			continue
		}
		u.CPUSeconds += cpu
		u.PeakRSSKB += hwm
		u.PIDs++
	}
	return u, nil
}

func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis. utime and stime are fields 14
	// and 15 (proc(5)).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(ut+st) / userHZ, nil
}

func peakRSSKB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// descendants lists the children of pid, and theirs, from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentPID(n); pp > 0 {
			children[pp] = append(children[pp], n)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 1024 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range children[cur] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// listenAdminAddrs returns two loopback addresses, for a server's
// listener and its admin interface, with ports that were free a moment
// ago.
func listenAdminAddrs() (listen, admin string, err error) {
	if listen, err = FreeAddr(); err != nil {
		return "", "", err
	}
	if admin, err = FreeAddr(); err != nil {
		return "", "", err
	}
	return listen, admin, nil
}
