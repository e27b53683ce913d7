//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "see RDS work: a scripted tour, inside a VM if this kernel has no RDS",
		usage:   "[flags]",
		help: `Run a scripted tour of RDS and print what each step does and shows:
listen and send between two network namespaces over RDS/TCP, an RDS ping,
the kernel's connection table, an exchange over RDS/IB (InfiniBand verbs on
Soft-RoCE) and a short stress run. It exits 0 only if every step worked.

Where it runs:
  - If this kernel has AF_RDS, right here. As root it creates a network
    namespace "rdscat-demo" joined by a veth pair (198.18.0.1 here,
    198.18.0.2 there) and removes them afterwards; otherwise it uses
    127.0.0.1. RDS/IB runs only where an RDMA device is configured.
  - Otherwise it boots Debian's stock kernel in qemu. It builds the VM
    runner (integration/cmd/rdsvm) and a static rdscat with go build from
    the source this rdscat was itself built from, never from the current
    directory: that source must hold the go.mod of github.com/go-rds/rds,
    be owned by you or root and not be writable by others (so run it as
    "go run ./cmd/rdscat demo" from a clone). It downloads the kernel
    packages once into ~/.cache/go-rds-vm; as root it installs missing
    host packages (qemu, dpkg, kmod) with apt-get, printing the commands
    first (-no-install: only print them); and runs "rdscat demo -in-vm"
    inside the VM, where the RDS modules are loaded and Soft-RoCE is set up.

Examples:
  go run ./cmd/rdscat demo          from the repository root
  rdscat demo -vm                   use the VM even though this kernel has RDS
  rdscat demo -vm -kernel 6.12      Debian's 6.12 kernel instead of 6.1`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &demoOpts{}
			fs.BoolVar(&o.inVM, "in-vm", false, "run the tour against the rdsvm VM topology (used inside the VM)")
			fs.BoolVar(&o.vm, "vm", false, "boot the VM even if this kernel has RDS")
			fs.StringVar(&o.kernel, "kernel", "", "Debian kernel for the VM: 6.1 (default) or 6.12")
			fs.DurationVar(&o.vmTimeout, "vm-timeout", 10*time.Minute, "give up on the VM after this long (includes the first kernel download)")
			fs.BoolVar(&o.noInstall, "no-install", false, "never install host packages; say what to install instead")
			return o.run
		},
	})
}

type demoOpts struct {
	inVM      bool
	vm        bool
	kernel    string
	vmTimeout time.Duration
	noInstall bool
}

// exitStatus carries a child's exit code through Main unchanged.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

func (o *demoOpts) run(e *env, args []string) error {
	if len(args) > 0 {
		return usagef("demo takes no arguments")
	}
	switch {
	case o.inVM:
		return runTour(e, vmTopology())
	case !o.vm && haveRDS():
		return o.runLocal(e)
	}
	return o.runVM(e)
}

