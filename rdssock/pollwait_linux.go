//go:build linux

package rdssock

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Waiting in the runtime poller without registering the socket there (see
// kwait_linux.go for why): a kfd has up to two epoll instances of its own,
// one for parked reads and one for writes, each registered with the
// runtime poller. A parked call makes sure the socket is in its instance
// for the readiness it needs (EPOLLIN, EPOLLOUT) and lets go of it when it
// returns; the socket leaves the instance when the last call holding it
// has let go, so the socket's wake-ups reach the runtime only while
// somebody waits for them there. Calls parked on one instance take turns
// (the runtime serializes them by the instance's read lock), but one lets
// go after the next may have taken its turn, hence the count.
//
// With one P (GOMAXPROCS=1, where a wait parks whenever it may not
// sleep on the only P: see onlyPSlice) the read instance keeps the socket
// after the last parked read has let go, until a read next sleeps in
// ppoll (kfd.enter calls drop): a reader that parks wait after wait then
// adds and removes nothing, two epoll_ctl calls less per wait. A read that sleeps in ppoll takes the socket out first, so that
// the wake-ups a sleeping reader's socket gets (one per acknowledged
// message) do not also reach a thread in the runtime poller. With more Ps
// a parked read is the exception (kfd.wait), and the socket leaves the
// instance when it returns: kept there while the reader went on without
// sleeping, every wake-up of the socket woke a thread in the runtime
// poller for nothing (an RDMA READ sender over rxe, which rarely sleeps,
// went from 0.04 to 0.43 voluntary switches per operation).
//
// An instance holding the socket reports readiness to the runtime at every
// wake-up of the socket while the socket has what it was added for. For a
// write that is what a congested send needs: the congestion monitor's
// notice wakes the socket, with room in the send buffer (EPOLLOUT) all
// along, and the send is retried; a full send buffer makes it wait until
// acknowledgements free room.

// epollFile is an epoll instance registered with the runtime poller.
type epollFile struct {
	fd int
	f  *os.File
	rc syscall.RawConn

	// kept, if not nil, is set while the socket stays in the instance
	// with no parked call holding it (the read instance; see above).
	kept *atomic.Bool

	mu      sync.Mutex
	holders int  // parked calls that hold the socket in the instance
	in      bool // the socket is in the instance
}

// hold adds the socket sfd to the instance for events unless it is there.
func (e *epollFile) hold(sfd int, events uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.in {
		ev := unix.EpollEvent{Events: events, Fd: int32(sfd)}
		if err := unix.EpollCtl(e.fd, unix.EPOLL_CTL_ADD, sfd, &ev); err != nil {
			return os.NewSyscallError("epoll_ctl", err)
		}
		e.in = true
	}
	e.holders++
	return nil
}

// letGo removes the socket sfd from the instance when the last parked call
// holding it lets go, unless the instance keeps it (the read instance,
// with one P).
func (e *epollFile) letGo(sfd int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.holders--; e.holders > 0 {
		return
	}
	if e.kept != nil && procs() == 1 {
		e.kept.Store(true)
		return
	}
	e.removeLocked(sfd)
}

// drop removes the socket sfd from the instance unless a parked call holds
// it there.
func (e *epollFile) drop(sfd int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.holders == 0 {
		e.removeLocked(sfd)
	}
}

func (e *epollFile) removeLocked(sfd int) {
	if e.in {
		unix.EpollCtl(e.fd, unix.EPOLL_CTL_DEL, sfd, nil)
		e.in = false
	}
	if e.kept != nil {
		e.kept.Store(false)
	}
}

func newEpollFile() (*epollFile, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(fd), "rds-epoll") // non-blocking: the runtime poller takes it
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &epollFile{fd: fd, f: f, rc: rc}, nil
}

// epollFor returns the read or write epoll instance, creating it on first
// use with the deadline in force.
func (k *kfd) epollFor(write bool) (*epollFile, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return nil, errKfdClosed
	}
	p, dl := &k.er, k.rdl
	if write {
		p, dl = &k.ew, k.wdl
	}
	if *p == nil {
		e, err := newEpollFile()
		if err != nil {
			return nil, err
		}
		if !dl.IsZero() {
			e.f.SetReadDeadline(dl)
		}
		if !write {
			e.kept = &k.readKept
		}
		*p = e
	}
	return *p, nil
}

// parkedWait runs f until it reports done, parking in the runtime poller
// between tries. The first try runs inside the poller's loop, after it
// cleared its readiness, so that no wake-up between a caller's own try
// and the wait is lost.
func (k *kfd) parkedWait(f func(fd uintptr) bool, write bool) error {
	e, err := k.epollFor(write)
	if err != nil {
		return err
	}
	if !k.acquire() {
		return errKfdClosed
	}
	w := k.getWaiter()
	w.f, w.e = f, e
	idleWaiters.Add(1) // see yieldOnlyP
	if write {
		err = e.rc.Read(w.tryWrite) // an epoll instance is readable when ready
	} else {
		err = e.rc.Read(w.tryRead)
	}
	idleWaiters.Add(-1)
	if w.armed {
		// Through Control: Close may have closed the instance meanwhile
		// (and the socket left it with it).
		e.rc.Control(w.disarm)
		w.armed = false
	}
	if err == nil {
		err = w.err
	}
	w.f, w.e, w.err = nil, nil, nil
	k.putWaiter(w)
	if !write {
		k.parked.Store(int64(time.Since(monoBase))) // see parkDue
	}
	return err
}

func (k *kfd) getWaiter() *kwaiter {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.idleWaiterLocked()
}

// idleWaiterLocked takes a waiter from the pool or makes one (without an
// eventfd: a sleep in ppoll adds one).
func (k *kfd) idleWaiterLocked() *kwaiter {
	if n := len(k.idle); n > 0 {
		w := k.idle[n-1]
		k.idle = k.idle[:n-1]
		return w
	}
	w := &kwaiter{efd: -1, k: k}
	w.tryRead, w.tryWrite, w.disarm = w.doRead, w.doWrite, w.doDisarm
	return w
}

// putWaiter returns w to the pool and releases the call's reference.
func (k *kfd) putWaiter(w *kwaiter) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.idle = append(k.idle, w)
	k.release()
}

func (w *kwaiter) doRead(uintptr) bool  { return w.try(unix.EPOLLIN) }
func (w *kwaiter) doDisarm(uintptr)     { w.e.letGo(w.k.fd) }
func (w *kwaiter) doWrite(uintptr) bool { return w.try(unix.EPOLLOUT) }

// try runs the call's function on the socket; if it is not done, it makes
// sure the socket is in the epoll instance for events. If that fails, it
// reports done with w.err set.
func (w *kwaiter) try(events uint32) bool {
	fd := w.k.fd
	if w.f(uintptr(fd)) {
		return true
	}
	if !w.armed {
		if err := w.e.hold(fd, events); err != nil {
			w.err = err
			return true
		}
		w.armed = true
	}
	return false
}
