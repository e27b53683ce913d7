//go:build linux

package rdssock

import (
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config.WaitInKernel: the socket is kept out of the runtime poller, and a
// call that must wait sleeps in ppoll(2) on its own thread, as a C program
// sleeps in poll or a blocking recvmsg.
//
// Why: the runtime poller registers every socket for read and write
// readiness, edge-triggered. RDS wakes a socket's waiters whenever the
// peer acknowledges sent messages (and on other events), and each such
// wake-up reports the socket writable again, so the poller's thread wakes,
// finds no goroutine to run, and sleeps again: for request/response that
// is one spurious wake-up of the process per message besides the real
// one. ppoll on POLLIN alone filters them in the kernel, as C's poll does.
//
// A waiting call polls the socket and an eventfd of its own. Close, a
// deadline change and the end of a waiting context (through the
// deadlineMux, whose set function is kfd.setDeadline here) write every
// waiter's eventfd, so the waiters look at their deadline again or return.

// kfd is a socket descriptor outside the runtime poller. It implements
// syscall.RawConn.
type kfd struct {
	fd int

	mu       sync.Mutex
	refs     int           // calls using fd
	closing  bool          // Close was called: no new calls
	drained  chan struct{} // closed by the last call out once closing
	rdl, wdl time.Time     // deadlines in force; zero: none
	waiting  map[*kwaiter]struct{}
	idle     []*kwaiter // eventfds of waiters gone, for reuse
}

// kwaiter is one waiting call's wake-up descriptor.
type kwaiter struct {
	efd int
}

// errKfdClosed is what calls on a closed kfd return (Conn.pollErr
// reports net.ErrClosed for any error once the Conn is closed).
var errKfdClosed = net.ErrClosed

// kernelWaiters counts the goroutines sleeping in ppoll (all Conns).
//
// A wait through the runtime's system-call path (Syscall) marks the P as
// in a system call, and sysmon takes such a P away after a tick when no
// other P is idle, so the goroutine comes back on another thread; in the
// emulated test VM that made a request/response loop with GOMAXPROCS=1
// four times dearer than C, and with two Ps still a thread migration and
// a sysmon wake-up per few messages. So a wait sleeps with RawSyscall,
// keeping its P like a goroutine that computes, as long as fewer
// goroutines wait so than there are Ps: at least one P stays free for the
// rest of the program. sysmon's preemption (after 10 ms) and a
// stop-the-world interrupt the sleep with a signal (ppoll returns EINTR,
// the goroutine yields at its next call and then waits again). Waiters
// beyond that wait through Syscall.
var kernelWaiters atomic.Int32

func newKfd(fd int) *kfd {
	return &kfd{fd: fd, waiting: make(map[*kwaiter]struct{})}
}

func (k *kfd) acquire() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return false
	}
	k.refs++
	return true
}

func (k *kfd) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.releaseLocked()
}

func (k *kfd) releaseLocked() {
	k.refs--
	if k.closing && k.refs == 0 && k.drained != nil {
		close(k.drained)
		k.drained = nil
	}
}

// Control implements syscall.RawConn.
func (k *kfd) Control(f func(fd uintptr)) error {
	if !k.acquire() {
		return errKfdClosed
	}
	f(uintptr(k.fd))
	k.release()
	return nil
}

// Read implements syscall.RawConn: f runs until it reports done, waiting
// for the socket to be readable between tries.
func (k *kfd) Read(f func(fd uintptr) bool) error { return k.wait(f, unix.POLLIN, false, true) }

// Write implements syscall.RawConn: f runs until it reports done, waiting
// for the socket to be writable between tries.
func (k *kfd) Write(f func(fd uintptr) bool) error { return k.wait(f, unix.POLLOUT, true, true) }

// readWaitFirst and writeWaitFirst are Read and Write for a caller whose
// own try just failed: they wait before the first try.
func (k *kfd) readWaitFirst(f func(fd uintptr) bool) error {
	return k.wait(f, unix.POLLIN, false, false)
}

func (k *kfd) writeWaitFirst(f func(fd uintptr) bool) error {
	return k.wait(f, unix.POLLOUT, true, false)
}