// haveRDS reports whether socket(AF_RDS, SOCK_SEQPACKET) works here.
func haveRDS() bool {
	fd, err := unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// topology is what the tour runs on.
type topology struct {
	where    string     // one line for the reader
	local    netip.Addr // sender side, current namespace
	peer     netip.Addr // receiver side
	peerNS   string     // namespace of peer ("" for the current one)
	ib1, ib2 netip.Addr // two addresses on one RDMA device, or invalid
	noIB     string     // why the IB step is skipped
}

// vmTopology is the one-VM layout of integration/vmtest.
func vmTopology() topology {
	return topology{
		where:  "the rdsvm VM: initial namespace 10.11.0.1 <-veth-> namespace rdspeer 10.11.0.2; Soft-RoCE rxe0 with 10.22.0.1 and 10.22.0.2",
		local:  netip.MustParseAddr("10.11.0.1"),
		peer:   netip.MustParseAddr("10.11.0.2"),
		peerNS: "rdspeer",
		ib1:    netip.MustParseAddr("10.22.0.1"),
		ib2:    netip.MustParseAddr("10.22.0.2"),
	}
}

func (o *demoOpts) runLocal(e *env) error {
	t := topology{
		where: "this host, loopback 127.0.0.1 (run as root for two namespaces)",
		local: netip.MustParseAddr("127.0.0.1"),
		peer:  netip.MustParseAddr("127.0.0.1"),
		noIB:  "needs two addresses on an RDMA device; try: rdscat demo -vm",
	}
	if isRoot() {
		fmt.Fprintln(e.stdout, "demo: creating network namespace rdscat-demo and veth pair rdsdemo0/rdsdemo1 (198.18.0.1 <-> 198.18.0.2)")
		pair, err := netlinkcfg.SetupVethPair(netlinkcfg.VethPairConfig{
			Name: "rdsdemo0", Peer: "rdsdemo1", PeerNamespaceName: "rdscat-demo",
			Addrs:     []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")},
			PeerAddrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/24")},
		})
		if err != nil {
			return fmt.Errorf("set up the demo namespace: %w", err)
		}
		defer func() {
			if err := pair.Close(); err != nil {
				fmt.Fprintf(e.stderr, "rdscat demo: cleaning up: %v\n", err)
			}
		}()
		t.where = "this host: initial namespace 198.18.0.1 <-veth-> namespace rdscat-demo 198.18.0.2"
		t.local, t.peer, t.peerNS = netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), "rdscat-demo"
	}
	return runTour(e, t)
}

// tour runs rdscat subcommands as child processes and prints a transcript.
type tour struct {
	e      *env
	self   string
	dir    string
	step   int
	failed []string
}

func runTour(e *env, t topology) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rdscat-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tr := &tour{e: e, self: self, dir: dir}
	var uname unix.Utsname
	_ = unix.Uname(&uname)
	fmt.Fprintf(e.stdout, "rdscat demo on Linux %s\n  %s\n", unix.ByteSliceToString(uname.Release[:]), t.where)

	ns := func(args ...string) []string {
		if t.peerNS == "" {
			return args
		}
		return append([]string{args[0], "-netns", t.peerNS}, args[1:]...)
	}
	peer4000 := netip.AddrPortFrom(t.peer, 4000).String()

	// Bring the RDS/TCP connection and all its paths up before anything
	// else: while a new connection sets up its paths, Linux up to 6.12 can
	// reset one that already carried acknowledged messages, losing them,
	// and the connection table briefly shows it connecting
	// (rdssock.WarmUp documents the defect).
	wctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	err = rdssock.WarmUp(wctx, t.local, t.peer, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("bringing up the RDS/TCP connection %v -> %v: %w", t.local, t.peer, err)
	}

	tr.section("RDS ping: the peer's kernel answers from port 0, no program needed")
	tr.run([]string{"ping", "-c", "3", "-i", "200ms", "-from", t.local.String(), t.peer.String()},
		regexp.MustCompile(`3 sent, 3 received, 0% loss`))

	tr.section("The kernel's RDS connection table (rds-info's data)")
	// Connected ("C"), not connecting; it may be sending at that moment ("s").
	tr.run([]string{"info", "connections"},
		regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(t.local.String())+` +`+regexp.QuoteMeta(t.peer.String())+` .*[s-]-C `))

	tr.section("RDS/TCP: a listener in the peer namespace, a sender here")
	tr.exchange(ns("listen", "-count", "3", "-sender", "-timeout", "30s"), peer4000,
		[]string{"send", "-v", "-from", t.local.String(), peer4000, "hello over RDS", "reliable", "and in order"},
		[]string{"hello over RDS", "reliable", "and in order"})

	if t.ib1.IsValid() {
		ib := netip.AddrPortFrom(t.ib2, 4001).String()
		tr.section("RDS/IB: the same API over InfiniBand verbs (Soft-RoCE)")
		tr.exchange([]string{"listen", "-v", "-count", "2", "-timeout", "30s"}, ib,
			[]string{"send", "-v", "-from", t.ib1.String(), ib, "this went over RoCE", "with RDMA underneath"},
			[]string{"this went over RoCE", "with RDMA underneath"})
		tr.run([]string{"info", "ib-connections"}, regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(t.ib1.String())+` `))
	} else {
		tr.section("RDS/IB: skipped: " + t.noIB)
	}

	tr.section("A short stress run: 2 tasks, 4 requests in flight each, 2 seconds")
	args := []string{"stress", "-listen", netip.AddrPortFrom(t.peer, 4002).String(), "-to", netip.AddrPortFrom(t.peer, 4002).String(),
		"-from", t.local.String(), "-tasks", "2", "-depth", "4", "-size", "1k", "-duration", "2s"}
	if t.peerNS != "" {
		args = append(args, "-listen-netns", t.peerNS)
	}
	tr.run(args, regexp.MustCompile(`\(matches\)`))

	rdmaDemo(tr, t)

	fmt.Fprintln(e.stdout)
	if len(tr.failed) > 0 {
		return fmt.Errorf("%d of %d steps failed: %s", len(tr.failed), tr.step, strings.Join(tr.failed, "; "))
	}
	fmt.Fprintf(e.stdout, "demo: all %d steps worked\n", tr.step)
	return nil
}

