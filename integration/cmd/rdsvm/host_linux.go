package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-rds/rds/integration/internal/initramfs"
	"github.com/go-rds/rds/integration/internal/kernel"
	"github.com/go-rds/rds/integration/internal/vmconf"
)

// defaultModules are loaded in every VM, in this order (dependencies first,
// as resolved from modules.dep).
var defaultModules = []string{
	"veth", "virtio_net", "virtio_pci",
	"rds", "rds_tcp", "crc32_generic", "rdma_rxe", "rds_rdma", "sch_netem",
}

// builtinStandIns maps a default module to the built-in one that makes it
// unnecessary: from Linux 6.14 on, crc32 is a library built into the kernel
// (Debian's 7.2 lists it in modules.builtin), crc32_generic no longer
// exists and rxe needs none.
var builtinStandIns = map[string]string{"crc32_generic": "crc32"}

// selectModules returns the modules to load from names: each one the kernel
// has, loadable or built in, or whose built-in stand-in it has. Anything else
// is left in, so that Closure fails naming it.
func selectModules(db *kernel.ModuleDB, names []string) []string {
	var out []string
	for _, n := range names {
		if s, ok := builtinStandIns[kernel.ModuleName(n)]; ok && !db.Has(n) && db.IsBuiltin(s) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// pkgConfig is the optional rdsvm.json in the package directory.
type pkgConfig struct {
	VMs       int    `json:"vms"`        // 1 (default) or 2
	MemoryMiB int    `json:"memory_mib"` // guest memory per VM, default 512
	Timeout   string `json:"timeout"`    // whole-run timeout, a time.ParseDuration string
	// Race says the package's tests must run with the race detector:
	// rdstest builds them with -race, and rdsvm refuses a test binary
	// built without it, so a run by hand cannot quietly lose the checks.
	Race bool `json:"race"`
	// Kernels, if set, are the kernels (rdstest's aliases: 6.1, 6.12,
	// sid) that rdstest runs the package on when its kernel list is the
	// default. rdsvm itself runs the package on any kernel it is given.
	Kernels []string `json:"kernels"`
}

const defaultTimeout = 15 * time.Minute

// defaultGrace is how long one VM of a two-VM run may go on after the
// other has finished (RDSVM_GRACE overrides it).
const defaultGrace = 2 * time.Minute

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rdsvm: "+format+"\n", args...)
}

func runHost(testBin string, args []string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	if static, err := initramfs.IsStatic(self); err != nil || !static {
		return 1, fmt.Errorf("%s is not a static binary, so it cannot run as the VM's init: "+
			"build it with CGO_ENABLED=0 go build -o rdsvm ./integration/cmd/rdsvm", self)
	}
	testBin, err = filepath.Abs(testBin)
	if err != nil {
		return 1, err
	}
	cfg, err := readPkgConfig()
	if err != nil {
		return 1, err
	}
	if cfg.Race {
		if err := requireRace(testBin); err != nil {
			return 1, err
		}
	}
	timeout, err := pickTimeout(cfg, args)
	if err != nil {
		return 1, err
	}
	mem := 512
	if cfg.MemoryMiB > 0 {
		mem = cfg.MemoryMiB
	}
	if v := os.Getenv("RDSVM_MEMORY"); v != "" {
		if mem, err = strconv.Atoi(v); err != nil || mem < 128 {
			return 1, fmt.Errorf("RDSVM_MEMORY=%q: want a size in MiB, at least 128", v)
		}
	}

	cache, err := kernel.CacheDir()
	if err != nil {
		return 1, err
	}
	kname := os.Getenv("RDSVM_KERNEL")
	if kname == "" {
		kname = "6.1"
	}
	k, err := kernel.Fetch(cache, kname, logf)
	if err != nil {
		return 1, err
	}
	db, err := k.LoadModuleDB()
	if err != nil {
		return 1, err
	}
	mods := selectModules(db, defaultModules)
	mods = append(mods, strings.FieldsFunc(os.Getenv("RDSVM_EXTRA_MODULES"), func(r rune) bool {
		return r == ',' || r == ' '
	})...)
	modFiles, err := db.Closure(mods)
	if err != nil {
		return 1, fmt.Errorf("kernel %s: %w", k.Release, err)
	}

	work, err := os.MkdirTemp("", "rdsvm-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(work)
	initrd := filepath.Join(work, "initramfs.cpio")
	gcfg := &vmconf.Config{
		Modules: modFiles,
		Release: k.Release,
		Binary:  vmconf.TestBinDir + "/" + filepath.Base(testBin),
		Args:    args,
		Env:     passEnv(),
		VMs:     cfg.VMs,
		Seed:    make([]byte, 64),
	}
	if _, err := rand.Read(gcfg.Seed); err != nil {
		return 1, fmt.Errorf("random seed for the guest: %w", err)
	}
	if err := buildInitramfs(initrd, self, testBin, k, gcfg); err != nil {
		return 1, fmt.Errorf("build initramfs: %w", err)
	}

	logDir := filepath.Join(cache, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return 1, err
	}
	wd, _ := os.Getwd()
	logBase := sanitize(filepath.Base(wd) + "-" + filepath.Base(testBin) + "-" + k.Release)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigc)
	var interrupted atomic.Bool
	go func() {
		if s, ok := <-sigc; ok {
			interrupted.Store(true)
			logf("got %v: stopping the VM(s)", s)
			cancel()
		}
	}()

	var ports []int
	if cfg.VMs == 2 {
		if ports, err = freeUDPPorts(2); err != nil {
			return 1, err
		}
	}
	out := &lineWriter{w: os.Stdout}
	if cfg.VMs == 2 {
		logf("booting kernel %s (%s), two VMs, timeout %v", k.Release, k.Package, timeout)
	} else {
		logf("booting kernel %s (%s), timeout %v", k.Release, k.Package, timeout)
	}
	// In a two-VM run, once one VM is done the other gets otherVMGrace to
	// finish: a side waiting forever for a partner that is gone should not
	// hold the run until the overall timeout.
	otherVMGrace := defaultGrace
	if g := os.Getenv("RDSVM_GRACE"); g != "" {
		if otherVMGrace, err = time.ParseDuration(g); err != nil {
			return 1, fmt.Errorf("RDSVM_GRACE: %w", err)
		}
	}
	vms := bootWithRetries(ctx, func() []*vm {
		return newVMs(cfg.VMs, k, initrd, mem, ports, logDir, logBase, out)
	}, otherVMGrace, interrupted.Load)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)

	code := 0
	for _, v := range vms {
		name := "VM"
		if cfg.VMs == 2 {
			name = "VM " + v.role
		}
		switch {
		case v.exitCode >= 0:
			logf("kernel %s: %s booted in %.1fs, test finished in %.1fs (exit code %d; console log %s)",
				k.Release, name, v.bootTime.Seconds(), v.testTime.Seconds(), v.exitCode, v.console)
			if v.exitCode != 0 && code == 0 {
				code = v.exitCode
			}
			if v.exitCode != 0 {
				v.kernelComplaints()
			}
			continue
		case v.partnerCrashed.Load() && !timedOut && !interrupted.Load():
			logf("kernel %s: %s stopped because the other VM crashed while booting", k.Release, name)
		case v.abandoned.Load() && !timedOut && !interrupted.Load():
			logf("kernel %s: %s did not finish within %v after the other VM did; stopped it",
				k.Release, name, otherVMGrace)
		case timedOut:
			logf("kernel %s: %s timed out after %v (set RDSVM_TIMEOUT or \"timeout\" in rdsvm.json to change)",
				k.Release, name, timeout)
		case interrupted.Load():
			logf("kernel %s: %s interrupted", k.Release, name)
		case v.setupErr != "":
			logf("kernel %s: %s: guest setup failed: %s", k.Release, name, v.setupErr)
		case v.runErr != nil:
			logf("kernel %s: %s: %v", k.Release, name, v.runErr)
		case v.bootStalled.Load():
			logf("kernel %s: %s did not come up within %v, %d boots in all; stopped it", k.Release, name, bootLimit, bootAttempts)
		default:
			why := "kernel panic, crash or lost output"
			if p := panicLine(v.console); p != "" {
				why = "the guest kernel panicked: " + p
			}
			logf("kernel %s: %s stopped without reporting an exit status (%s)", k.Release, name, why)
		}
		v.printConsoleTail(60)
		code = 1
	}
	return code, nil
}

