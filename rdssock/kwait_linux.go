//go:build linux

package rdssock

import (
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How a Conn waits. The socket is kept out of the runtime poller, and a
// read that must wait first sleeps in the kernel on its own thread, keeping
// its P: the socket's solo read in recvmsg (recvmmsg for a batch) itself,
// as a C program's blocking read (kfd.blockRecv), other reads in ppoll(2),
// as a C program sleeps in poll. For a goroutine that reads message after
// message (request/response, a receive loop) that costs far less CPU time
// per message than a wake-up through the runtime poller (measured in the
// test VM: see BENCHMARKS.md). The read that takes the last free P sleeps
// there only briefly (see kernelWaiters). A write that finds no room in
// the send buffer sleeps in ppoll for POLLOUT the same way (kfd.writeWait).
// A read or write still waiting after its sleep parks the goroutine in the
// runtime poller instead (pollwait_linux.go), so idle goroutines hold
// neither a thread nor a P.
//
// Why the socket stays out of the runtime poller: it would register the
// socket for read and write readiness, edge-triggered, and RDS wakes a
// socket's waiters whenever the peer acknowledges sent messages, each
// wake-up reporting the socket writable again, so the poller's thread
// would wake for nothing once per message while a read sleeps in ppoll.
//
// A read sleeping in ppoll polls the socket and an eventfd of its own.
// Close, a deadline change and the end of a waiting context (through the
// deadlineMux, whose set function is kfd.setDeadline here) write every
// such eventfd, so the sleepers look at their deadline again or return.

// kernelSlice is how long a read sleeps in ppoll, keeping its P, before it
// parks in the runtime poller: the runtime's own time slice (sysmon
// preempts a goroutine that has run for 10ms), so a sleeping reader holds
// a P no longer than a computing goroutine may. In the emulated test VM,
// where RDS/TCP round trips take 0.2-0.6 ms but a vCPU can stall for
// milliseconds, 2 ms parked often enough to cost 14% of a request/response
// rate; 10 ms matched a reader that never parks. A variable for the tests.
var kernelSlice = 10 * time.Millisecond

// kfd is a socket descriptor outside the runtime poller. It implements
// syscall.RawConn.
type kfd struct {
	fd int

	// refs counts the calls using fd, plus kfdClosing once Close was
	// called: no new calls then. Calls take and drop their reference with
	// one atomic add each; the last one out after Close signals drained.
	refs    atomic.Int64
	drained chan struct{}

	mu       sync.Mutex
	closing  bool       // Close was called (under mu, for the sleepers)
	rdl, wdl time.Time  // deadlines in force; zero: none
	waiting  []*kwaiter // sleeping in ppoll; a few at most, so a slice
	idle     []*kwaiter // waiters gone, for reuse
	er, ew   *epollFile // epoll instances for parked reads and writes, once used

	// readKept is set while the socket stays in er with no parked read
	// holding it; a read about to sleep in ppoll takes it out then.
	readKept atomic.Bool

	// parked is when a read of the socket last came back from a park in
	// the runtime poller (since monoBase), or when the socket was made:
	// see parkDue.
	parked atomic.Int64

	// The solo waiter: the eventfd of the read that holds soloBusy, which
	// sleeps in ppoll without taking mu or joining waiting (see
	// kfd.soloSleep). soloEfd is -1 until the first such read; it is set
	// under mu. rdlSet and rdlMono tell it the read deadline: whether one
	// is set, and when, on the monotonic clock (since monoBase).
	soloBusy  atomic.Bool
	soloEfd   int
	soloCalls uint32 // the solo read's rounds, for its reading of GOMAXPROCS
	rdlSet    atomic.Bool
	rdlMono   atomic.Int64

	// A solo read sleeping in recvmsg itself (kfd.blockRecv): blockTid
	// is its thread (0: none). wakeNB is set, under mu, while O_NONBLOCK
	// is set on the descriptor to wake such a read; stayNB once the
	// descriptor is non-blocking for good (I/O through the RawConn, or
	// someone else set O_NONBLOCK): reads then sleep in ppoll only.
	// rcvTimeo tells whether SO_RCVTIMEO is set (solo read only).
	blockTid atomic.Int32
	wakeNB   atomic.Bool
	stayNB   atomic.Bool
	rcvTimeo bool

	// onlyPSkip counts down the reads that park at once after a sleep on
	// the only P found no message (see onlyPSlice).
	onlyPSkip atomic.Int32

	// waits counts the socket's last reads that had to wait for their
	// message, in a row; from skipAfter on it goes round probeEvery
	// values (see Conn.recvWait).
	waits atomic.Int32
}

// kwaiter is one waiting call's state: the eventfd that wakes its ppoll,
// or what its callbacks need while it is parked in the runtime poller.
// Waiters are pooled per kfd, so a wait allocates nothing.
type kwaiter struct {
	efd int // -1 until the waiter first sleeps in ppoll

	k                 *kfd
	f                 func(fd uintptr) bool
	tryRead, tryWrite func(uintptr) bool // bound to doRead and doWrite
	disarm            func(uintptr)      // bound to doDisarm
	e                 *epollFile         // the epoll instance it parks on
	armed             bool               // it holds the socket in that instance
	err               error
}

// errKfdClosed is what calls on a closed kfd return (Conn.pollErr
// reports net.ErrClosed for any error once the Conn is closed).
var errKfdClosed = net.ErrClosed

// kernelWaiters counts the goroutines sleeping in ppoll (all Conns).
//
// A sleep through the runtime's system-call path (Syscall) marks the P as
// in a system call, and sysmon takes such a P away after a tick when no
// other P is idle, so the goroutine comes back on another thread; in the
// emulated test VM that made a request/response loop with GOMAXPROCS=1
// four times dearer than C, and with two Ps still a thread migration and
// a sysmon wake-up per few messages. So a read sleeps with RawSyscall,
// keeping its P like a goroutine that computes. Parking in the runtime
// poller instead costs more again (in the VM about 20 us of CPU time per
// wait, against 2-4 us in ppoll), so readers sleep in ppoll on every P,
// but the one that takes the last free P sleeps lastPSlice at most and
// then parks, so that goroutines that become runnable meanwhile wait for
// a P no longer than that. With GOMAXPROCS=1 (a process bound to one CPU,
// or a container limited to one) the only P sleeps too, briefly, after
// it let every runnable goroutine run (see onlyPSlice). A
// goroutine holds a P to call ppoll, so there are never more sleepers
// than Ps. sysmon's
// preemption (after 10 ms) and a stop-the-world interrupt the sleep with
// a signal (ppoll returns EINTR, the goroutine yields at its next call and
// then waits again).
//
// A goroutine that sleeps in ppoll wait after wait never passes through
// the scheduler, so sysmon takes it for one that has computed for 10 ms
// and preempts it, and a goroutine made runnable on its P meanwhile waits
// for that. So reads of a socket park in the runtime poller instead about
// every 8 ms (kfd.parkDue): one wake-up through the poller every few
// milliseconds. In the test VM parking every 4 ms of sleep took the rdscat
// ends of request/response over RDS/IB (rr ib 1x4) from 1.31-1.40 times
// C's CPU time per request to 1.03-1.12 (6 trials each way); the other
// tools rows moved within their noise.
var kernelWaiters atomic.Int32

// lastPSlice is how long the read holding the last free P sleeps in ppoll
// before it parks and lets runnable goroutines have the P. A
// request/response round trip in the test VM takes 70-400 us, so most
// waits of two goroutines answering each other on two Ps end within it.
const lastPSlice = 250 * time.Microsecond

// onlyPSlice is how long a read or write sleeps in the kernel holding the
// only P (GOMAXPROCS=1) before it parks in the runtime poller. Such a
// sleep stops the program the way a goroutine that computes does, but
// with the CPU idle, so each one is preceded by runtime.Gosched: the
// goroutines runnable at that moment run first, and only those that
// become runnable during the sleep (a timer, the runtime poller) wait.
// The solo read sleeps in recvmsg (blockSlice, which equals onlyPSlice),
// whose timeout the kernel rounds up to its timer tick, so they may wait
// that long (3.5-8 ms measured, against the runtime's own 10 ms slice);
// other reads and writes sleep in ppoll, for onlyPSlice. A read of a
// socket whose sleep on the only P ended without a message parks at once
// for its next onlyPSkips waits (kfd.onlyPSkip), so that a lull costs one
// such sleep per onlyPSkips+1 waits, not one per wait. Parking at once,
// as every wait with one P did before, cost more: on the development
// host BenchmarkRoundTripProcess under taskset -c 0 took 9.5-12.2 µs of
// client CPU per round trip that way, 7.2-9.1 sleeping in recvmsg (six
// runs each), and 12.3-13.2 sleeping in ppoll, whose system call more
// and the yield cost more than the park saved (three runs).
const onlyPSlice = time.Millisecond

// onlyPSkips is how many waits of a socket's reads park at once after a
// read's sleep on the only P ended without a message (see onlyPSlice).
const onlyPSkips = 16

// sleepInKernel reports whether a read may sleep in ppoll: as the n-th
// goroutine doing so, with procs Ps, and rest left of its kernelSlice.
func sleepInKernel(n int32, procs int, rest time.Duration) bool {
	return rest > 0 && int(n) <= procs
}

// sleepFor returns how long the n-th sleeper in ppoll, with procs Ps, rest
// left of its kernelSlice and until (negative: no limit) before its
// deadline, sleeps, and whether it holds the last free P.
func sleepFor(n int32, procs int, rest, until time.Duration) (time.Duration, bool) {
	d := rest
	if until >= 0 && until < d {
		d = until
	}
	lastP := int(n) >= procs
	switch {
	case procs == 1:
		d = min(d, onlyPSlice)
	case lastP:
		d = min(d, lastPSlice)
	}
	return d, lastP
}

// yieldOnlyP lets the goroutines runnable now run before a sleep that
// keeps the only P (see onlyPSlice), and reports whether the sleep may
// go ahead: not while another wait of the package is parked in the
// runtime poller or yielding too (idleWaiters), since with one P its
// goroutine could not run before the sleep ended, and a goroutine of the
// same program may well be what answers (request/response between two
// goroutines, a sender waiting for room that the reader makes). With
// more Ps it does nothing and reports true.
func yieldOnlyP(procs int) bool {
	return procs != 1 || yieldTheOnlyP() // the test inline, the rest not
}

func yieldTheOnlyP() bool {
	idleWaiters.Add(1)
	runtime.Gosched()
	return idleWaiters.Add(-1) == 0
}

// idleWaiters counts the package's waits (all Conns) that are parked in
// the runtime poller or yielding the only P (yieldOnlyP).
var idleWaiters atomic.Int32

// skipOnlyP reports whether a read should park at once rather than sleep
// on the only P, because a recent sleep there ended without a message
// (see onlyPSlice); it counts the skip.
func (k *kfd) skipOnlyP(procs int) bool {
	if procs != 1 || k.onlyPSkip.Load() <= 0 {
		return false
	}
	k.onlyPSkip.Add(-1)
	return true
}

// missedOnlyP notes that a read's sleep on the only P ended without a
// message: the socket's next onlyPSkips reads park at once.
func (k *kfd) missedOnlyP(procs int) {
	if procs == 1 {
		k.onlyPSkip.Store(onlyPSkips)
	}
}

// procs returns GOMAXPROCS as read at most procsEvery calls ago: the
// runtime reads it under its scheduler lock, which costs more than the
// rest of a wait's bookkeeping, and it rarely changes.
func procs() int {
	if procsCalls.Add(1)%procsEvery == 1 {
		readProcs()
	}
	return int(procsSeen.Load())
}

// readProcs reads GOMAXPROCS into procsSeen.
func readProcs() { procsSeen.Store(int32(runtime.GOMAXPROCS(0))) }

const procsEvery = 256

var (
	procsCalls atomic.Uint32
	procsSeen  atomic.Int32
)

// kfdClosing is the bit of kfd.refs that Close sets.
const kfdClosing int64 = 1 << 62

func newKfd(fd int) *kfd {
	k := &kfd{fd: fd, drained: make(chan struct{}, 1), soloEfd: -1}
	k.parked.Store(int64(time.Since(monoBase)))
	return k
}

// acquire takes a reference for a call, unless Close was called.
func (k *kfd) acquire() bool {
	if k.refs.Add(1)&kfdClosing != 0 {
		k.release()
		return false
	}
	return true
}

// release drops a call's reference. The count reaches kfdClosing alone
// only after Close, when no call uses fd any more (a refused acquire may
// get there too, with no call in: Close then waits for nobody).
func (k *kfd) release() {
	if k.refs.Add(-1) == kfdClosing {
		select {
		case k.drained <- struct{}{}:
		default:
		}
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
// for the socket to be readable between tries. The descriptor is made
// non-blocking for good first, as f expects.
func (k *kfd) Read(f func(fd uintptr) bool) error {
	if err := k.keepNonblocking(); err != nil {
		return err
	}
	return k.wait(f, false, true)
}

// Write implements syscall.RawConn: f runs until it reports done, waiting
// for the socket to be writable between tries. The descriptor is made
// non-blocking for good first, as f expects.
func (k *kfd) Write(f func(fd uintptr) bool) error {
	if err := k.keepNonblocking(); err != nil {
		return err
	}
	return k.wait(f, true, true)
}

// keepNonblocking sets O_NONBLOCK on the descriptor for the rest of its
// life, for callers of the RawConn's Read and Write, whose functions
// expect a non-blocking socket. The library's own reads then sleep in
// ppoll only (see kfd.blockRecv).
func (k *kfd) keepNonblocking() error {
	if k.stayNB.Load() {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return errKfdClosed
	}
	if err := unix.SetNonblock(k.fd, true); err != nil {
		return os.NewSyscallError("fcntl", err)
	}
	k.stayNB.Store(true)
	k.wakeNB.Store(false) // no wake-up to undo: the flag stays
	return nil
}

func (k *kfd) wait(f func(fd uintptr) bool, write, tryFirst bool) error {
	if write {
		// Most writes find room at once, so they try before going
		// near a wait.
		if tryFirst {
			if !k.acquire() {
				return errKfdClosed
			}
			done := f(uintptr(k.fd))
			k.release()
			if done {
				return nil
			}
		}
		return k.writeWait(f)
	}
	if k.soloBusy.CompareAndSwap(false, true) {
		done, park, err := true, false, errKfdClosed
		if k.acquire() {
			done, park, err = k.soloSleep(nil, nil, f, tryFirst, -1)
			k.release()
		}
		k.soloBusy.Store(false)
		switch {
		case park:
			return k.parkedWait(f, false)
		case done:
			return err
		}
		tryFirst = true
	}
	rest := kernelSlice // of the sleeping time this call may spend in ppoll
	for try := tryFirst; ; try = true {
		if !k.acquire() {
			return errKfdClosed
		}
		if try && f(uintptr(k.fd)) {
			k.release()
			return nil
		}
		w, timeout, lastP, park, err := k.sleeper(false, rest)
		switch {
		case park:
			return k.parkedWait(f, false)
		case err != nil:
			return err
		}
		ready, e, slept := k.sleep(w.efd, timeout)
		kernelWaiters.Add(-1)
		rest -= slept
		k.leave(w)
		if lastP && e == 0 && ready == 0 {
			// Nothing came in the short sleep on the last free P:
			// give the P back to the program.
			k.missedOnlyP(procs())
			return k.parkedWait(f, false)
		}
	}
}

// writeWait waits for room in the send buffer, then runs f until it
// reports done. Like a read, it sleeps in ppoll (for POLLOUT), keeping its
// P, as a C sender sleeps in poll, where it used to park in the runtime
// poller: a sender that keeps the send buffer full (a stream of messages)
// waits for room every few messages. In the test VM, rdscat's oneway
// RDS/TCP sender of 4 KiB messages, which waits for 0.05-0.25 of its
// messages, spent less CPU time per message this way than parked in 16 of 21
// paired rounds over two runs (medians of the pairs 0.82-0.93), and sent
// at 1.09 the rate (median; 6 of 8). Its counts of system calls and
// context switches per message did not fall with it, so where the saving
// comes from is not known (-perfstat counts); the oneway 64-byte
// sender, which waits for 1-2% of its messages, did not tell either way.
// A write that finds the socket writable and still cannot send waits
// for something else (a congested destination, whose monitor's notice
// wakes the socket, with room in the send buffer all along): it parks, as
// does one that may not keep its P (see kernelWaiters) or has slept
// kernelSlice.
func (k *kfd) writeWait(f func(fd uintptr) bool) error {
	rest := kernelSlice
	for {
		if !k.acquire() {
			return errKfdClosed
		}
		w, timeout, lastP, park, err := k.sleeper(true, rest)
		switch {
		case park:
			return k.parkedWait(f, true)
		case err != nil:
			return err
		}
		ready, e, slept, room := k.pollOut(w.efd, timeout)
		kernelWaiters.Add(-1)
		rest -= slept
		k.leave(w) // releases the reference
		if e == 0 && ready == 0 && lastP {
			return k.parkedWait(f, true) // as a read's wait does
		}
		if !k.acquire() {
			return errKfdClosed
		}
		done := f(uintptr(k.fd))
		k.release()
		if done {
			return nil
		}
		if room {
			return k.parkedWait(f, true)
		}
	}
}

// sleeper counts a read or write that holds a reference among the
// sleepers in ppoll (kernelWaiters) and registers it (enter), with rest
// left of its kernelSlice. It returns the waiter, how long to sleep and
// whether on the last free P; or that the call parks in the runtime poller
// instead (a read also when parkDue says so), or an error, either way with
// the count and the reference dropped.
func (k *kfd) sleeper(write bool, rest time.Duration) (w *kwaiter, d time.Duration, lastP, park bool, err error) {
	p := procs()
	if !write && k.skipOnlyP(p) {
		k.release()
		return nil, 0, false, true, nil
	}
	if !yieldOnlyP(p) {
		k.release()
		return nil, 0, false, true, nil
	}
	n := kernelWaiters.Add(1)
	if !write {
		_, left := k.parkDue(int64(time.Since(monoBase)))
		rest = min(rest, left) // 0 when a park is due: it parks below
	}
	if !sleepInKernel(n, p, rest) {
		kernelWaiters.Add(-1)
		k.release()
		return nil, 0, false, true, nil
	}
	w, timeout, err := k.enter(write)
	if err != nil {
		kernelWaiters.Add(-1)
		k.release()
		return nil, 0, false, false, err
	}
	d, lastP = sleepFor(n, p, rest, timeout)
	return w, d, lastP, false, nil
}

// pollOut sleeps in ppoll until the socket is writable, efd is written,
// or timeout passes, keeping the P; room reports that the socket polled
// writable. It clears efd if it was written.
func (k *kfd) pollOut(efd int, timeout time.Duration) (ready uintptr, e unix.Errno, slept time.Duration, room bool) {
	pfd := [2]unix.PollFd{{Fd: int32(k.fd), Events: unix.POLLOUT}, {Fd: int32(efd), Events: unix.POLLIN}}
	ready, e, slept = ppoll(&pfd, timeout)
	if e == 0 && pfd[1].Revents&unix.POLLIN != 0 {
		var buf [8]byte
		unix.Read(efd, buf[:])
	}
	return ready, e, slept, e == 0 && pfd[0].Revents&unix.POLLOUT != 0
}

// soloSleep is wait for a read that holds the solo waiter (kfd.soloBusy)
// and a reference: the common case of one goroutine reading the socket,
// which sleeps in ppoll with neither mu nor the waiting list, so that a
// wait costs fewer calls and atomic operations (integration/cmd/rdsinstr
// counts them). Each try is op's receive (doRecv, called directly), or f if
// op is nil; bop, if not nil, is the batch f receives for, which may sleep
// in the kernel as op does (blockRecv). blocked is how long the read
// has slept in recvmsg already (Conn.recvSkipping), or negative if it has
// not: it sleeps there once per wait. It reports whether the read is
// done, with its error, or must park in the runtime poller; neither means
// that it goes on in the shared way, which handles a closing socket and a
// socket kept in the read instance. Close and SetReadDeadline wake the solo
// read through its eventfd (wakeLocked): they set the closing bit or the
// deadline before they look at soloBusy, and the read sets soloBusy before
// it looks at them, so either the read sees the change or its eventfd is
// written.
func (k *kfd) soloSleep(op *msgOp, bop *batchOp, f func(fd uintptr) bool, try bool, blocked time.Duration) (done, park bool, err error) {
	if k.soloEfd < 0 {
		if err := k.newSoloEfd(); err != nil {
			return true, false, err
		}
	}
	rest := kernelSlice - max(blocked, 0)
	for ; ; try = true {
		if try {
			var ok bool
			if op != nil {
				ok = op.doRecv(uintptr(k.fd))
			} else {
				ok = f(uintptr(k.fd))
			}
			if ok {
				return true, false, nil
			}
		}
		// procs, written out: the solo read counts its calls in k
		// without an atomic operation (it holds soloBusy), and the call
		// is spared.
		if k.soloCalls++; k.soloCalls%procsEvery == 1 {
			readProcs()
		}
		p := int(procsSeen.Load())
		if k.skipOnlyP(p) {
			return false, true, nil // before readKept: a kept socket stays
		}
		if k.readKept.Load() || k.refs.Load()&kfdClosing != 0 {
			return false, false, nil
		}
		if !yieldOnlyP(p) {
			return false, true, nil
		}
		now := int64(time.Since(monoBase)) // the wait's one clock read
		until := time.Duration(-1)
		if k.rdlSet.Load() {
			if until = time.Duration(k.rdlMono.Load() - now); until <= 0 {
				return true, false, os.ErrDeadlineExceeded
			}
		}
		n := kernelWaiters.Add(1)
		due, left := k.parkDue(now)
		if due || !sleepInKernel(n, p, rest) {
			kernelWaiters.Add(-1)
			return false, true, nil
		}
		timeout, lastP := sleepFor(n, p, min(rest, left), until)
		if (op != nil || bop != nil) && blocked < 0 && k.mayBlock(p, lastP, timeout, until) {
			got, slept := k.blockRecv(op, bop, now)
			blocked = slept
			kernelWaiters.Add(-1)
			rest -= slept
			if got {
				return true, false, nil
			}
			if p == 1 && slept > 0 {
				k.missedOnlyP(p)
				return false, true, nil
			}
			continue
		}
		ready, e, slept := k.sleep(k.soloEfd, timeout)
		kernelWaiters.Add(-1)
		rest -= slept
		if lastP && e == 0 && ready == 0 {
			k.missedOnlyP(p)
			return false, true, nil // as in wait
		}
	}
}

// blockSolo is Conn.recvSkipping's sleep, for the holder of soloBusy and
// a reference: soloSleep's first round without its try, if that round
// would sleep in recvmsg (blockRecv) on a socket set up for it, else
// nothing. The receive is op's, or if op is nil bop's (recvmmsg). It
// reports whether the read has its result; if not, blocked is how long it
// slept in recvmsg (negative: it did not). blockRecv's steps are written
// out (publishing the thread, one receive, op's recvmsg itself), which
// spares the calls; a receive that ends without a message leaves the rest
// to the caller's soloSleep.
func (k *kfd) blockSolo(op *msgOp, bop *batchOp) (done bool, blocked time.Duration) {
	if k.soloCalls++; k.soloCalls%procsEvery == 1 {
		readProcs()
	}
	p := int(procsSeen.Load())
	if p == 1 || !k.rcvTimeo || k.readKept.Load() {
		return false, -1
	}
	now := int64(time.Since(monoBase)) // the wait's one clock read
	until := time.Duration(-1)
	if k.rdlSet.Load() {
		until = time.Duration(k.rdlMono.Load() - now)
	}
	since := now - k.parked.Load() // see parkDue, which stores when due
	rest := min(kernelSlice, parkWall+parkCap-time.Duration(since))
	n := kernelWaiters.Add(1)
	timeout, lastP := sleepFor(n, p, rest, until)
	if since >= int64(parkWall) || !sleepInKernel(n, p, rest) || !k.mayBlock(p, lastP, timeout, until) {
		kernelWaiters.Add(-1)
		return false, -1
	}
	runtime.LockOSThread() // as in blockRecv
	k.blockTid.Store(int32(unix.Gettid()))
	if k.wakeNB.Load() {
		k.clearWakeNB()
	}
	if k.blockStopped(time.Duration(now)) {
		k.unpublishBlock()
		kernelWaiters.Add(-1)
		return false, -1
	}
	var got bool
	var e unix.Errno
	if op != nil {
		op.armRecv()
		var r uintptr
		if rawNoError {
			r, _ = unix.RawSyscallNoError(unix.SYS_RECVMSG, uintptr(k.fd), uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags&^unix.MSG_DONTWAIT))
			r, e = rawResult(r)
		} else {
			r, _, e = syscall.RawSyscall6(unix.SYS_RECVMSG, uintptr(k.fd), uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags&^unix.MSG_DONTWAIT), 0, 0, 0)
		}
		if got = e != unix.EAGAIN && e != unix.ETIMEDOUT && e != unix.EINTR && !(op.skipCong && e == 0 && isCongNotice(int(r), &op.hdr)); got {
			op.n, op.errno = int(r), e
		}
	} else {
		got, e = bop.recvBlocking(uintptr(k.fd))
	}
	k.unpublishBlock()
	kernelWaiters.Add(-1)
	switch {
	case got:
		return true, 0
	case e == unix.EINTR:
		// A signal that was not a wake-up (see blockRecv): as if this
		// had not slept, so that soloSleep's blockRecv receives again.
		return false, -1
	}
	return false, k.blockSlept(e, now)
}

// mayBlock reports whether a solo read with p Ps may sleep in recvmsg
// (blockRecv) for timeout, holding the last free P or not, with until
// left before its deadline (negative: none): not on the last free P of
// several, nor with a deadline the sleep could overshoot, since a sleep in
// recvmsg that times out lasts until the kernel's next timer tick (see
// blockSlice). On the only P it is the whole sleep (see onlyPSlice).
func (k *kfd) mayBlock(p int, lastP bool, timeout, until time.Duration) bool {
	return (!lastP || p == 1) && timeout >= blockSlice && (until < 0 || until >= blockBound()) && !k.stayNB.Load()
}

// blockSlice bounds the solo read's sleep in recvmsg (kfd.blockRecv), as
// the socket's SO_RCVTIMEO. Such a sleep keeps the P, as ppoll's does, but
// unlike ppoll the kernel restarts the receive after the runtime's
// preemption signal (SA_RESTART), so sysmon's preemption and a
// stop-the-world wait until a message comes or the timeout passes. The
// kernel counts that timeout in timer ticks and rounds it up: on the
// development host (HZ=250) a receive with nothing to read returned
// after about 8 ms, not 1 ms, where ppoll's timeout of 1 ms took 1.1 ms.
// So a read sleeps in recvmsg once per wait, and not on the last free P
// of several, nor when its deadline is nearer than such a sleep was seen
// to take (blockBound); if nothing came, the rest of the wait sleeps in
// ppoll. A stop-the-world can wait that long for a reader in a lull
// (noted in the changelog as open). In the test VM a request/response
// round trip takes 50-500 us. A variable for the tests.
var blockSlice = time.Millisecond

// blockTook is the longest a solo read's sleep in recvmsg has taken to
// time out (in ns; 0 until one has), and blockBound how long such a
// sleep may last as far as the program knows: the kernel rounds the
// timeout up to its timer tick (see blockSlice).
var blockTook atomic.Int64

func blockBound() time.Duration { return max(blockSlice, time.Duration(blockTook.Load())) }

// blockGuess is what a sleep in recvmsg that ended with a message counts
// as (kfd.blockRecv) against the read's kernelSlice, instead of two clock
// reads per wait. A request/response round trip in the test VM takes
// 50-500 us.
const blockGuess = 250 * time.Microsecond

// blockRecv is the solo read's sleep when it may sleep blockSlice: one
// recvmsg without MSG_DONTWAIT, a C program's blocking read, where ppoll
// and a second recvmsg take two system calls more per wait. In the test
// VM, request/response over RDS's loopback between two processes took
// 0.86 of the CPU time per round trip that ppoll took, and 270 us per
// round trip against 299 (medians of 16 paired rounds). The descriptor
// blocks (kernelSocket); every other call passes MSG_DONTWAIT.
//
// To wake the read (wakeLocked: Close, a deadline change, a context's
// end), O_NONBLOCK is set on the descriptor and the read's thread is sent
// the runtime's preemption signal: the kernel restarts the interrupted
// receive, which then sees O_NONBLOCK and returns EAGAIN. The read
// publishes its thread, clears a previous wake-up's O_NONBLOCK, and only
// then looks at the closing bit and the deadline, so either it sees a
// change or the change's wake-up sees its thread; a wake-up that comes
// before the receive starts leaves O_NONBLOCK for it. The receive is op's,
// or if op is nil bop's (a recvmmsg that sleeps for its first message). It
// reports whether the op has its result, and how long it slept, estimated
// without the clock (see blockGuess).
func (k *kfd) blockRecv(op *msgOp, bop *batchOp, start int64) (got bool, slept time.Duration) {
	if !k.rcvTimeo {
		tv := unix.NsecToTimeval(int64(blockSlice))
		if err := unix.SetsockoptTimeval(k.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			k.stayNB.Store(true) // sleep in ppoll, which needs no timeout option
			return false, 0
		}
		k.rcvTimeo = true
	}
	runtime.LockOSThread() // the published thread is the one that sleeps
	k.blockTid.Store(int32(unix.Gettid()))
	if k.wakeNB.Load() {
		k.clearWakeNB()
	}
	var e unix.Errno
	received := false // a receive ran
	// The deadline is measured from start, the caller's clock reading of
	// a few microseconds ago, which saves a reading per wait: a deadline
	// set meanwhile is seen here at most that much late, against a sleep
	// that the kernel rounds up to its tick.
	now := time.Duration(start)
	for !k.blockStopped(now) {
		received = true
		// EINTR: a signal that was not a wake-up (which leaves
		// O_NONBLOCK): the runtime's, to which an AF_UNIX socket's
		// receive with a timeout returns where RDS's restarts. The
		// call here lets the goroutine be preempted.
		if op != nil {
			got, e = op.recvBlocking(uintptr(k.fd))
		} else {
			got, e = bop.recvBlocking(uintptr(k.fd))
		}
		if e != unix.EINTR {
			break
		}
		now = time.Since(monoBase)
	}
	k.unpublishBlock()
	if !received {
		return false, 0
	}
	return got, k.blockSlept(e, start)
}

// unpublishBlock ends what a read about to sleep in recvmsg began when it
// published its thread (see blockRecv).
func (k *kfd) unpublishBlock() {
	k.blockTid.Store(0)
	runtime.UnlockOSThread()
}

// blockStopped reports whether a read published to sleep in recvmsg must
// not: the socket is closing, or its deadline is nearer than such a sleep
// may take, counted from now (since monoBase).
func (k *kfd) blockStopped(now time.Duration) bool {
	return k.refs.Load()&kfdClosing != 0 || k.rdlSet.Load() && time.Duration(k.rdlMono.Load())-now < blockBound()
}

// blockSlept returns how long a sleep in recvmsg that began at start
// (since monoBase) and ended with e took, estimated without the clock
// where it can be (see blockGuess), and notes what the ending tells: the
// longest timeout seen (blockTook), or O_NONBLOCK set by someone else.
func (k *kfd) blockSlept(e unix.Errno, start int64) (slept time.Duration) {
	switch {
	case (e == unix.EAGAIN || e == unix.ETIMEDOUT) && !k.wakeNB.Load():
		// The timeout, or someone set O_NONBLOCK (below): the clock
		// says how long it took (see blockSlice).
		slept = time.Since(monoBase) - time.Duration(start)
		if int64(slept) > blockTook.Load() {
			blockTook.Store(int64(slept))
		}
	case e == unix.EAGAIN || e == unix.ETIMEDOUT:
		slept = blockSlice // a wake-up: less than the timeout
	default:
		slept = min(blockGuess, blockSlice)
	}
	if e == unix.EAGAIN && !k.wakeNB.Load() && isNonblocking(k.fd) {
		// Not a wake-up and not the timeout: someone set O_NONBLOCK.
		k.stayNB.Store(true)
	}
	return slept
}

// clearWakeNB clears the O_NONBLOCK that woke a sleeping read.
func (k *kfd) clearWakeNB() {
	k.mu.Lock()
	if k.wakeNB.Load() && !k.stayNB.Load() {
		unix.SetNonblock(k.fd, false)
		k.wakeNB.Store(false)
	}
	k.mu.Unlock()
}

// isNonblocking reports whether O_NONBLOCK is set on fd.
func isNonblocking(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_NONBLOCK != 0
}

// newSoloEfd creates the solo waiter's eventfd.
func (k *kfd) newSoloEfd() error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return os.NewSyscallError("eventfd", err)
	}
	k.mu.Lock()
	k.soloEfd = efd
	k.mu.Unlock()
	return nil
}