func (tr *tour) section(title string) {
	fmt.Fprintf(tr.e.stdout, "\n== %s\n", title)
}

func (tr *tour) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	tr.failed = append(tr.failed, fmt.Sprintf("step %d: %s", tr.step, msg))
	fmt.Fprintf(tr.e.stdout, "   FAILED: %s\n", msg)
}

func (tr *tour) cmd(ctx context.Context, args []string) (*exec.Cmd, *bytes.Buffer) {
	c := exec.CommandContext(ctx, tr.self, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.Dir = tr.dir
	return c, &out
}

func (tr *tour) show(args []string, out string) {
	fmt.Fprintf(tr.e.stdout, "$ rdscat %s\n", quoteArgs(args))
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l != "" {
			fmt.Fprintf(tr.e.stdout, "  %s\n", l)
		}
	}
}

// run runs one command and checks its output against want.
func (tr *tour) run(args []string, want *regexp.Regexp) {
	tr.step++
	ctx, cancel := context.WithTimeout(tr.e.ctx, time.Minute)
	defer cancel()
	c, out := tr.cmd(ctx, args)
	err := c.Run()
	tr.show(args, out.String())
	switch {
	case err != nil:
		tr.fail("rdscat %s: %v", args[0], err)
	case !want.MatchString(out.String()):
		tr.fail("rdscat %s: output lacks %q", args[0], want)
	}
}

// exchange starts a listener, runs a sender, and checks what arrived.
func (tr *tour) exchange(listen []string, addr string, send []string, want []string) {
	tr.step++
	ctx, cancel := context.WithTimeout(tr.e.ctx, time.Minute)
	defer cancel()
	ready := filepath.Join(tr.dir, fmt.Sprintf("ready%d", tr.step))
	largs := append(append([]string{}, listen...), "-ready", ready, addr)
	lc, lout := tr.cmd(ctx, largs)
	if err := lc.Start(); err != nil {
		tr.fail("start listener: %v", err)
		return
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err := os.Stat(ready); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			lc.Wait()
			tr.show(largs, lout.String())
			tr.fail("the listener did not bind within 30s")
			return
		}
	}
	fmt.Fprintf(tr.e.stdout, "$ rdscat %s &\n", quoteArgs(largs))
	sc, sout := tr.cmd(ctx, send)
	serr := sc.Run()
	tr.show(send, sout.String())
	lerr := lc.Wait()
	fmt.Fprintf(tr.e.stdout, "listener output:\n")
	for _, l := range strings.Split(strings.TrimRight(lout.String(), "\n"), "\n") {
		fmt.Fprintf(tr.e.stdout, "  %s\n", l)
	}
	switch {
	case serr != nil:
		tr.fail("rdscat send: %v", serr)
	case lerr != nil:
		tr.fail("rdscat listen: %v", lerr)
	default:
		var got []string
		for _, l := range strings.Split(strings.TrimRight(lout.String(), "\n"), "\n") {
			if strings.HasPrefix(l, "rdscat: ") {
				continue // -v notes
			}
			if _, msg, ok := strings.Cut(l, "\t"); ok {
				l = msg
			}
			got = append(got, l)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			tr.fail("received %q, sent %q", got, want)
		}
	}
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// ---- booting the VM ----

