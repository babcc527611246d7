package envoy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is an Envoy started by Start, stopped by its PID.
type Process struct {
	*Proc
	admin string // http://host:port of the admin interface
	// readyAt is when WaitServing first found /ready LIVE.
	readyAt time.Time
}

// Proc is a process started by StartProc, in a process group of its own,
// and stopped by its PID, with the last lines of its output kept. An
// Envoy's Process is one; the tests start the other servers they need
// (Redis, the rate limit service) as one too.
type Proc struct {
	cmd *exec.Cmd
	// Started is when the process was started.
	Started time.Time
	log     *tail
	done    chan struct{}
	err     error
}

// StartProc starts cmd in a process group of its own. Its standard output
// and error are kept (the last 2000 lines, Log) and, when also is not nil,
// copied to it. The error is cmd.Start's.
func StartProc(cmd *exec.Cmd, also io.Writer) (*Proc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{cmd: cmd, log: &tail{max: 2000}, done: make(chan struct{})}
	var w io.Writer = p.log
	if also != nil {
		w = io.MultiWriter(p.log, also)
	}
	cmd.Stdout, cmd.Stderr = w, w
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Options are how Start runs Envoy.
type Options struct {
	// Binary is the Envoy binary (Binary()).
	Binary string
	// Config is the bootstrap file (a .json or .yaml).
	Config string
	// Admin is the admin interface's host:port, as the bootstrap has it.
	Admin string
	// Concurrency is --concurrency: the worker threads, one VM each.
	Concurrency int
	// BaseID is --base-id: distinct for each Envoy running on the machine
	// at once (it names the shared memory of hot restart).
	BaseID int
	// Log, when set, also gets Envoy's log.
	Log io.Writer
	// ComponentLogLevels is --component-log-level; empty means
	// "wasm:info,main:info" (the plugin's lines and the start).
	ComponentLogLevels string
	// Args are more arguments for Envoy.
	Args []string
}

// Start starts Envoy. The log level of the wasm component is info, so the
// plugin's own lines are in the log (Process.Log). Stop it with Stop.
func Start(o Options) (*Process, error) {
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.ComponentLogLevels == "" {
		o.ComponentLogLevels = "wasm:info,main:info"
	}
	args := append([]string{"-c", o.Config, "--concurrency", strconv.Itoa(o.Concurrency), "--base-id", strconv.Itoa(o.BaseID),
		"-l", "warning", "--component-log-level", o.ComponentLogLevels, "--disable-hot-restart"}, o.Args...)
	proc, err := StartProc(exec.Command(o.Binary, args...), o.Log)
	if err != nil {
		return nil, fmt.Errorf("envoy: starting %s: %w", o.Binary, err)
	}
	return &Process{Proc: proc, admin: "http://" + o.Admin}, nil
}

// PID is the process's ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// AdminURL is the admin interface's base URL.
func (p *Process) AdminURL() string { return p.admin }

// Log returns the last lines the process wrote.
func (p *Proc) Log() string { return p.log.String() }

// Exited reports whether the process has ended, and its error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// WaitServing waits until Envoy serves: its admin's /ready answers LIVE
// and at least vms wasm VMs are active on V8
// (wasm.envoy.wasm.runtime.v8.active: Envoy keeps one on the main thread
// and one per worker thread, after the one that checked the
// configuration). With vms 0 or less it waits for /ready alone (an Envoy
// expected to serve without the plugin's VMs). It fails early when the
// process exits, with the end of its log.
func (p *Process) WaitServing(ctx context.Context, vms int) error {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		if done, err := p.Exited(); done {
			return fmt.Errorf("envoy exited (%v) before serving; log:\n%s", err, p.LastLines(30))
		}
		if ready(c, p.admin+"/ready") {
			if p.readyAt.IsZero() {
				p.readyAt = time.Now()
			}
			if vms <= 0 {
				return nil
			}
			if n, err := p.Stat(c, "wasm.envoy.wasm.runtime.v8.active"); err == nil && n >= vms {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envoy did not serve with %d VMs within the wait (%w); log:\n%s", vms, ctx.Err(), p.LastLines(30))
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ready(c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 200 && strings.TrimSpace(string(b)) == "LIVE"
}

// Stat returns the value of one counter or gauge from the admin's /stats.
func (p *Process) Stat(c *http.Client, name string) (int, error) {
	return AdminStat(c, p.admin, name)
}

// AdminStat returns the value of one counter or gauge from the /stats of
// the admin interface at adminURL (http://host:port).
func AdminStat(c *http.Client, adminURL, name string) (int, error) {
	m, err := AdminStats(c, adminURL, "^"+regexp.QuoteMeta(name)+"$")
	if err != nil {
		return 0, err
	}
	n, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("envoy: no stat %s", name)
	}
	return n, nil
}

// AdminStats returns the counters and gauges of the admin interface's
// /stats whose names match the regular expression filter.
func AdminStats(c *http.Client, adminURL, filter string) (map[string]int, error) {
	resp, err := c.Get(adminURL + "/stats?filter=" + url.QueryEscape(filter))
	if err != nil {
		return nil, fmt.Errorf("envoy: /stats: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				out[k] = n
			}
		}
	}
	return out, sc.Err()
}

// RSS returns the process's resident memory in bytes (/proc/PID/status).
func (p *Proc) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("envoy: no VmRSS in /proc/%d/status", p.PID())
}

// Stop ends the process by its PID (SIGTERM, then SIGKILL after 10 s) and
// waits for it.
func (p *Proc) Stop() {
	if done, _ := p.Exited(); done {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// LastLines returns the last n lines the process wrote.
func (p *Proc) LastLines(n int) string {
	lines := strings.Split(strings.TrimRight(p.log.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tail keeps the last max lines written to it.
type tail struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial string
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.partial + string(b)
	parts := strings.Split(s, "\n")
	t.partial = parts[len(parts)-1]
	t.lines = append(t.lines, parts[:len(parts)-1]...)
	if over := len(t.lines) - t.max; over > 0 {
		t.lines = append(t.lines[:0:0], t.lines[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n") + "\n" + t.partial
}