// bootAttempts is how many times rdsvm boots the VM(s) when a guest
// kernel crashes, or stalls, before the test starts.
const bootAttempts = 3

// bootLimit is how long a guest may take to say it is ready before rdsvm
// takes it for stalled, stops it and boots again. Guests come up in 4-13 s
// under TCG; twice (ci38, ci50) one printed nothing, or only RCU stalls,
// for the whole 15-minute timeout of its run. A variable for the tests.
var bootLimit = 3 * time.Minute

// bootWithRetries runs the VMs that mk describes, and runs a fresh set
// again, up to bootAttempts times in all, while a guest kernel crashes
// before the test starts. It returns the VMs of the last attempt.
func bootWithRetries(ctx context.Context, mk func() []*vm, grace time.Duration, interrupted func() bool) []*vm {
	for attempt := 1; ; attempt++ {
		vms := mk()
		runVMs(ctx, vms, grace)
		crashed := bootCrashes(vms)
		if len(crashed) == 0 || attempt == bootAttempts || ctx.Err() != nil || interrupted() {
			return vms
		}
		// The kernel died, or stalled, before the guest's init had even
		// started the test: nothing of the test ran, so booting again
		// loses nothing. Under TCG a crash happens now and then while the
		// kernel patches its own code at boot (an int3 oops at a
		// static-key site).
		for _, v := range crashed {
			kept := strings.TrimSuffix(v.console, ".console.log") + fmt.Sprintf(".boot-crash-%d.console.log", attempt)
			if err := os.Rename(v.console, kept); err != nil {
				kept = v.console
			}
			what := "crashed while booting, before the test started (" + panicLine(kept)
			if v.bootStalled.Load() {
				what = fmt.Sprintf("did not come up within %v (stopped it", bootLimit)
			}
			logf("kernel %s: the %s VM %s; console log %s); booting again, attempt %d of %d",
				v.kernel.Release, v.role, what, kept, attempt+1, bootAttempts)
		}
	}
}

