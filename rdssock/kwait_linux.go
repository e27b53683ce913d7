//go:build linux

package rdssock

import (
	"context"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A receive that finds no message waits in the kernel, in ppoll(2) on the
// socket, the way a C program's blocking recvmsg or poll loop does: the
// thread sleeps until the socket is readable and wakes straight into the
// goroutine that waits. Waiting in the runtime poller instead parks the
// goroutine, and its wake-up passes through the poller thread and the
// scheduler (a futex wake, a netpoll, a search for work), which costs more
// CPU time per message than the receive itself (see BENCHMARKS.md). The
// goroutine's thread stays in the system call while it waits; the runtime
// hands the goroutine's P to other goroutines, and the garbage collector
// does not wait for it. Config.PollerWait keeps every wait in the poller.
//
// ppoll cannot watch a deadline set later or a Close, so each waiting call
// also polls an eventfd of its own, which SetReadDeadline, SetDeadline and
// Close write to wake it; it then looks again at the deadline and at
// whether the socket was closed. Eventfds are kept for reuse while the
// socket is open, so a wait allocates nothing and opens nothing after the
// first.
//
// Sends keep waiting in the poller: a full send buffer is rare in RDS
// (sends fail with ENOBUFS instead), and a wait for congestion to clear is
// woken by a congestion notice, which ppoll's level-triggered POLLOUT
// cannot tell from a writable socket.

// kernelWaits is a socket's state for waits in the kernel.
type kernelWaits struct {
	mu      sync.Mutex
	closed  bool
	waiting []*kernelWaiter // in ppoll now, or about to be
	free    []*kernelWaiter // idle, with their eventfds open
}

// kernelWaiter is one waiting call's wake-up channel.
type kernelWaiter struct {
	efd   int
	woken bool // an eventfd write is pending: read it before reuse
}

// register returns a waiter that wake and close will wake, or
// net.ErrClosed once the socket is closed.
func (k *kernelWaits) register() (*kernelWaiter, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, net.ErrClosed
	}
	var w *kernelWaiter
	if n := len(k.free); n > 0 {
		w = k.free[n-1]
		k.free = k.free[:n-1]
	} else {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return nil, os.NewSyscallError("eventfd", err)
		}
		w = &kernelWaiter{efd: fd}
	}
	k.waiting = append(k.waiting, w)
	return w, nil
}

// unregister ends w's wait. Its eventfd goes back for reuse, emptied if it
// was written, or is closed if the socket was.
func (k *kernelWaits) unregister(w *kernelWaiter) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, x := range k.waiting {
		if x == w {
			last := len(k.waiting) - 1
			k.waiting[i] = k.waiting[last]
			k.waiting[last] = nil
			k.waiting = k.waiting[:last]
			break
		}
	}
	if k.closed {
		unix.Close(w.efd)
		return
	}
	if w.woken {
		var b [8]byte
		unix.Read(w.efd, b[:])
		w.woken = false
	}
	k.free = append(k.free, w)
}

// rearm empties w's eventfd after a wake-up, so that w can wait again; it
// reports false if the socket was closed.
func (k *kernelWaits) rearm(w *kernelWaiter) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	if w.woken {
		var b [8]byte
		unix.Read(w.efd, b[:])
		w.woken = false
	}
	return true
}

// wake wakes every waiting call, to look again at its deadline.
func (k *kernelWaits) wake() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.wakeLocked()
}

func (k *kernelWaits) wakeLocked() {
	one := [8]byte{1}
	for _, w := range k.waiting {
		if !w.woken {
			unix.Write(w.efd, one[:])
			w.woken = true
		}
	}
}

// close wakes every waiting call for good and closes the idle eventfds;
// those of waiting calls are closed as the calls leave.
func (k *kernelWaits) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	k.wakeLocked()
	for _, w := range k.free {
		unix.Close(w.efd)
	}
	k.free = nil
}

// runKernelWait is opWait's Control callback for a wait in the kernel.
func (o *opWait) runKernelWait(fd uintptr) {
	o.kerr = o.conn.kernelWait(fd, o)
}

// waitInKernel runs ow's receive until it reports done, waiting in ppoll
// between tries, until the read deadline passes, ctx ends (ctx may be nil)
// or the socket is closed.
func (c *Conn) waitInKernel(ctx context.Context, ow *opWait) error {
	if ctx != nil && ctx.Done() == nil {
		ctx = nil // never ends
	}
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	ow.conn, ow.kctx, ow.kerr = c, ctx, nil
	err := c.rc.Control(ow.kernelRun)
	ow.conn, ow.kctx = nil, nil
	if err != nil {
		return err
	}
	return ow.kerr
}

func (c *Conn) kernelWait(fd uintptr, ow *opWait) error {
	f, ctx := ow.f, ow.kctx
	if f(fd) {
		return nil
	}
	if ctx != nil {
		// The read mux watches ctx and wakes the kernel's waiters when
		// it ends (deadlineMux.wake).
		if err := c.readDeadline.add(&ow.w, ctx); err != nil {
			c.readDeadline.remove(&ow.w)
			return err
		}
		defer c.readDeadline.remove(&ow.w)
	}
	// Registered before the deadline and Close are checked: a deadline
	// set or a Close from then on writes w's eventfd, and ppoll returns
	// at once. A message that arrived since f's try is seen by ppoll.
	w, err := c.kw.register()
	if err != nil {
		return err
	}
	defer c.kw.unregister(w)
	pfd := [2]unix.PollFd{
		{Fd: int32(fd), Events: unix.POLLIN},
		{Fd: int32(w.efd), Events: unix.POLLIN},
	}
	for {
		if ctx != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		var ts unix.Timespec
		tsp := uintptr(0)
		dl := c.readDeadline.userDeadline()
		if ctx != nil && !ow.w.deadline.IsZero() && (dl.IsZero() || ow.w.deadline.Before(dl)) {
			dl = ow.w.deadline
		}
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				if dl.Equal(ow.w.deadline) && ctx != nil {
					<-ctx.Done() // its timer may fire a moment later
					return ctx.Err()
				}
				return os.ErrDeadlineExceeded
			}
			ts = unix.NsecToTimespec(int64(d))
			tsp = uintptr(unsafe.Pointer(&ts))
		}
		pfd[0].Revents, pfd[1].Revents = 0, 0
		_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, tsp, 0, 0, 0)
		if e != 0 && e != unix.EINTR {
			return os.NewSyscallError("ppoll", e)
		}
		if pfd[1].Revents != 0 && !c.kw.rearm(w) {
			return net.ErrClosed
		}
		if pfd[0].Revents != 0 && f(fd) {
			return nil
		}
	}
}
