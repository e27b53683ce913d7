//go:build linux

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

// series says how a short kernel name is resolved: the linux-image-*
// dependency of a meta-package, found through the host's apt configuration
// or, when suite is set, through the harness's own one for that Debian suite.
type series struct {
	meta  string
	suite string
}

// aliases maps a short name to its series.
var aliases = map[string]series{
	"6.1":  {meta: "linux-image-amd64"},
	"6.12": {meta: "linux-image-6.12-amd64"},
	"sid":  {meta: "linux-image-amd64", suite: "sid"},
}

// Aliases lists the short kernel names understood by Fetch, oldest first.
// "sid" is the newest kernel of Debian unstable, whatever version that is
// when the run starts.
func Aliases() []string { return []string{"6.1", "6.12", "sid"} }

// Kernel is an extracted kernel package.
type Kernel struct {
	Package string // Debian package name, e.g. linux-image-6.1.0-56-amd64
	Version string // Debian package version; "" for a tree cached by name only
	Release string // uname -r of the kernel, e.g. 6.1.0-56-amd64
	Root    string // directory the package was extracted into

	image   string
	vmlinux string // the unpacked image, if any: see BootImage
	modules string
}

// Image is the path of the bootable kernel image.
func (k *Kernel) Image() string { return k.image }

// ModulesDir is the path of the kernel's modules directory (lib/modules/<release>
// or usr/lib/modules/<release>) inside the extracted tree.
func (k *Kernel) ModulesDir() string { return k.modules }

