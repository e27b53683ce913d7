//go:build linux

package rdssock

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestInstrReadWait is the Go side of integration/cmd/rdsinstr, which runs
// it under callgrind to count the instructions a read that waits costs. It
// skips unless RDSINSTR_N is set; then it reads RDSINSTR_N messages from
// fd 3 (one end of a SOCK_SEQPACKET pair whose other end a paced sender
// holds) with ReadMsg (RDSINSTR_MODE nil) or ReadMsgContext with a
// background, cancelable or timeout context, or with raw system calls
// (floor). A non-empty RDSINSTR_NOPARK keeps every wait in ppoll (no
// park in the runtime poller every parkEvery).
func TestInstrReadWait(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N"))
	if n <= 0 {
		t.Skip("run by integration/cmd/rdsinstr")
	}
	if os.Getenv("RDSINSTR_NOPARK") != "" {
		parkEvery = time.Hour
	}
	if err := unix.SetNonblock(3, true); err != nil {
		t.Fatalf("fd 3: %v", err)
	}
	c := newConn(newKfd(3))
	defer c.Close()
	var ctx context.Context
	cancel := context.CancelFunc(func() {})
	switch m := os.Getenv("RDSINSTR_MODE"); m {
	case "nil":
	case "background":
		ctx = context.Background()
	case "cancel":
		ctx, cancel = context.WithCancel(context.Background())
	case "timeout":
		ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	case "floor":
		rawReadLoop(t, n)
		return
	default:
		t.Fatalf("RDSINSTR_MODE %q: want nil, background, cancel, timeout or floor", m)
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
			t.Fatalf("message %d of %d: %d bytes, %v", i, n, got, err)
		}
	}
}

// rawReadLoop is the floor a Go receiver could reach: the C loop's system
// calls (ppoll, then recvmsg until EAGAIN) as raw system calls, with none
// of rdssock's bookkeeping (no deadlines, contexts, Close or parking).
func rawReadLoop(t *testing.T, n int) {
	var buf [128]byte
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	var hdr unix.Msghdr
	hdr.Iov = &iov
	hdr.SetIovlen(1)
	for got := 0; got < n; {
		pfd := [1]unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(10 * time.Second))
		unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		for got < n {
			r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, 3, uintptr(unsafe.Pointer(&hdr)), unix.MSG_DONTWAIT)
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