// newVMs describes the n VMs of one boot attempt.
func newVMs(n int, k *kernel.Kernel, initrd string, mem int, ports []int, logDir, logBase string, out *lineWriter) []*vm {
	vms := make([]*vm, n)
	roles := []string{vmconf.RoleMain, vmconf.RolePeer}
	for i := range vms {
		vms[i] = &vm{
			role:    roles[i],
			index:   i,
			kernel:  k,
			initrd:  initrd,
			mem:     mem,
			vms:     n,
			ports:   ports,
			console: filepath.Join(logDir, logBase+"-"+roles[i]+".console.log"),
			out:     out,
		}
		if n == 2 && i == 1 {
			vms[i].prefix = "[" + roles[i] + "] "
		}
	}
	return vms
}

// runVMs boots the VMs and waits for all of them. When one finishes, the
// others get grace to finish too; when one crashes while booting, the
// others are stopped at once, since the run will be repeated or fail.
func runVMs(ctx context.Context, vms []*vm, grace time.Duration) {
	var wg sync.WaitGroup
	var once sync.Once
	cancels := make([]context.CancelFunc, len(vms))
	ctxs := make([]context.Context, len(vms))
	for i := range vms {
		ctxs[i], cancels[i] = context.WithCancel(ctx)
	}
	for i, v := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.run(ctxs[i])
			crashed := v.bootCrashed()
			once.Do(func() {
				for j, o := range vms {
					if j == i {
						continue
					}
					if crashed {
						o.partnerCrashed.Store(true)
						cancels[j]()
						continue
					}
					time.AfterFunc(grace, func() {
						o.abandoned.Store(true)
						cancels[j]()
					})
				}
			})
		}()
	}
	wg.Wait()
	for _, c := range cancels {
		c()
	}
}