// sleep sleeps in ppoll until the socket is readable, efd is written, or
// timeout passes, keeping the P (see kernelWaiters), and returns how long
// it slept. It clears efd if it was written.
func (k *kfd) sleep(efd int, timeout time.Duration) (ready uintptr, e unix.Errno, slept time.Duration) {
	pfd := [2]unix.PollFd{{Fd: int32(k.fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	ready, e, slept = ppoll(&pfd, timeout)
	if e == 0 && pfd[1].Revents&unix.POLLIN != 0 {
		var buf [8]byte
		unix.Read(efd, buf[:])
	}
	return ready, e, slept
}

// ppoll polls pfd for up to timeout (0: not at all) with RawSyscall, which
// keeps the P (see kernelWaiters), and returns how long it slept.
func ppoll(pfd *[2]unix.PollFd, timeout time.Duration) (ready uintptr, e unix.Errno, slept time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	if rawNoError { // no signal mask: the fourth argument is 0
		ready, _ = unix.RawSyscallNoError(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, uintptr(unsafe.Pointer(&ts)))
		ready, e = rawResult(ready)
	} else {
		ready, _, e = syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	}
	// Linux's ppoll leaves the time it did not sleep in ts: what the
	// sleep took needs no clock.
	return ready, e, timeout - time.Duration(ts.Nano())
}

// parkDue reports whether a read that may sleep in the kernel should park
// in the runtime poller instead (see kernelWaiters): once parkWall has
// passed since a read of k last came back from a park (parkedWait notes
// when), so that a goroutine reading k passes through the scheduler well
// inside sysmon's 10 ms. The caller reads the clock for it (now), once
// per wait.
//
// Counting the sleeps instead, without the clock, let busy readers go
// past 10 ms: a sleep in recvmsg could only be guessed (blockGuess), and
// readers that also computed between sleeps slept less than they ran.
// sysmon then preempted them, and a preempted goroutine goes to the
// global run queue and wakes an idle P's thread (runtime.goschedImpl,
// wakep): in the test VM, 34% of the futex calls of rr tcp 4x8's sender
// came from there, each such preemption costing two thread wake-ups and
// a move of the goroutine to another thread, where a park costs two
// epoll_ctl calls and a sleep in epoll_pwait in place of the one in the
// kernel. Against counting, in paired A/B rounds (rdsbench -ab, 6 each,
// 8 tools rows): preemption signals per request on rr tcp 4x8 went from
// 0.05-0.08 to 0.01-0.03 and sysmon's wake-ups fell, parks rose by
// 0.02-0.07 per request, and CPU per message was lower in 14 of the 16
// rows' medians of paired ratios (0.82-0.98; rdma read 4KiB qd1, whose
// counts did not change, 1.12-1.14). The clock read costs about 100
// user-space instructions per wait (rdsinstr: ReadMsg 866 to 967).
//
// now is the time (since monoBase), which the caller reads once per wait.
// If not due, it also returns how long the read may sleep (0 if due):
// until parkWall
// and parkCap have passed since the last park, so that a sleep that
// began just short of parkWall and would go on for milliseconds (a lull
// in the traffic) does not outlast sysmon's 10 ms, whose preemption costs
// a thread wake-up or two (above). A sleep in recvmsg is not capped: it
// is taken for blockSlice, which the kernel rounds up to its tick.
func (k *kfd) parkDue(now int64) (due bool, left time.Duration) {
	since := now - k.parked.Load()
	if since < int64(parkWall) {
		return false, parkWall + parkCap - time.Duration(since)
	}
	k.parked.Store(now) // parkedWait notes the end of the park too
	return true, 0
}

// parkCap is how long after parkWall a sleep that began before it may
// last (see parkDue): sysmon preempts a goroutine it has seen running for
// 10 ms, counted from no earlier than its last pass through the
// scheduler.
const parkCap = 1500 * time.Microsecond

// parkWall bounds how long reads of a socket go on without parking (see
// kfd.parkDue): well inside sysmon's 10 ms, which it counts from the last
// time it saw the goroutine scheduled. A variable for the tests and the
// instruction counts of integration/cmd/rdsinstr.
var parkWall = 8 * time.Millisecond

// farAway bounds how far ahead a deadline counts on the monotonic clock
// (kfd.rdlMono), so that a distant one does not overflow: about 146
// years.
const farAway = time.Duration(1 << 62)

// monoBase is the origin of kfd.parked and kfd.rdlMono: time.Since on a
// time.Time with a monotonic reading reads only the monotonic clock.
var monoBase = time.Now()

// enter registers a read or write sleeping in ppoll and returns how long
// it may sleep (negative: no limit), or the reason not to wait: the socket
// is closing or the deadline passed.
func (k *kfd) enter(write bool) (*kwaiter, time.Duration, error) {
	// The lock is released by hand on each way out: this runs before
	// every sleep, and a deferred call costs a call more.
	k.mu.Lock()
	if k.closing {
		k.mu.Unlock()
		return nil, 0, errKfdClosed
	}
	dl := k.wdl
	if !write {
		dl = k.rdl
		if k.readKept.Load() {
			k.er.drop(k.fd) // see pollwait_linux.go
		}
	}
	timeout := time.Duration(-1)
	if !dl.IsZero() {
		if timeout = time.Until(dl); timeout <= 0 {
			k.mu.Unlock()
			return nil, 0, os.ErrDeadlineExceeded
		}
	}
	w, err := k.sleeperLocked()
	if err != nil {
		k.mu.Unlock()
		return nil, 0, err
	}
	k.mu.Unlock()
	return w, timeout, nil
}

// sleeperLocked takes an idle waiter, with an eventfd, into the waiting
// list.
func (k *kfd) sleeperLocked() (*kwaiter, error) {
	w := k.idleWaiterLocked()
	if w.efd < 0 {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			k.idle = append(k.idle, w)
			return nil, os.NewSyscallError("eventfd", err)
		}
		w.efd = efd
	}
	k.waiting = append(k.waiting, w)
	return w, nil
}

// leave unregisters a waiter and releases the call's reference (release
// and the unregistering under one lock: this runs after every sleep).
func (k *kfd) leave(w *kwaiter) {
	k.mu.Lock()
	k.waiting = removeWaiter(k.waiting, w)
	k.idle = append(k.idle, w)
	k.release()
	k.mu.Unlock() // by hand, as in enter
}

// removeWaiter deletes w from ws, which holds it once, without keeping the
// order.
func removeWaiter[W comparable](ws []W, w W) []W {
	for i, x := range ws {
		if x == w {
			last := len(ws) - 1
			ws[i] = ws[last]
			var zero W
			ws[last] = zero
			return ws[:last]
		}
	}
	return ws
}

// wakeLocked makes every waiter's ppoll return.
func (k *kfd) wakeLocked() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // an eventfd counts in host byte order
	for _, w := range k.waiting {
		unix.Write(w.efd, one[:])
	}
	if k.soloBusy.Load() && k.soloEfd >= 0 {
		unix.Write(k.soloEfd, one[:])
	}
	if tid := k.blockTid.Load(); tid != 0 {
		// See blockRecv. A signal that arrives after the read left
		// recvmsg is a spurious preemption request, which the
		// runtime ignores.
		if !k.wakeNB.Load() && !k.stayNB.Load() {
			unix.SetNonblock(k.fd, true)
			k.wakeNB.Store(true)
		}
		unix.Tgkill(selfPID, int(tid), unix.SIGURG)
	}
}

// selfPID is the process's ID, for signalling one of its threads.
var selfPID = unix.Getpid()

// setReadDeadline and setWriteDeadline are the deadlineMux set functions.
func (k *kfd) setReadDeadline(t time.Time) error  { return k.setDeadline(t, false) }
func (k *kfd) setWriteDeadline(t time.Time) error { return k.setDeadline(t, true) }

func (k *kfd) setDeadline(t time.Time, write bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return errKfdClosed
	}
	e := k.er
	if write {
		k.wdl, e = t, k.ew
	} else {
		k.rdl = t
		if !t.IsZero() {
			// As the runtime poller does, the deadline goes on the
			// monotonic clock when it is set.
			k.rdlMono.Store(int64(time.Since(monoBase) + min(time.Until(t), farAway)))
		}
		k.rdlSet.Store(!t.IsZero())
	}
	k.wakeLocked()
	if e != nil {
		return e.f.SetReadDeadline(t)
	}
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
	busy := k.refs.Add(kfdClosing) != kfdClosing
	k.wakeLocked()
	eps := [2]*epollFile{k.er, k.ew}
	k.mu.Unlock()
	for _, e := range eps {
		if e != nil {
			e.f.Close() // wakes the goroutines parked on it
		}
	}
	if busy {
		<-k.drained
	}
	for _, w := range k.idle {
		if w.efd >= 0 {
			unix.Close(w.efd)
		}
	}
	k.idle = nil
	if k.soloEfd >= 0 {
		unix.Close(k.soloEfd)
		k.soloEfd = -1
	}
	return unix.Close(k.fd)
}

// kernelSocket creates an RDS socket that the runtime poller does not
// know, in network namespace netns if it is not 0. The descriptor blocks,
// so that the solo read can sleep in recvmsg itself (kfd.blockRecv); every
// other receive and send passes MSG_DONTWAIT.
func kernelSocket(netns int) (int, error) {
	open := func() (int, error) {
		return unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
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
