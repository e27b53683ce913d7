// Package kernel fetches Debian kernel packages for the VM harness and
// resolves module dependency closures from their modules.dep.
//
// A kernel is named by a short alias ("6.1", "6.12") or by a full Debian
// package name ("linux-image-6.1.0-56-amd64"). Aliases are resolved through
// `apt-cache depends` on the meta-package, so the newest kernel Debian ships
// for that series is used. Downloads happen once: the extracted package lives
// under the cache directory and is reused by every later run.
package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// metaPackages maps a short alias to the Debian meta-package whose dependency
// names the current kernel image of that series.
var metaPackages = map[string]string{
	"6.1":  "linux-image-amd64",
	"6.12": "linux-image-6.12-amd64",
}

// Aliases lists the short kernel names understood by Resolve, oldest first.
func Aliases() []string { return []string{"6.1", "6.12"} }

// Kernel is an extracted kernel package.
type Kernel struct {
	Package string // Debian package name, e.g. linux-image-6.1.0-56-amd64
	Release string // uname -r of the kernel, e.g. 6.1.0-56-amd64
	Root    string // directory the package was extracted into
}

// Image is the path of the bootable kernel image.
func (k *Kernel) Image() string { return filepath.Join(k.Root, "boot", "vmlinuz-"+k.Release) }

// ModulesDir is the path of lib/modules/<release> inside the extracted tree.
func (k *Kernel) ModulesDir() string {
	return filepath.Join(k.Root, "lib", "modules", k.Release)
}

// CacheDir returns the harness cache directory: $RDSVM_CACHE, else
// $XDG_CACHE_HOME/go-rds-vm, else ~/.cache/go-rds-vm, else (no home
// directory) $TMPDIR/go-rds-vm-cache.
func CacheDir() (string, error) {
	if d := os.Getenv("RDSVM_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "go-rds-vm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		// No usable home (some CI and container setups): a shared temp dir.
		return filepath.Join(os.TempDir(), "go-rds-vm-cache"), nil
	}
	return filepath.Join(home, ".cache", "go-rds-vm"), nil
}

// Fetch returns the kernel named by name (an alias or package name),
// downloading and extracting it into cache if it is not there yet. Progress
// messages go to logf. Concurrent callers are serialised with a lock file.
func Fetch(cache, name string, logf func(format string, args ...any)) (*Kernel, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lock(filepath.Join(cache, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	pkg, err := resolvePackage(cache, name, logf)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cache, "kernels", pkg)
	if k, err := open(pkg, root); err == nil {
		return k, nil
	}
	logf("downloading kernel package %s (once; cached in %s)", pkg, root)
	if err := download(cache, pkg, root); err != nil {
		return nil, fmt.Errorf("fetch kernel %s: %w", pkg, err)
	}
	return open(pkg, root)
}

// open checks that root holds a complete extracted kernel.
func open(pkg, root string) (*Kernel, error) {
	if _, err := os.Stat(filepath.Join(root, ".complete")); err != nil {
		return nil, err
	}
	rel := strings.TrimPrefix(pkg, "linux-image-")
	if ents, err := os.ReadDir(filepath.Join(root, "lib", "modules")); err == nil && len(ents) == 1 {
		rel = ents[0].Name()
	}
	k := &Kernel{Package: pkg, Release: rel, Root: root}
	if _, err := os.Stat(k.Image()); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(k.ModulesDir(), "modules.dep")); err != nil {
		return nil, err
	}
	return k, nil
}

// resolvePackage turns an alias into a package name. The last resolution is
// remembered so that an offline machine with a warm cache still works.
func resolvePackage(cache, name string, logf func(string, ...any)) (string, error) {
	if strings.HasPrefix(name, "linux-image-") {
		return name, nil
	}
	meta, ok := metaPackages[name]
	if !ok {
		return "", fmt.Errorf("unknown kernel %q: use one of %s or a Debian package name linux-image-...",
			name, strings.Join(Aliases(), ", "))
	}
	memo := filepath.Join(cache, "resolved-"+name)
	pkg, err := aptDepends(meta)
	if err != nil && os.Geteuid() == 0 {
		logf("apt-cache does not know %s (%v); running apt-get update", meta, err)
		if out, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get update: %v\n%s", uerr, out)
		}
		pkg, err = aptDepends(meta)
	}
	if err != nil {
		if b, rerr := os.ReadFile(memo); rerr == nil {
			return strings.TrimSpace(string(b)), nil
		}
		return "", fmt.Errorf("resolve kernel %s: %w (as root, run apt-get update)", name, err)
	}
	_ = os.WriteFile(memo, []byte(pkg+"\n"), 0o644)
	return pkg, nil
}

// aptDepends returns the linux-image-* dependency of a meta-package.
func aptDepends(meta string) (string, error) {
	out, err := exec.Command("apt-cache", "depends", meta).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("apt-cache depends %s: %v: %s", meta, err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("apt-cache depends %s: %w", meta, err)
	}
	if pkg := parseDepends(out); pkg != "" {
		return pkg, nil
	}
	return "", fmt.Errorf("apt-cache depends %s: no linux-image dependency listed", meta)
}

// parseDepends returns the first linux-image-* package that apt-cache
// depends output lists under Depends, or "".
func parseDepends(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			return f[1]
		}
	}
	return ""
}

// download fetches pkg with apt-get, extracts it and runs depmod.
func download(cache, pkg, root string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("apt-get not found: the harness fetches Debian kernel packages with apt")
	}
	for tool, pkg := range map[string]string{"dpkg-deb": "dpkg", "depmod": "kmod"} {
		if _, err := exec.LookPath(tool); err == nil {
			continue
		}
		if os.Geteuid() != 0 {
			return fmt.Errorf("%s not found: install it as root: apt-get install %s", tool, pkg)
		}
		cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s not found and apt-get install %s failed: %v\n%s", tool, pkg, err, out)
		}
	}
	tmp, err := os.MkdirTemp(cache, "fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("apt-get", "download", pkg)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s: expected one .deb, found %d", pkg, len(debs))
	}
	tree := filepath.Join(tmp, "tree")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], tree).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x: %v\n%s", err, out)
	}
	ents, err := os.ReadDir(filepath.Join(tree, "lib", "modules"))
	if err != nil || len(ents) != 1 {
		return fmt.Errorf("package %s: expected exactly one lib/modules/<release> directory", pkg)
	}
	rel := ents[0].Name()
	if out, err := exec.Command("depmod", "-b", tree, rel).CombinedOutput(); err != nil {
		return fmt.Errorf("depmod -b %s %s: %v\n%s", tree, rel, err, out)
	}
	if err := os.WriteFile(filepath.Join(tree, ".complete"), nil, 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(root)
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return err
	}
	return os.Rename(tree, root)
}

// lock takes an exclusive flock on path.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