// bootCrashed reports whether v's kernel panicked, or stalled for
// bootLimit, before the guest's init said it was ready to start the test.
func (v *vm) bootCrashed() bool {
	return v.exitCode < 0 && v.bootTime == 0 && v.setupErr == "" && v.runErr == nil &&
		!v.abandoned.Load() && !v.partnerCrashed.Load() && (v.bootStalled.Load() || panicLine(v.console) != "")
}

// bootCrashes returns the VMs that crashed while booting.
func bootCrashes(vms []*vm) []*vm {
	var crashed []*vm
	for _, v := range vms {
		if v.bootCrashed() {
			crashed = append(crashed, v)
		}
	}
	return crashed
}

// vm is one qemu instance.
type vm struct {
	role    string
	index   int
	kernel  *kernel.Kernel
	initrd  string
	mem     int
	vms     int
	ports   []int // UDP ports of the two VMs' virtual NICs
	console string
	out     *lineWriter
	prefix  string

	exitCode  int
	abandoned atomic.Bool // stopped because the other VM finished long ago
	// partnerCrashed: stopped because the other VM crashed while booting.
	partnerCrashed atomic.Bool
	up             atomic.Bool // the guest said it was ready
	bootStalled    atomic.Bool // stopped because it was not up within bootLimit
	setupErr       string
	runErr         error
	bootTime       time.Duration
	testTime       time.Duration
}

