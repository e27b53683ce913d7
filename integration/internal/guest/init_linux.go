// Package guest is the PID 1 of the rdsvm VM: it mounts the usual
// filesystems, loads kernel modules, builds the network topology described in
// package vmtest, runs the test binary with its output on a dedicated serial
// port, reports the exit status on another, and powers the VM off.
//
// The same binary also serves as /sbin/modprobe for the kernel's
// request_module (see [Modprobe]).
package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/integration/internal/kernel"
	"github.com/go-rds/rds/integration/internal/vmconf"
)

// Init runs the guest. It never returns: the VM is powered off at the end,
// and any failure is reported on the status port first.
func Init() {
	var status *os.File
	err := mountAll()
	if err == nil {
		status = openPort(vmconf.StatusPort)
		err = run(status)
	}
	if err != nil {
		logf("FAILED: %v", err)
		if status != nil {
			fmt.Fprintf(status, "%s %s\n", vmconf.StatusError, strings.ReplaceAll(err.Error(), "\n", " | "))
			drain(status)
		}
	}
	poweroff()
}

// logf writes a line to the console (ttyS0 on the host side: the console log).
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rdsvm-init: "+format+"\n", args...)
}

func run(status *os.File) error {
	// With a user-supplied initramfs the kernel finds no /dev/console before
	// devtmpfs is mounted, so init starts without stdio: attach it now.
	if c, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup2(int(c.Fd()), fd)
		}
	}
	if status == nil {
		return errors.New("no status port /dev/ttyS2: was qemu started by rdsvm?")
	}
	cfg, err := vmconf.Read()
	if err != nil {
		return err
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	role, _ := vmconf.CmdlineValue(string(cmdline), vmconf.CmdlineRole)
	if role == "" {
		role = vmconf.RoleMain
	}
	_ = unix.Sethostname([]byte("rdsvm-" + role))
	// Show oops and warning text on the console, not only errors ("quiet").
	_ = os.WriteFile("/proc/sys/kernel/printk", []byte("5 4 1 7"), 0)
	// A kernel oops must not leave a half-dead VM running until the timeout.
	_ = os.WriteFile("/proc/sys/kernel/panic_on_oops", []byte("1"), 0)

	seedRandom(cfg.Seed)

	topo, err := newTopology(cfg.VMs, role)
	if err != nil {
		return fmt.Errorf("network topology: %w", err)
	}
	defer topo.close()
	for _, m := range cfg.Modules {
		if err := loadModule(filepath.Join(vmconf.ModulesDir, cfg.Release, m)); err != nil {
			return err
		}
		if strings.HasPrefix(filepath.Base(m), "veth.ko") {
			if err := topo.links(); err != nil {
				return fmt.Errorf("network topology: %w", err)
			}
		}
	}
	if err := topo.finish(); err != nil {
		return fmt.Errorf("network topology: %w", err)
	}
	patchOnceKeys()

	out := openPort(vmconf.OutputPort)
	if out == nil {
		return errors.New("no test output port /dev/ttyS1")
	}
	env := append([]string{
		"PATH=" + vmconf.TestBinDir + ":/sbin:/bin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		vmconf.EnvGuest + "=1",
		vmconf.EnvRole + "=" + role,
		vmconf.EnvVMs + "=" + strconv.Itoa(cfg.VMs),
		vmconf.EnvKernel + "=" + cfg.Release,
	}, cfg.Env...)
	cmd := exec.Command(cfg.Binary, cfg.Args...)
	cmd.Dir = vmconf.TestDir
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	fmt.Fprintf(status, "%s %.2f\n", vmconf.StatusReady, uptime())
	logf("running %s %s", cfg.Binary, strings.Join(cfg.Args, " "))
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(out, "rdsvm: cannot run test binary: %v\n", err)
			drain(out)
			return fmt.Errorf("run %s: %w", cfg.Binary, err)
		}
		code = ee.ExitCode()
		if code < 0 { // killed by a signal
			code = 128
			if ws, ok := ee.Sys().(unix.WaitStatus); ok && ws.Signaled() {
				code += int(ws.Signal())
				fmt.Fprintf(out, "rdsvm: test binary killed by signal %v\n", ws.Signal())
			}
		}
	}
	drain(out)
	logf("test exited with code %d", code)
	fmt.Fprintf(status, "%s %d\n", vmconf.StatusExit, code)
	drain(status)
	return nil
}

func mountAll() error {
	type mnt struct {
		src, dst, fstype, data string
		flags                  uintptr
		optional               bool
	}
	const nsd = unix.MS_NOSUID | unix.MS_NODEV
	for _, m := range []mnt{
		{"proc", "/proc", "proc", "", nsd | unix.MS_NOEXEC, false},
		{"sysfs", "/sys", "sysfs", "", nsd | unix.MS_NOEXEC, false},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755", unix.MS_NOSUID, false},
		{"devpts", "/dev/pts", "devpts", "mode=0620,ptmxmode=0666", unix.MS_NOSUID | unix.MS_NOEXEC, false},
		{"tmpfs", "/run", "tmpfs", "mode=0755", nsd, false},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777", nsd, false},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777", nsd, true},
		{"debugfs", "/sys/kernel/debug", "debugfs", "", nsd | unix.MS_NOEXEC, true},
		{"configfs", "/sys/kernel/config", "configfs", "", nsd | unix.MS_NOEXEC, true},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil && !m.optional {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil && !m.optional {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	_ = os.Symlink("/proc/self/fd", "/dev/fd")
	_ = os.MkdirAll("/var", 0o755)
	_ = os.Symlink("/run", "/var/run")
	return nil
}

// loadModule loads one module file; compressed modules are handed to the
// kernel to decompress. The file's content decides, not its name: rdsvm
// copies modules in decompressed under their original names (see
// kernel.ModuleFile). Already loaded is fine.
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	flags := 0
	if !kernel.IsELF(magic[:]) {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), "", flags); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: finit_module: %w (see dmesg in the console log)", filepath.Base(path), err)
	}
	return nil
}