func (k *kfd) wait(f func(fd uintptr) bool, events int16, write, tryFirst bool) error {
	pause := 50 * time.Microsecond
	for try := tryFirst; ; try = true {
		if !k.acquire() {
			return errKfdClosed
		}
		if try && f(uintptr(k.fd)) {
			k.release()
			return nil
		}
		ev := events
		if write && writable(uintptr(k.fd)) {
			// The send failed with room in the send buffer: the
			// destination is congested (Config.WaitCongested). The
			// congestion monitor's notice makes the socket readable,
			// but so do messages queued for reading, which this call
			// does not take: after a wake-up that did not end the
			// congestion it pauses, from 50µs doubling up to 10ms.
			ev = unix.POLLIN
			if pause > 50*time.Microsecond {
				time.Sleep(pause)
			}
			pause = min(2*pause, 10*time.Millisecond)
		}
		w, timeout, err := k.enter(write)
		if err != nil {
			k.release()
			return err
		}
		pfd := [2]unix.PollFd{{Fd: int32(k.fd), Events: ev}, {Fd: int32(w.efd), Events: unix.POLLIN}}
		var ts *unix.Timespec
		if timeout >= 0 {
			t := unix.NsecToTimespec(int64(timeout))
			ts = &t
		}
		var e unix.Errno
		if n := kernelWaiters.Add(1); int(n) < runtime.GOMAXPROCS(0) {
			// The goroutine keeps its P while it sleeps (see
			// kernelWaiters).
			_, _, e = unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		} else {
			_, _, e = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		}
		kernelWaiters.Add(-1)
		if e == 0 && pfd[1].Revents&unix.POLLIN != 0 {
			var buf [8]byte
			unix.Read(w.efd, buf[:])
		}
		k.leave(w)
	}
}

// enter registers a waiter and returns how long it may sleep (negative:
// no limit), or the reason not to wait: the socket is closing or the
// deadline passed.
func (k *kfd) enter(write bool) (*kwaiter, time.Duration, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return nil, 0, errKfdClosed
	}
	dl := k.rdl
	if write {
		dl = k.wdl
	}
	timeout := time.Duration(-1)
	if !dl.IsZero() {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, 0, os.ErrDeadlineExceeded
		}
	}
	var w *kwaiter
	if n := len(k.idle); n > 0 {
		w, k.idle = k.idle[n-1], k.idle[:n-1]
	} else {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return nil, 0, os.NewSyscallError("eventfd", err)
		}
		w = &kwaiter{efd: efd}
	}
	k.waiting[w] = struct{}{}
	return w, timeout, nil
}

// leave unregisters a waiter and releases the call's reference (release
// and the unregistering under one lock: this runs after every sleep).
func (k *kfd) leave(w *kwaiter) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.waiting, w)
	k.idle = append(k.idle, w)
	k.releaseLocked()
}

// wakeLocked makes every waiter's ppoll return.
func (k *kfd) wakeLocked() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // an eventfd counts in host byte order
	for w := range k.waiting {
		unix.Write(w.efd, one[:])
	}
}

// setReadDeadline and setWriteDeadline are the deadlineMux set functions.
func (k *kfd) setReadDeadline(t time.Time) error  { return k.setDeadline(t, false) }
func (k *kfd) setWriteDeadline(t time.Time) error { return k.setDeadline(t, true) }

func (k *kfd) setDeadline(t time.Time, write bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return errKfdClosed
	}
	if write {
		k.wdl = t
	} else {
		k.rdl = t
	}
	k.wakeLocked()
	return nil
}

// close wakes every waiter, waits until no call uses the descriptor, and
// closes it.
func (k *kfd) close() error {
	k.mu.Lock()
	if k.closing {
		k.mu.Unlock()
		return errKfdClosed
	}
	k.closing = true
	k.wakeLocked()
	var drained chan struct{}
	if k.refs > 0 {
		drained = make(chan struct{})
		k.drained = drained
	}
	k.mu.Unlock()
	if drained != nil {
		<-drained
	}
	for _, w := range k.idle {
		unix.Close(w.efd)
	}
	k.idle = nil
	return unix.Close(k.fd)
}

// kernelSocket creates a non-blocking RDS socket that the runtime poller
// does not know, in network namespace netns if it is not 0.
func kernelSocket(netns int) (int, error) {
	open := func() (int, error) {
		return unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	}
	if netns == 0 {
		return open()
	}
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread enters netns; if it cannot return to its own
		// namespace it stays locked and ends with the goroutine.
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{-1, os.NewSyscallError("open /proc/thread-self/ns/net", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(netns, unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, os.NewSyscallError("setns", err)}
			return
		}
		fd, err := open()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			ch <- result{-1, os.NewSyscallError("setns back", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}