func (v *vm) run(ctx context.Context) {
	v.exitCode = -1
	accel := os.Getenv("RDSVM_ACCEL")
	if accel == "" {
		accel = "tcg"
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		v.runErr = err
		return
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		v.runErr = err
		return
	}
	qemu := os.Getenv("RDSVM_QEMU")
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	args := []string{
		"-nodefaults", "-no-user-config",
		"-accel", accel,
		"-m", strconv.Itoa(v.mem),
		"-smp", "2",
		"-display", "none",
		"-no-reboot",
		"-kernel", v.kernel.BootImage(),
		"-initrd", v.initrd,
		// cryptomgr.notests: the crypto self-tests took 0.4 s of a boot
		// under TCG, and once a soft lockup that used up a whole minute.
		"-append", strings.TrimSpace(fmt.Sprintf("console=ttyS0 panic=-1 quiet tsc=reliable cryptomgr.notests %s=%s %s=%d %s",
			vmconf.CmdlineRole, v.role, vmconf.CmdlineVMs, v.vms, os.Getenv("RDSVM_CMDLINE"))),
		"-serial", "file:" + v.console,
		"-serial", "file:/dev/fd/3",
		"-serial", "file:/dev/fd/4",
	}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	if v.vms == 2 {
		self, other := v.ports[v.index], v.ports[1-v.index]
		args = append(args,
			"-netdev", fmt.Sprintf("socket,id=n0,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", other, self),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:33:00:%02x", v.index+1))
	}
	cmd := exec.Command(qemu, args...)
	cmd.ExtraFiles = []*os.File{outW, stW}
	var qerr bytes.Buffer
	cmd.Stdout = &qerr
	cmd.Stderr = &qerr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		outW.Close()
		stW.Close()
		v.runErr = fmt.Errorf("start %s: %w (install it: apt-get install qemu-system-x86)", qemu, err)
		return
	}
	outW.Close()
	stW.Close()

	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		v.out.copyLines(outR, v.prefix)
	}()
	var ready time.Time
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stR)
		for sc.Scan() {
			key, val, _ := strings.Cut(sc.Text(), " ")
			switch key {
			case vmconf.StatusReady:
				ready = time.Now()
				v.bootTime = ready.Sub(start)
				v.up.Store(true)
			case vmconf.StatusExit:
				if n, err := strconv.Atoi(val); err == nil {
					v.exitCode = n
					v.testTime = time.Since(ready)
				}
			case vmconf.StatusError:
				v.setupErr = val
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stall := time.NewTimer(bootLimit)
	defer stall.Stop()
	stallC := stall.C // nil once the guest was up at bootLimit
	var werr error
	for waiting := true; waiting; {
		select {
		case werr = <-done:
			waiting = false
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			werr, waiting = <-done, false
		case <-stallC:
			if v.up.Load() {
				stallC = nil
				continue
			}
			v.bootStalled.Store(true)
			_ = cmd.Process.Kill()
			werr, waiting = <-done, false
		}
	}
	readers.Wait()
	outR.Close()
	stR.Close()
	if werr != nil && ctx.Err() == nil && v.exitCode < 0 && !v.bootStalled.Load() {
		v.runErr = fmt.Errorf("qemu: %v: %s", werr, strings.TrimSpace(qerr.String()))
	}
}

var (
	panicRe = regexp.MustCompile(`Kernel panic - not syncing.*`)
	oopsRe  = regexp.MustCompile(`Oops: [^\n]*?:`)
	ripRe   = regexp.MustCompile(`RIP: 0010:([A-Za-z0-9_.]+)\+`)
)

// panicLine returns the kernel's panic message from a console log, if any,
// followed by the first oops and the function it happened in ("Oops:
// divide error: in rds_queue_reconnect"), which is what names a known
// kernel crash.
func panicLine(console string) string {
	b, err := os.ReadFile(console)
	if err != nil {
		return ""
	}
	return describePanic(b)
}

func describePanic(console []byte) string {
	p := strings.TrimSpace(string(panicRe.Find(console)))
	if p == "" {
		return ""
	}
	if o := oopsRe.Find(console); o != nil {
		p += " (" + strings.TrimSuffix(string(o), ":")
		if m := ripRe.FindSubmatch(console); m != nil {
			p += " in " + string(m[1])
		}
		p += ")"
	}
	return p
}

// printConsoleTail shows the last n lines of the guest console log.
func (v *vm) printConsoleTail(n int) {
	b, err := os.ReadFile(v.console)
	if err != nil {
		logf("no console log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintf(os.Stderr, "rdsvm: ---- last %d lines of the %s console (%s) ----\n", len(lines), v.role, v.console)
	for _, l := range lines {
		fmt.Fprintf(os.Stderr, "  | %s\n", l)
	}
	fmt.Fprintf(os.Stderr, "rdsvm: ---- end of console ----\n")
}

var complaint = regexp.MustCompile(`(?m)^.*\b(BUG|WARNING|Oops|general protection|Call Trace|hung_task|RIP:).*$`)

// kernelComplaints prints kernel warnings and oopses from the console log.
func (v *vm) kernelComplaints() {
	b, err := os.ReadFile(v.console)
	if err != nil {
		return
	}
	m := complaint.FindAll(b, 20)
	if len(m) == 0 {
		return
	}
	logf("kernel messages worth a look in %s:", v.console)
	for _, l := range m {
		fmt.Fprintf(os.Stderr, "  | %s\n", strings.TrimRight(string(l), "\r"))
	}
}

// lineWriter writes whole lines from several VMs to one writer.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lineWriter) copyLines(r io.Reader, prefix string) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if prefix != "" {
				// test2json framing markers (^V) would make the peer's
				// results look like the main VM's: drop them.
				line = append([]byte(prefix), bytes.ReplaceAll(line, []byte{0x16}, nil)...)
			}
			lw.mu.Lock()
			lw.w.Write(line)
			lw.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func buildInitramfs(dst, self, testBin string, k *kernel.Kernel, cfg *vmconf.Config) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	b := initramfs.New(bw)
	for _, d := range []string{"/dev", "/proc", "/sys", "/run", "/tmp", "/sbin", "/bin", vmconf.TestDir} {
		if err := b.Dir(d); err != nil {
			return err
		}
	}
	for name, content := range guestEtc {
		if err := b.Bytes(name, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := b.File("/init", self); err != nil {
		return err
	}
	if err := b.Symlink("/sbin/modprobe", "/init"); err != nil {
		return err
	}
	modDir := filepath.Join(vmconf.ModulesDir, k.Release)
	for _, m := range []string{"modules.dep", "modules.alias", "modules.builtin", "modules.order"} {
		src := filepath.Join(k.ModulesDir(), m)
		if _, err := os.Stat(src); err == nil {
			if err := b.File(filepath.Join(modDir, m), src); err != nil {
				return err
			}
		}
	}
	for _, m := range cfg.Modules {
		if err := b.File(filepath.Join(modDir, m), k.ModuleFile(m, logf)); err != nil {
			return err
		}
	}
	if err := b.File(cfg.Binary, testBin); err != nil {
		return err
	}
	libs, err := initramfs.SharedLibs(testBin)
	if err != nil {
		return fmt.Errorf("shared libraries of %s: %w", testBin, err)
	}
	for _, l := range libs {
		if !b.Has(l) {
			if err := b.File(l, l); err != nil {
				return err
			}
		}
	}
	if st, err := os.Stat("testdata"); err == nil && st.IsDir() {
		if err := b.Tree(vmconf.TestDir+"/testdata", "testdata"); err != nil {
			return err
		}
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := b.Bytes(vmconf.ConfigPath, js, 0o644); err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// guestEtc is the little of /etc that Go programs look at.
var guestEtc = map[string]string{
	"/etc/hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
	"/etc/passwd":        "root:x:0:0:root:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
	"/etc/group":         "root:x:0:\nnogroup:x:65534:\n",
	"/etc/nsswitch.conf": "hosts: files\n",
}

func readPkgConfig() (pkgConfig, error) {
	cfg := pkgConfig{VMs: 1}
	b, err := os.ReadFile("rdsvm.json")
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("rdsvm.json: %w", err)
	}
	if cfg.VMs == 0 {
		cfg.VMs = 1
	}
	if cfg.VMs != 1 && cfg.VMs != 2 {
		return cfg, fmt.Errorf("rdsvm.json: vms must be 1 or 2, not %d", cfg.VMs)
	}
	return cfg, nil
}

// pickTimeout: RDSVM_TIMEOUT wins, then rdsvm.json, then -test.timeout plus a
// margin for booting, then the default.
func pickTimeout(cfg pkgConfig, args []string) (time.Duration, error) {
	if v := os.Getenv("RDSVM_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("RDSVM_TIMEOUT: %w", err)
		}
		return d, nil
	}
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil {
			return 0, fmt.Errorf("rdsvm.json timeout: %w", err)
		}
		return d, nil
	}
	for i, a := range args {
		a = strings.TrimPrefix(a, "-")
		var val string
		switch {
		case strings.HasPrefix(a, "-test.timeout="), strings.HasPrefix(a, "test.timeout="):
			_, val, _ = strings.Cut(a, "=")
		case (a == "test.timeout" || a == "-test.timeout") && i+1 < len(args):
			val = args[i+1]
		default:
			continue
		}
		d, err := time.ParseDuration(val)
		if err == nil && d > 0 {
			return d + 2*time.Minute, nil
		}
	}
	return defaultTimeout, nil
}

// passEnv selects the host environment the test should see: RDSTEST_*,
// Go runtime knobs, and the names listed in RDSVM_PASSENV.
func passEnv() []string {
	keep := map[string]bool{"GOTRACEBACK": true, "GODEBUG": true, "GORACE": true, "GOMAXPROCS": true, "CI": true}
	for _, n := range strings.FieldsFunc(os.Getenv("RDSVM_PASSENV"), func(r rune) bool { return r == ',' || r == ' ' }) {
		keep[n] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] || strings.HasPrefix(k, "RDSTEST_") {
			env = append(env, kv)
		}
	}
	return env
}

func freeUDPPorts(n int) ([]int, error) {
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var ports []int
	for range n {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	return ports, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}

// requireRace fails unless testBin was built with the race detector.
func requireRace(testBin string) error {
	info, err := buildinfo.ReadFile(testBin)
	if err != nil {
		return fmt.Errorf("rdsvm.json asks for the race detector, but the build settings of %s are unreadable: %w", testBin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return nil
		}
	}
	return fmt.Errorf("rdsvm.json asks for the race detector: run go test -race (CGO_ENABLED=1) for this package")
}
