//go:build linux

package rdssock

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkRoundTripProcess is a 64-byte request/response between two
// processes, as between an RDS client and server: each side waits for the
// other's message, then answers. The peer is this test binary run again
// (TestRoundTripEchoProcess). Sub-benchmarks: both sides Conns (waiting in
// the runtime poller), and both blocking system calls on a blocking socket,
// as C does. cpu-ns/op-client and -server are each process's CPU time per
// round trip; switches/op-client counts the client's context switches.
func BenchmarkRoundTripProcess(b *testing.B) {
	for _, mode := range []string{"conn", "blocking"} {
		b.Run(mode, func(b *testing.B) { benchRoundTripProcess(b, mode) })
	}
}

const echoEnv = "RDSSOCK_TEST_ECHO_MODE"

func benchRoundTripProcess(b *testing.B, mode string) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	peer := os.NewFile(uintptr(fds[1]), "echo")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRoundTripEchoProcess$")
	cmd.Env = append(os.Environ(), echoEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{peer} // fd 3
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	peer.Close()
	send, recv, closeSide := echoSide(b, fds[0], mode)
	req := make([]byte, 64)
	// The first round trip waits for the peer to start.
	if err := send(req); err != nil {
		b.Fatal(err)
	}
	if _, err := recv(req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var ru0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	for b.Loop() {
		if err := send(req); err != nil {
			b.Fatal(err)
		}
		if n, err := recv(req); err != nil || n != 64 {
			b.Fatalf("receive = %d, %v", n, err)
		}
	}
	b.StopTimer()
	var ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	// The peer reports its CPU time since the first round trip, then exits
	// when this end closes.
	if err := send([]byte("cpu")); err != nil {
		b.Fatal(err)
	}
	reply := make([]byte, 64)
	n, err := recv(reply)
	if err != nil {
		b.Fatal(err)
	}
	peerCPU, err := strconv.ParseInt(string(reply[:n]), 10, 64)
	if err != nil {
		b.Fatalf("peer's CPU time %q: %v", reply[:n], err)
	}
	closeSide()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("echo process: %v", err)
	}
	self := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(self)/float64(b.N), "cpu-ns/op-client")
	b.ReportMetric(float64(ru1.Nvcsw+ru1.Nivcsw-ru0.Nvcsw-ru0.Nivcsw)/float64(b.N), "switches/op-client")
	b.ReportMetric(float64(peerCPU)/float64(b.N), "cpu-ns/op-server")
}

// echoSide returns send and receive functions on fd for mode, and what
// closes fd (once it is a Conn's, only the Conn may close it).
func echoSide(tb testing.TB, fd int, mode string) (send func([]byte) error, recv func([]byte) (int, error), closeFD func()) {
	if mode == "blocking" {
		runtime.LockOSThread()
		call := func(trap uintptr, b []byte) (int, error) {
			iov := unix.Iovec{Base: &b[0]}
			iov.SetLen(len(b))
			h := unix.Msghdr{Iov: &iov}
			h.SetIovlen(1)
			for {
				n, _, e := unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&h)), 0)
				if e == unix.EINTR {
					continue
				}
				if e != 0 {
					return 0, e
				}
				return int(n), nil
			}
		}
		return func(b []byte) error { _, err := call(unix.SYS_SENDMSG, b); return err },
			func(b []byte) (int, error) { return call(unix.SYS_RECVMSG, b) },
			func() { unix.Close(fd) }
	}
	if err := unix.SetNonblock(fd, false); err != nil { // blocking, as kernelSocket makes them
		tb.Fatal(err)
	}
	c := newConn(newKfd(fd))
	return func(b []byte) error { _, err := c.WriteMsg(b, nil, noAddr); return err },
		func(b []byte) (int, error) { n, _, _, _, err := c.ReadMsg(b, nil); return n, err },
		func() { c.Close() }
}

// TestRoundTripEchoProcess is BenchmarkRoundTripProcess's peer: it answers
// every message on fd 3 with itself, and "cpu" with its CPU time since the
// first message, in nanoseconds. Without the benchmark's environment it
// does nothing.
func TestRoundTripEchoProcess(t *testing.T) {
	mode := os.Getenv(echoEnv)
	if mode == "" {
		return
	}
	send, recv, _ := echoSide(t, 3, mode)
	buf := make([]byte, 64)
	var start int64
	for first := true; ; first = false {
		n, err := recv(buf)
		if err != nil || n == 0 {
			return // the benchmark closed its end
		}
		if first {
			start = processCPU()
		}
		if string(buf[:n]) == "cpu" {
			n = copy(buf, strconv.FormatInt(processCPU()-start, 10))
		}
		if err := send(buf[:n]); err != nil {
			fmt.Fprintln(os.Stderr, "echo:", err)
			os.Exit(1)
		}
	}
}
