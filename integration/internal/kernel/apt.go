//go:build linux

package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DebianKeyring is the keyring the harness's own apt sources are signed by.
const DebianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// defaultMirror is the Debian archive the own apt configuration uses;
// RDSVM_DEBIAN_MIRROR overrides it.
const defaultMirror = "http://deb.debian.org/debian"

// listsMaxAge is how old the own apt configuration's package lists may be
// before a resolution downloads them again.
const listsMaxAge = 10 * time.Minute

// aptConfig runs apt-get and apt-cache, either with the host's
// configuration (opts empty) or with the harness's own one.
type aptConfig struct {
	opts []string
}

func hostApt() *aptConfig { return &aptConfig{} }

// ownApt returns the harness's own apt configuration for a Debian suite,
// under cache/apt/<suite>: its own sources list (signed by the Debian
// archive keyring), state, lists and archive cache, so the host's apt
// sources and state are never touched. Lists older than listsMaxAge are
// downloaded again; failing to reach the archive is an error.
func ownApt(cache, suite string, logf func(string, ...any)) (*aptConfig, error) {
	if _, err := os.Stat(DebianKeyring); err != nil {
		if err := installHost("the Debian archive keyring "+DebianKeyring, "debian-archive-keyring"); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(cache, "apt", suite)
	for _, d := range []string{"etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	mirror := os.Getenv("RDSVM_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = defaultMirror
	}
	sources := fmt.Sprintf("deb [arch=amd64 signed-by=%s] %s %s main\n", DebianKeyring, mirror, suite)
	if err := os.WriteFile(filepath.Join(dir, "etc", "sources.list"), []byte(sources), 0o644); err != nil {
		return nil, err
	}
	status := filepath.Join(dir, "state", "status")
	if _, err := os.Stat(status); err != nil {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return nil, err
		}
	}
	a := &aptConfig{opts: ownAptOptions(dir)}
	stamp := filepath.Join(dir, "updated")
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < listsMaxAge {
		if b, _ := os.ReadFile(stamp); string(b) == sources {
			return a, nil
		}
	}
	logf("updating the package lists of Debian %s (%s; own apt configuration in %s)", suite, mirror, dir)
	out, err := a.command("apt-get", "update", "--error-on=any").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("cannot reach Debian %s's archive: apt-get update with the harness's own sources (%s) failed: %v\n%s",
			suite, filepath.Join(dir, "etc", "sources.list"), err, tail(out, 15))
	}
	if err := os.WriteFile(stamp, []byte(sources), 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// ownAptOptions are the apt options that point every file apt reads or
// writes into dir, except its configuration fragments (for proxies).
func ownAptOptions(dir string) []string {
	o := func(k, v string) string { return "-o" + k + "=" + v }
	opts := []string{
		o("Dir::Etc::SourceList", filepath.Join(dir, "etc", "sources.list")),
		o("Dir::Etc::SourceParts", filepath.Join(dir, "etc", "sources.list.d")),
		o("Dir::Etc::Preferences", filepath.Join(dir, "etc", "preferences")),
		o("Dir::Etc::PreferencesParts", filepath.Join(dir, "etc", "preferences.d")),
		o("Dir::State", filepath.Join(dir, "state")),
		o("Dir::State::status", filepath.Join(dir, "state", "status")),
		o("Dir::Cache", filepath.Join(dir, "cache")),
		o("APT::Architecture", "amd64"),
		o("APT::Architectures", "amd64"),
		o("Acquire::Languages", "none"),
		// Only the package lists: no AppStream metadata or Contents.
		o("Acquire::IndexTargets::deb::DEP-11::DefaultEnabled", "false"),
		o("Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled", "false"),
		o("Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled", "false"),
		o("Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled", "false"),
	}
	if os.Geteuid() == 0 {
		// The unprivileged _apt user cannot write into a cache in root's home.
		opts = append(opts, o("APT::Sandbox::User", "root"))
	}
	return opts
}

// command returns an apt tool invocation with this configuration.
func (a *aptConfig) command(tool string, args ...string) *exec.Cmd {
	cmd := exec.Command(tool, append(append([]string(nil), a.opts...), args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return cmd
}

// depends returns the linux-image-* dependency of a meta-package.
func (a *aptConfig) depends(meta string) (string, error) {
	out, err := a.command("apt-cache", "depends", meta).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends %s: %w", meta, exitDetail(err))
	}
	if pkg := parseDepends(out); pkg != "" {
		return pkg, nil
	}
	return "", fmt.Errorf("apt-cache depends %s: no linux-image dependency listed", meta)
}

// show returns the fields of a package (name or name=version).
func (a *aptConfig) show(spec string) (map[string]string, error) {
	out, err := a.command("apt-cache", "show", "--no-all-versions", spec).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache show %s: %w", spec, exitDetail(err))
	}
	m := parseControl(out)
	if m["Package"] == "" {
		return nil, fmt.Errorf("apt-cache show %s: no package record", spec)
	}
	return m, nil
}

// exitDetail adds a failed command's stderr to its error.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