const modulePath = "github.com/go-rds/rds"

func (o *demoOpts) runVM(e *env) error {
	if o.kernel != "" && o.kernel != "6.1" && o.kernel != "6.12" && !strings.HasPrefix(o.kernel, "linux-image-") {
		return usagef("bad -kernel %q: want 6.1, 6.12 or a linux-image-* package name", o.kernel)
	}
	fmt.Fprintln(e.stdout, "demo: this kernel has no AF_RDS (or -vm was given): running the demo in a VM with Debian's kernel")
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("go"); err != nil {
		return errors.New("the VM demo builds its runner with the go command, which is not on PATH: install Go (https://go.dev/dl)")
	}
	if err := hostTools(e, o.noInstall); err != nil {
		return err
	}
	cache, err := cacheDir()
	if err != nil {
		return err
	}
	bin := filepath.Join(cache, "rdscat-demo")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	rdsvm, rdscat := filepath.Join(bin, "rdsvm"), filepath.Join(bin, "rdscat")
	fmt.Fprintf(e.stdout, "demo: building the VM runner and a static rdscat from %s into %s\n", root, bin)
	for out, pkg := range map[string]string{rdsvm: "./integration/cmd/rdsvm", rdscat: "./cmd/rdscat"} {
		b := exec.CommandContext(e.ctx, "go", "build", "-o", out, pkg)
		b.Dir = root
		// Only the module's own go.mod: no workspace file above it, no
		// -modfile or other flags from the environment.
		b.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
		if msg, err := b.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	// rdsvm packs rdsvm.json and testdata/ of its working directory into
	// the VM; run it from an empty directory so that none are picked up.
	work, err := os.MkdirTemp("", "rdscat-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fmt.Fprintln(e.stdout, "demo: booting the VM (about 15 s under TCG; the first run also downloads the kernel)")
	ctx, cancel := context.WithTimeout(e.ctx, o.vmTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, rdsvm, rdscat, "demo", "-in-vm")
	c.Dir = work
	c.Stdout, c.Stderr = e.stdout, e.stderr
	c.Env = os.Environ()
	if os.Getenv("RDSVM_TIMEOUT") == "" {
		c.Env = append(c.Env, "RDSVM_TIMEOUT="+o.vmTimeout.String())
	}
	if o.kernel != "" {
		c.Env = append(c.Env, "RDSVM_KERNEL="+o.kernel)
	}
	err = c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && e.ctx.Err() == nil:
		return timeoutf("the VM did not finish within %v (-vm-timeout)", o.vmTimeout)
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return &exitStatus{ee.ExitCode(), fmt.Sprintf("the demo in the VM failed (exit code %d, see above)", ee.ExitCode())}
	}
	return fmt.Errorf("run the VM: %w", err)
}

// moduleRoot returns the source directory of the module this binary was
// built from, the only code the VM demo builds and runs (possibly as
// root). It never looks at the current directory: a go.mod found there,
// or above it, says nothing about who wrote the code next to it.
//
// Where the binary came from: runtime.Caller reports the path the compiler
// read this very file from, compiled into the binary. For "go run
// ./cmd/rdscat demo" and "go build" in a clone that is the clone; for "go
// install ...@version" it is the read-only module cache. Unlike "go env
// GOMOD", it does not depend on the caller's directory, and unlike the
// build info's settings (which hold VCS data, not a path) it names the
// directory. A binary built with -trimpath has no such path and is
// refused. The directory must then hold a go.mod naming the module the
// build info names as main, be owned by the invoking user or root, and not
// be writable by others.
func moduleRoot() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("this rdscat carries no build information, so the VM demo cannot tell which source it came from: run it from a clone of " + modulePath + ": go run ./cmd/rdscat demo")
	}
	_, file, _, _ := runtime.Caller(0)
	sudo := -1
	if n, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && os.Geteuid() == 0 {
		sudo = n
	}
	return checkModuleRoot(bi.Main.Path, file, os.Geteuid(), sudo)
}

