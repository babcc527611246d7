package envoy

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// Setup says how Launch runs a shipped bootstrap on this machine.
type Setup struct {
	// Binary is the Envoy binary; empty means Binary().
	Binary string
	// Bootstrap is the shipped file (envoy/envoy.yaml, e2e/envoy.yaml).
	Bootstrap string
	// Module is the .wasm every wasm filter loads, also those configured
	// by config_discovery from a file.
	Module string
	// ExtensionConfigs is the folder with the files the bootstrap's
	// config_discovery filters read (path_config_source, by file name);
	// empty means ExtensionConfigDir(Bootstrap). Launch copies each, its
	// module moved to Module, into a watched directory of its own
	// (Launched.ExtensionConfigDir).
	ExtensionConfigs string
	// Listen and Admin are host:port for the listener and the admin
	// interface; empty means a free loopback port.
	Listen, Admin string
	// Upstream is host:port of the cluster named "upstream".
	Upstream string
	// Workers is --concurrency (at least 1).
	Workers int
	// BaseID is --base-id; 0 picks one from the process ID.
	BaseID int
	// Edit, when set, changes the localized bootstrap before it is
	// written (EditPlugins, more listeners).
	Edit func(b *bootstrapv3.Bootstrap) error
	// Log, when set, also gets Envoy's log (a file for go-ftw).
	Log io.Writer
	// ComponentLogLevels is --component-log-level (Options).
	ComponentLogLevels string
	// Args are more arguments for Envoy.
	Args []string
	// VMs is how many VMs of the plugin Launch waits for; 0 means
	// Workers+1 (one per worker and the main thread's), less than 0 none
	// (an Envoy that serves without them, such as one whose first filter
	// configuration was refused).
	VMs int
	// Wait bounds the wait until Envoy serves; 0 means 4 minutes (V8
	// compiles the whole module before the first VM starts: tens of
	// seconds on a busy 2-core machine).
	Wait time.Duration
}

// Launched is an Envoy started by Launch. Stop stops it and removes its
// files.
type Launched struct {
	*Process
	// Listen is the listener's host:port.
	Listen string
	// Version is the binary's release.
	Version Version
	// Binary is the binary's path.
	Binary string
	// Serving is how long Envoy took from start until it served with
	// every VM (WaitServing); Ready until its /ready first said LIVE
	// (sampled every 100 ms), which can come before every worker's VM
	// has started.
	Serving, Ready time.Duration
	// ExtensionConfigDir is the directory Envoy watches for the files of
	// its config_discovery filters, empty when it has none: ReplaceFile
	// there changes a filter's configuration.
	ExtensionConfigDir string
	dir                string
}

// Launch localizes s.Bootstrap to s.Listen and s.Admin (free loopback
// ports when empty), s.Upstream and s.Module, applies s.Edit, starts Envoy on it
// and waits until it serves with a VM on the main thread and one per
// worker. On any failure nothing is left running.
func Launch(ctx context.Context, s Setup) (*Launched, error) {
	bin := s.Binary
	var v Version
	var err error
	if bin == "" {
		bin, v, err = Binary()
	} else {
		v, err = CheckBinary(bin)
	}
	if err != nil {
		return nil, err
	}
	if s.Workers < 1 {
		s.Workers = 1
	}
	if s.BaseID == 0 {
		s.BaseID = 100 + os.Getpid()%10000
	}
	if s.Wait == 0 {
		s.Wait = 4 * time.Minute
	}
	module, err := filepath.Abs(s.Module)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(module); err != nil {
		return nil, fmt.Errorf("envoy: the module: %w (build it with: go run mage.go build)", err)
	}
	b, _, err := LoadBootstrap(s.Bootstrap)
	if err != nil {
		return nil, err
	}
	listen, admin := s.Listen, s.Admin
	if listen == "" {
		listen = FreePort()
	}
	if admin == "" {
		admin = FreePort()
	}
	dir, err := os.MkdirTemp("", "wafguard-envoy-")
	if err != nil {
		return nil, err
	}
	cfg, ecds, err := writeLocalized(s, b, dir, Local{Listen: listen, Admin: admin, Upstream: s.Upstream, Module: module})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p, err := Start(Options{Binary: bin, Config: cfg, Admin: admin, Concurrency: s.Workers, BaseID: s.BaseID, Log: s.Log, Args: s.Args, ComponentLogLevels: s.ComponentLogLevels})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l := &Launched{Process: p, Listen: listen, Version: v, Binary: bin, ExtensionConfigDir: ecds, dir: dir}
	wctx, cancel := context.WithTimeout(ctx, s.Wait)
	defer cancel()
	vms := s.VMs
	if vms == 0 {
		vms = s.Workers + 1
	}
	if err := p.WaitServing(wctx, vms); err != nil {
		l.Stop()
		return nil, fmt.Errorf("Envoy %s (%s): %w", v, bin, err)
	}
	l.Serving = time.Since(p.Started)
	l.Ready = p.readyAt.Sub(p.Started)
	return l, nil
}

// writeLocalized localizes the bootstrap as l says, stages the files of
// its config_discovery filters in dir/ecds (returned as ecds, empty when
// there are none), applies s.Edit, and writes the result to
// dir/envoy.json (returned as cfg).
func writeLocalized(s Setup, b *bootstrapv3.Bootstrap, dir string, l Local) (cfg, ecds string, err error) {
	shipped, err := discoveryPaths(b)
	if err != nil {
		return "", "", err
	}
	if len(shipped) > 0 {
		from := s.ExtensionConfigs
		if from == "" {
			from = ExtensionConfigDir(s.Bootstrap)
		}
		ecds = filepath.Join(dir, "ecds")
		if err := stageExtensionConfigs(shipped, from, ecds, l.Module); err != nil {
			return "", "", err
		}
		l.ExtensionConfigDir = ecds
	}
	if err := Localize(b, l); err != nil {
		return "", "", err
	}
	if s.Edit != nil {
		if err := s.Edit(b); err != nil {
			return "", "", err
		}
	}
	js, err := JSON(b)
	if err != nil {
		return "", "", err
	}
	cfg = filepath.Join(dir, "envoy.json")
	return cfg, ecds, os.WriteFile(cfg, js, 0o644)
}

// Stop stops Envoy by its PID and removes its bootstrap file.
func (l *Launched) Stop() {
	l.Process.Stop()
	os.RemoveAll(l.dir)
}

// FreePort returns a loopback host:port that was free a moment ago.
func FreePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
