//go:build linux

package rdssock

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// instrModes are the reads integration/cmd/rdsinstr counts.
var instrModes = []string{"nil", "background", "cancel", "timeout", "batch", "floor"}

// TestInstrReadWait is the Go side of integration/cmd/rdsinstr, which runs
// it under callgrind to count the instructions a read that waits costs:
// with RDSINSTR_N set it reads that many 64-byte messages from fd 3 (one
// end of a SOCK_SEQPACKET pair whose other end a paced sender holds) in
// the way RDSINSTR_MODE names (see readWaiting); a non-empty
// RDSINSTR_NOPARK keeps every wait in ppoll (no park in the runtime
// poller every parkWall). Run plainly, it checks every mode the same way
// over a pair of its own, fed by a paced goroutine.
func TestInstrReadWait(t *testing.T) {
	if n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N")); n > 0 {
		if os.Getenv("RDSINSTR_NOPARK") != "" {
			parkWall = time.Hour
		}
		readWaiting(t, 3, os.Getenv("RDSINSTR_MODE"), n)
		return
	}
	const n = 20
	for _, mode := range instrModes {
		t.Run(mode, func(t *testing.T) {
			fd, sent := pacedPair(t, n)
			readWaiting(t, fd, mode, n)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// readWaiting reads n 64-byte messages from fd, which it closes: with
// ReadMsg (mode nil), ReadMsgContext with a background, cancelable or
// timeout context, or raw system calls (floor).
func readWaiting(t *testing.T, fd int, mode string, n int) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil { // blocking, as kernelSocket makes them
		t.Fatalf("fd %d: %v", fd, err)
	}
	c := newConn(newKfd(fd))
	defer c.Close()
	var ctx context.Context
	cancel := context.CancelFunc(func() {})
	switch mode {
	case "nil":
	case "background":
		ctx = context.Background()
	case "cancel":
		ctx, cancel = context.WithCancel(context.Background())
	case "timeout":
		ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	case "batch":
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		readBatchWaiting(t, ctx, c, n)
		return
	case "floor":
		rawReadLoop(t, fd, n)
		return
	default:
		t.Fatalf("mode %q: want one of %q", mode, instrModes)
	}
	defer cancel()
	buf := make([]byte, 128)
	for i := range n {
		var got int
		var err error
		if ctx == nil {
			got, _, _, _, err = c.ReadMsg(buf, nil)
		} else {
			got, _, _, _, err = c.ReadMsgContext(ctx, buf, nil, 0)
		}
		if err != nil || got != 64 {
			t.Fatalf("%s: message %d of %d: %d bytes, %v", mode, i, n, got, err)
		}
	}
}

// readBatchWaiting reads n 64-byte messages from c with ReadBatch, up to
// 16 a call, with a cancelable context.
func readBatchWaiting(t *testing.T, ctx context.Context, c *Conn, n int) {
	t.Helper()
	ms := make([]Message, 16)
	for i := range ms {
		ms[i].Buffer = make([]byte, 128)
	}
	for got := 0; got < n; {
		k, err := c.ReadBatch(ctx, ms[:min(len(ms), n-got)], 0)
		if err != nil {
			t.Fatalf("batch: message %d of %d: %v", got, n, err)
		}
		for i := range ms[:k] {
			if ms[i].N != 64 {
				t.Fatalf("batch: message %d of %d: %d bytes", got+i, n, ms[i].N)
			}
		}
		got += k
	}
}

// rawReadLoop is the floor a Go receiver could reach: the C loop's system
// calls (ppoll, then recvmsg until EAGAIN) as raw system calls, with none
// of rdssock's bookkeeping (no deadlines, contexts, Close or parking).
func rawReadLoop(t *testing.T, fd, n int) {
	var buf [128]byte
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	var hdr unix.Msghdr
	hdr.Iov = &iov
	hdr.SetIovlen(1)
	for got := 0; got < n; {
		pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(10 * time.Second))
		unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		for got < n {
			r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdr)), unix.MSG_DONTWAIT)
			if e == unix.EAGAIN || e == unix.EINTR {
				break
			}
			if e != 0 || r != 64 {
				t.Fatalf("message %d of %d: %d bytes, %v", got, n, r, e)
			}
			got++
		}
	}
}

// TestInstrWrite is the Go side of rdsinstr's counts of a send: with
// RDSINSTR_N set it sends that many 64-byte messages on fd 3, one every
// RDSINSTR_USEC microseconds (a C receiver drains the other end, so no
// send waits), with WriteMsg (RDSINSTR_MODE write) or WriteMsgContext and a
// cancelable context (writecancel). Run plainly, it checks both over a pair
// of its own.
func TestInstrWrite(t *testing.T) {
	if n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N")); n > 0 {
		usec, _ := strconv.Atoi(os.Getenv("RDSINSTR_USEC"))
		writePaced(t, 3, os.Getenv("RDSINSTR_MODE"), n, time.Duration(usec)*time.Microsecond)
		return
	}
	const n = 20
	for _, mode := range []string{"write", "writecancel"} {
		t.Run(mode, func(t *testing.T) {
			fds := instrPair(t)
			got := make(chan error, 1)
			go func() {
				buf := make([]byte, 128)
				for i := range n {
					if k, err := unix.Read(fds[1], buf); err != nil || k != 64 {
						got <- fmt.Errorf("message %d of %d: %d bytes, %v", i, n, k, err)
						return
					}
				}
				got <- nil
			}()
			writePaced(t, fds[0], mode, n, 100*time.Microsecond)
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// writePaced sends n 64-byte messages on fd, which it closes, one every
// pace.
func writePaced(t *testing.T, fd int, mode string, n int, pace time.Duration) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil { // blocking, as kernelSocket makes them
		t.Fatalf("fd %d: %v", fd, err)
	}
	c := newConn(newKfd(fd))
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msg := make([]byte, 64)
	for i := range n {
		time.Sleep(pace)
		var err error
		switch mode {
		case "write":
			_, err = c.WriteMsg(msg, nil, netip.AddrPort{})
		case "writecancel":
			_, err = c.WriteMsgContext(ctx, msg, nil, netip.AddrPort{}, 0)
		default:
			t.Fatalf("mode %q: want write or writecancel", mode)
		}
		if err != nil {
			t.Fatalf("%s: message %d of %d: %v", mode, i, n, err)
		}
	}
}

// instrPair returns a blocking AF_UNIX SOCK_SEQPACKET pair, as rdsinstr
// makes: the test hands fds[0] to the counted side, which closes it, and
// the pair's other end is closed when the test ends.
// pacedPair returns one end of an instrPair whose other end a goroutine
// writes n 64-byte messages to, slowly enough that a reader waits for
// each; sent reports how that went once it is done.
func pacedPair(t *testing.T, n int) (fd int, sent <-chan error) {
	fds := instrPair(t)
	done := make(chan error, 1)
	go func() {
		msg := make([]byte, 64)
		for range n {
			time.Sleep(300 * time.Microsecond) // the reader waits for each
			if _, err := unix.Write(fds[1], msg); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return fds[0], done
}

func instrPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	return fds
}