// demoFile is this file's path inside the module.
const demoFile = "cmd/rdscat/internal/cli/demo.go"

// checkModuleRoot derives the module root from file, the compiled-in path
// of demo.go, and checks it (see moduleRoot). Directories owned by euid,
// by root, or by sudoUID (the user who ran sudo, or -1) are accepted.
func checkModuleRoot(mainPath, file string, euid, sudoUID int) (string, error) {
	clone := "git clone https://" + modulePath + " && cd rds && go run ./cmd/rdscat demo"
	if mainPath != modulePath {
		return "", fmt.Errorf("this binary's main module is %q, not %s: the VM demo builds only from rdscat's own module; run it from a clone: %s", mainPath, modulePath, clone)
	}
	if !filepath.IsAbs(file) || !strings.HasSuffix(filepath.ToSlash(file), "/"+demoFile) {
		return "", fmt.Errorf("this rdscat was built without its source path (-trimpath?), so the VM demo cannot tell which source to build: run it from a clone: %s", clone)
	}
	root := filepath.Clean(strings.TrimSuffix(file, demoFile))
	gomod := filepath.Join(root, "go.mod")
	if !isOurModule(gomod) {
		return "", fmt.Errorf("%s, the module this rdscat was built from, no longer holds the go.mod of %s: rebuild rdscat from a clone: %s", root, modulePath, clone)
	}
	for _, p := range []string{root, gomod} {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return "", fmt.Errorf("%s: no owner information", p)
		}
		if own := int(sys.Uid); own != euid && own != 0 && own != sudoUID {
			return "", fmt.Errorf("%s is owned by uid %d, neither you (uid %d) nor root: the VM demo builds and runs only code you or root own", p, own, euid)
		}
		if st.Mode().Perm()&0o002 != 0 {
			return "", fmt.Errorf("%s is writable by every user (mode %v): the VM demo will not build from it; chmod o-w %s", p, st.Mode().Perm(), p)
		}
	}
	return root, nil
}

// isOurModule reports whether gomod's module line names modulePath.
func isOurModule(gomod string) bool {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}

// hostTools makes sure qemu and the tools that unpack Debian kernels are
// present, installing them with apt-get as root.
func hostTools(e *env, noInstall bool) error {
	need := map[string]string{"qemu-system-x86_64": "qemu-system-x86", "dpkg-deb": "dpkg", "depmod": "kmod"}
	var missing []string
	for tool, pkg := range need {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, pkg)
		}
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("the VM demo downloads Debian's kernel with apt-get, which this host lacks (a Debian or Ubuntu host is needed)")
	}
	if len(missing) == 0 {
		return nil
	}
	install := "apt-get install -y --no-install-recommends " + strings.Join(missing, " ")
	if !isRoot() || noInstall {
		return fmt.Errorf("the VM demo needs %s: install with: sudo apt-get update && sudo %s", strings.Join(missing, ", "), install)
	}
	fmt.Fprintf(e.stdout, "demo: %s missing; installing as root now (-no-install to refuse):\n  apt-get update\n  %s\n", strings.Join(missing, ", "), install)
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, missing...)} {
		c := exec.CommandContext(e.ctx, "apt-get", args...)
		c.Stdout, c.Stderr = e.stderr, e.stderr
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := c.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// cacheDir is where rdsvm keeps kernels (the same rules as rdsvm).
func cacheDir() (string, error) {
	if d := os.Getenv("RDSVM_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "go-rds-vm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set RDSVM_CACHE: %w", err)
	}
	return filepath.Join(home, ".cache", "go-rds-vm"), nil
}