// Spec names exactly this kernel for a later Fetch (and so for
// RDSVM_KERNEL): the package name, with "=version" when the tree is cached
// by version.
func (k *Kernel) Spec() string {
	if k.Version != "" {
		return k.Package + "=" + k.Version
	}
	return k.Package
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

// Fetch returns the kernel named by name, downloading and extracting it into
// cache if it is not there yet. name is an alias (see [Aliases]), a package
// name "linux-image-..." (host apt configuration, cached by name) or
// "linux-image-...=VERSION" (the harness's own apt configuration for Debian
// unstable, cached by version; what [Kernel.Spec] returns for "sid").
// Progress messages go to logf. Concurrent callers are serialised with a
// lock file.
func Fetch(cache, name string, logf func(format string, args ...any)) (*Kernel, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lock(filepath.Join(cache, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	ref, err := resolvePackage(cache, name, logf)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cache, "kernels", ref.dirName())
	if k, err := open(ref.pkg, root); err == nil {
		k.Version = ref.version
		unpackVmlinux(k, logf)
		return k, nil
	}
	var apt *aptConfig
	if ref.suite != "" {
		if apt, err = ownApt(cache, ref.suite, logf); err != nil {
			return nil, fmt.Errorf("fetch kernel %s: %w", ref, err)
		}
	}
	logf("downloading kernel package %s (once; cached in %s)", ref, root)
	if err := download(cache, apt, ref, root); err != nil {
		return nil, fmt.Errorf("fetch kernel %s: %w", ref, err)
	}
	k, err := open(ref.pkg, root)
	if err != nil {
		return nil, err
	}
	k.Version = ref.version
	unpackVmlinux(k, logf)
	return k, nil
}

// pkgRef is a resolved kernel package.
type pkgRef struct {
	pkg     string
	version string // set for packages cached by version
	suite   string // "": host apt; else the harness's own apt for this suite
}

func (r pkgRef) String() string {
	if r.version != "" {
		return r.pkg + "=" + r.version
	}
	return r.pkg
}

// dirName is the cache directory name of the extracted tree.
func (r pkgRef) dirName() string {
	if r.version != "" {
		return r.pkg + "_" + r.version
	}
	return r.pkg
}

// open checks that root holds a complete extracted kernel and finds its
// image and modules directory, in either layout: boot/vmlinuz-REL with
// lib/modules/REL, or usr/lib/modules/REL holding vmlinuz.
func open(pkg, root string) (*Kernel, error) {
	if _, err := os.Stat(filepath.Join(root, ".complete")); err != nil {
		return nil, err
	}
	modRoot, rel, err := modulesRoot(root)
	if err != nil {
		return nil, err
	}
	k := &Kernel{Package: pkg, Release: rel, Root: root, modules: filepath.Join(modRoot, rel)}
	for _, img := range []string{filepath.Join(root, "boot", "vmlinuz-"+rel), filepath.Join(k.modules, "vmlinuz")} {
		if _, err := os.Stat(img); err == nil {
			k.image = img
			break
		}
	}
	if k.image == "" {
		return nil, fmt.Errorf("%s: no kernel image (boot/vmlinuz-%s or %s/vmlinuz)", root, rel, k.modules)
	}
	if _, err := os.Stat(filepath.Join(k.modules, "modules.dep")); err != nil {
		return nil, err
	}
	return k, nil
}

// modulesRoot finds the one lib/modules/REL or usr/lib/modules/REL
// directory in an extracted tree and returns its parent and REL.
func modulesRoot(tree string) (dir, release string, err error) {
	for _, d := range []string{filepath.Join(tree, "lib", "modules"), filepath.Join(tree, "usr", "lib", "modules")} {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		if len(ents) != 1 || !ents[0].IsDir() {
			return "", "", fmt.Errorf("%s: expected exactly one <release> directory, found %d entries", d, len(ents))
		}
		return d, ents[0].Name(), nil
	}
	return "", "", fmt.Errorf("%s: no lib/modules or usr/lib/modules directory", tree)
}

// resolvePackage turns a kernel name into a package reference. For the
// host's apt, the last resolution is remembered so that an offline machine
// with a warm cache still works; the own-apt series ("sid") must reach the
// archive (at most listsMaxAge old lists), since the point of it is the
// newest kernel.
func resolvePackage(cache, name string, logf func(string, ...any)) (pkgRef, error) {
	if pkg, ver, ok := strings.Cut(name, "="); ok && strings.HasPrefix(pkg, "linux-image-") && ver != "" {
		return pkgRef{pkg: pkg, version: ver, suite: "sid"}, nil
	}
	if strings.HasPrefix(name, "linux-image-") {
		return pkgRef{pkg: name}, nil
	}
	s, ok := aliases[name]
	if !ok {
		return pkgRef{}, fmt.Errorf("unknown kernel %q: use one of %s, a Debian package name linux-image-... "+
			"or linux-image-...=VERSION (from Debian unstable)", name, strings.Join(Aliases(), ", "))
	}
	if s.suite != "" {
		apt, err := ownApt(cache, s.suite, logf)
		if err != nil {
			return pkgRef{}, fmt.Errorf("resolve kernel %s (Debian %s): %w", name, s.suite, err)
		}
		pkg, err := apt.depends(s.meta)
		if err != nil {
			return pkgRef{}, fmt.Errorf("resolve kernel %s (Debian %s): %w", name, s.suite, err)
		}
		fields, err := apt.show(pkg)
		if err != nil {
			return pkgRef{}, fmt.Errorf("resolve kernel %s (Debian %s): %w", name, s.suite, err)
		}
		if fields["Version"] == "" {
			return pkgRef{}, fmt.Errorf("resolve kernel %s: apt-cache show %s lists no Version", name, pkg)
		}
		return pkgRef{pkg: pkg, version: fields["Version"], suite: s.suite}, nil
	}
	memo := filepath.Join(cache, "resolved-"+name)
	host := hostApt()
	pkg, err := host.depends(s.meta)
	if err != nil && os.Geteuid() == 0 {
		logf("apt-cache does not know %s (%v); running apt-get update", s.meta, err)
		if out, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
			return pkgRef{}, fmt.Errorf("apt-get update: %v\n%s", uerr, out)
		}
		pkg, err = host.depends(s.meta)
	}
	if err != nil {
		if b, rerr := os.ReadFile(memo); rerr == nil {
			return pkgRef{pkg: strings.TrimSpace(string(b))}, nil
		}
		return pkgRef{}, fmt.Errorf("resolve kernel %s: %w (as root, run apt-get update)", name, err)
	}
	_ = os.WriteFile(memo, []byte(pkg+"\n"), 0o644)
	return pkgRef{pkg: pkg}, nil
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

// parseControl parses the first stanza of apt-cache show output into its
// fields (continuation lines are dropped).
func parseControl(out []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			if len(m) > 0 {
				break
			}
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// splitPackages returns the packages a kernel image package consists of:
// those of its Depends (first alternatives) named linux-*-KVER, where KVER
// is the image package's name without "linux-image-", as name=version when
// the dependency pins a version. Debian's newest kernels split the files of
// linux-image-KVER (then a meta-package) into linux-binary-KVER,
// linux-modules-KVER and linux-base-KVER; older ones have none.
func splitPackages(pkg, depends string) []string {
	kver := strings.TrimPrefix(pkg, "linux-image-")
	var out []string
	for _, d := range strings.Split(depends, ",") {
		alt, _, _ := strings.Cut(d, "|")
		f := strings.Fields(strings.NewReplacer("(", " (", ")", " ").Replace(alt))
		if len(f) == 0 || !strings.HasPrefix(f[0], "linux-") || !strings.HasSuffix(f[0], "-"+kver) || f[0] == pkg {
			continue
		}
		name := f[0]
		if len(f) >= 3 && f[1] == "(=" {
			name += "=" + f[2]
		}
		out = append(out, name)
	}
	return out
}

// download fetches the kernel package (and the packages its files are split
// into) with apt, extracts them and runs depmod.
func download(cache string, apt *aptConfig, ref pkgRef, root string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("apt-get not found: the harness fetches Debian kernel packages with apt")
	}
	for tool, pkg := range map[string]string{"dpkg-deb": "dpkg", "depmod": "kmod"} {
		if _, err := exec.LookPath(tool); err == nil {
			continue
		}
		if err := installHost(tool, pkg); err != nil {
			return err
		}
	}
	if apt == nil {
		apt = hostApt()
	}
	fields, err := apt.show(ref.String())
	if err != nil {
		return err
	}
	pkgs := append([]string{ref.String()}, splitPackages(ref.pkg, fields["Depends"])...)
	tmp, err := os.MkdirTemp(cache, "fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := apt.command("apt-get", append([]string{"download"}, pkgs...)...)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != len(pkgs) {
		return fmt.Errorf("apt-get download %s: expected %d .deb files, found %d", strings.Join(pkgs, " "), len(pkgs), len(debs))
	}
	tree := filepath.Join(tmp, "tree")
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, tree).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v\n%s", filepath.Base(deb), err, out)
		}
	}
	modRoot, rel, err := modulesRoot(tree)
	if err != nil {
		return fmt.Errorf("package %s: %w", ref, err)
	}
	// depmod -b BASE reads BASE/lib/modules/REL.
	base := filepath.Dir(filepath.Dir(modRoot))
	if out, err := exec.Command("depmod", "-b", base, rel).CombinedOutput(); err != nil {
		return fmt.Errorf("depmod -b %s %s: %v\n%s", base, rel, err, out)
	}
	if err := os.WriteFile(filepath.Join(tree, ".complete"), []byte(ref.String()+"\n"), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(root)
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return err
	}
	return os.Rename(tree, root)
}

// installHost installs a host package providing tool (as root), or says how.
func installHost(tool, pkg string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s not found: install it as root: apt-get install %s", tool, pkg)
	}
	cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s not found and apt-get install %s failed: %v\n%s", tool, pkg, err, out)
	}
	return nil
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