// openPort opens /dev/ttyS<n> for writing in raw mode, so bytes pass
// unchanged (no \n to \r\n mapping).
func openPort(n int) *os.File {
	f, err := os.OpenFile(fmt.Sprintf("/dev/ttyS%d", n), os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	fd := int(f.Fd())
	if t, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CBAUD
		t.Cflag |= unix.CS8 | unix.B115200
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, t)
	}
	return f
}

// drain waits until everything written to the serial port left the UART.
func drain(f *os.File) {
	_ = unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
}

func uptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

func poweroff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reboot only fails when not PID 1; wait for the host to give up.
	for {
		time.Sleep(time.Hour)
	}
}

// patchOnceKeys makes the kernel run its one-time network initializations
// (the secrets behind TCP sequence numbers and the connection hash tables,
// RDS's among them (warmRDS), each behind a static key that is patched
// into the kernel text on first use) before the test starts. Under TCG a vCPU now and then executes the
// breakpoint that such patching plants for a moment, and the kernel dies
// of an int3 oops (seen in an RDS/TCP connect worker at
// secure_tcp_seq_and_ts_off, on 6.12). A crash here, before the ready
// status, is a boot crash, which rdsvm boots again; during the test it
// would fail the whole package. Failures here are logged, not fatal: the
// test would meet them too.
//
// The receive timestamp key (netstamp_needed_key) is not a one-time key:
// the kernel switches it on while any socket asks for timestamps and off
// again after the last one closes, so every test that sets SO_TIMESTAMP
// patched the text twice while traffic flowed; one such patch killed a
// 6.12 guest in __netif_receive_skb_core during an RDS/TCP send (a local
// CI run, November 2026). Init keeps a socket with SO_TIMESTAMP open for
// the VM's life, so the key is switched on once, here, and never off.
func patchOnceKeys() {
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		logf("timestamp key: socket: %v", err)
	} else if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMP, 1); err != nil {
		logf("timestamp key: SO_TIMESTAMP: %v", err)
		unix.Close(fd)
	} // else the descriptor stays open until poweroff
	for _, network := range []string{"tcp4", "tcp6"} {
		host := "127.0.0.1"
		if network == "tcp6" {
			host = "::1"
		}
		l, err := net.Listen(network, net.JoinHostPort(host, "0"))
		if err != nil {
			logf("warming %s: %v", network, err)
			continue
		}
		c, err := net.DialTimeout(network, l.Addr().String(), 5*time.Second)
		if err != nil {
			logf("warming %s: %v", network, err)
		} else {
			c.Close()
		}
		l.Close()
	}
	for _, addr := range []string{"127.0.0.1:9", "[::1]:9"} {
		if c, err := net.Dial("udp", addr); err == nil {
			c.Write([]byte{0})
			c.Close()
		}
	}
	warmRDS()
	// The key is switched off by a work item after the first use.
	time.Sleep(100 * time.Millisecond)
}

// warmRDSAddr is the loopback address of warmRDS's socket: no test uses
// it, so its loopback connection, which outlives the socket, is in no
// test's way.
var warmRDSAddr = [4]byte{127, 0, 0, 9}

// warmRDS runs RDS's own one-time keys: the bind hash secret (rds_bind)
// and the connection hash secrets (__rds_conn_create), by binding a
// socket and sending one message to itself. On 6.12 a test's first binds
// once met the bind key's patch: int3 oops in rds_bind (CI, November
// 2026).
func warmRDS() {
	fd, err := unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		logf("warming rds: socket: %v", err)
		return
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: warmRDSAddr}); err != nil {
		logf("warming rds: bind: %v", err)
		return
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		logf("warming rds: getsockname: %v", err)
		return
	}
	if err := unix.Sendto(fd, []byte{0}, 0, sa); err != nil {
		logf("warming rds: send to itself: %v", err)
	}
}

// seedRandom credits seed (from the host) to the kernel's entropy pool and
// waits until the kernel's random number generator is ready. Without a
// hardware source the guest kernel became ready only about 9 s into its
// boot, and the static key that says so (crng_is_ready) was patched into
// its text at that moment, under TCG once while an RDS/IB connect worker
// ran get_random_u32 on the other vCPU: int3 oops (6.12, CI, November
// 2026). Seeded here, the switch happens during init, before the test.
func seedRandom(seed []byte) {
	if len(seed) == 0 {
		logf("no random seed from the host")
		return
	}
	f, err := os.OpenFile("/dev/random", os.O_WRONLY, 0)
	if err != nil {
		logf("random seed: %v", err)
		return
	}
	defer f.Close()
	// struct rand_pool_info: entropy_count (bits), buf_size (bytes), buf.
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		logf("random seed: RNDADDENTROPY: %v", e)
		return
	}
	var b [1]byte
	for deadline := time.Now().Add(2 * time.Second); ; {
		if _, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK); err == nil {
			return
		}
		if time.Now().After(deadline) {
			logf("random seed: the kernel's generator is not ready 2 s after seeding")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
