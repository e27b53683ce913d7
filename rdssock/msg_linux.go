//go:build linux

package rdssock

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
	"golang.org/x/sys/unix"
)

// msgOp is the state of one sendmsg or recvmsg call. Ops are kept by
// their Conn (one per direction) or pooled, and their poller callbacks are
// bound once, so a call allocates nothing.
// RDS messages are never sent through x/sys/unix Sendmsg/Recvmsg: those add
// a hidden byte to an empty payload that carries control data (and
// mdlayher/socket, which the package no longer uses, reports a 0-byte read
// as EOF), while for RDS a 0-byte message with control data is an ordinary
// notification.
type msgOp struct {
	hdr      unix.Msghdr
	iov      unix.Iovec
	sa       sockaddrBuf
	flags    int
	dontWait bool
	waitCong bool // wait in the poller when the destination is congested
	sawCong  bool // the kernel refused the send as congested (ENOBUFS)
	spin     busySpin
	n        int
	errno    unix.Errno

	// A receive on a socket whose congestion notices belong to the
	// library (Config.WaitCongested alone) skips them. If the caller gave
	// too little room to tell such a notice from others, control data goes
	// to ctl instead and readMsg hands it on.
	skipCong bool
	ctlLen   int // the control buffer's size, restored before each try
	ctl      [congNoticeSpace]byte

	recv func(fd uintptr) bool // bound to doRecv
	send func(fd uintptr) bool // bound to doSend

	recvWait, sendWait opWait // recv and send, for Conn.wait

	kept bool // the op is a Conn's own (Conn.op), not the pool's

	// saTo is the destination sa holds, encoded in saLen bytes, so that
	// sends to the same peer encode it once; zero when unknown.
	saTo  netip.AddrPort
	saLen uint32
}

var opPool = sync.Pool{New: func() any { return newMsgOp() }}

func newMsgOp() *msgOp {
	op := new(msgOp)
	op.recv = op.doRecv
	op.send = op.doSend
	op.recvWait.bind(op.recv)
	op.sendWait.bind(op.send)
	return op
}

// getOp returns an op for a call on c in direction i (0 receive, 1
// send): the one c keeps for it (taken with one compare-and-swap of a
// flag: a goroutine that reads or writes call after call always finds it
// free), or one from the pool (pooled) while another call has it. It
// points the op's header at the call's buffers and sets the fields both
// directions use; the caller sets those of its own (armRecv sets the
// sender's address, the control data's length and the flags before each
// receive; writeMsg sets the destination). Each pointer is written once:
// every pointer written costs a write-barrier check.
func (c *Conn) getOp(i int, b, oob []byte, flags int) (op *msgOp, pooled bool) {
	if c.opBusy[i].CompareAndSwap(false, true) {
		// Only the holder of the flag touches c.op[i].
		if op = c.op[i]; op == nil {
			op = newMsgOp()
			op.kept = true
			c.op[i] = op
		}
	} else {
		op, pooled = opPool.Get().(*msgOp), true
	}
	op.setBuffers(b, oob)
	op.flags = flags | unix.MSG_DONTWAIT // the descriptor blocks: see kernelSocket
	op.dontWait = flags&unix.MSG_DONTWAIT != 0
	op.n, op.errno = 0, 0
	return op, pooled
}

// setBuffers points the op's header at the data b and the control data
// oob (none when empty), writing each pointer once; the control data's
// length is the caller's to set (a receive sets it before each try).
func (op *msgOp) setBuffers(b, oob []byte) {
	var iov *unix.Iovec
	if len(b) > 0 {
		op.iov.Base = &b[0]
		op.iov.SetLen(len(b))
		iov = &op.iov
	}
	op.hdr.Iov = iov
	op.hdr.SetIovlen(min(len(b), 1))
	var ctl *byte
	if len(oob) > 0 {
		ctl = &oob[0]
	}
	op.hdr.Control = ctl
}

// putOp drops the op's references to the caller's buffers and gives it
// back: to c, or to the pool.
func (c *Conn) putOp(write bool, op *msgOp) {
	op.iov.Base, op.hdr.Control = nil, nil // getOp and its caller set the rest again
	if op.kept {
		c.opBusy[b2i(write)].Store(false)
		return
	}
	putPooled(op)
}

func putPooled(op *msgOp) { opPool.Put(op) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// busySpin is one receive's budget for busy polling (Config.BusyPoll).
// It holds no pointer, so that setting it up for each receive costs no
// write-barrier check.
type busySpin struct {
	limit time.Duration // zero: no busy polling
	start time.Duration // the first empty try (since monoBase); zero: none yet
}

// again reports whether a receive that found no message should try again
// instead of waiting in the poller. If so, it first yields the CPU, so
// that a peer on the same CPU can run and answer.
func (s *busySpin) again() bool {
	if s.limit <= 0 {
		return false
	}
	switch now := time.Since(monoBase); {
	case s.start == 0:
		s.start = max(now, 1)
	case now-s.start >= s.limit:
		s.limit = 0 // spent: after the poller's wake-up, no more spinning
		return false
	}
	unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	return true
}

// doRecv runs recvmsg until it has a message for the caller; it reports
// whether the poller may stop waiting. The call has MSG_DONTWAIT, so it
// never sleeps and goes through RawSyscall (see sendmsg). A congestion
// notice that belongs to the library is skipped.
func (op *msgOp) doRecv(fd uintptr) bool {
	for {
		op.armRecv()
		var n uintptr
		var e unix.Errno
		if rawNoError {
			n, _ = unix.RawSyscallNoError(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags))
			n, e = rawResult(n)
		} else {
			n, _, e = syscall.RawSyscall6(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags), 0, 0, 0)
		}
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN && !op.dontWait:
			if op.spin.limit > 0 && op.spin.again() { // the check inline: most sockets do not spin
				continue
			}
			return false
		}
		op.n, op.errno = int(n), e
		if op.skipCong && e == 0 && isCongNotice(op.n, &op.hdr) {
			continue // the library's own wake-up for WaitCongested
		}
		return true
	}
}

// armRecv resets the header fields a receive writes: the sender's
// address, the control data's length and the flags.
func (op *msgOp) armRecv() {
	op.hdr.Name = (*byte)(unsafe.Pointer(&op.sa.raw))
	op.hdr.Namelen = unix.SizeofSockaddrInet6
	op.hdr.SetControllen(op.ctlLen)
	op.hdr.Flags = 0
}

// recvBlocking is one recvmsg without MSG_DONTWAIT: the solo read's sleep
// in the kernel (kfd.blockRecv), bounded by the socket's SO_RCVTIMEO. It
// reports whether the op has its result; if not, e tells why: EAGAIN (a
// wake-up, see kfd.wakeLocked; from an AF_UNIX socket also the timeout),
// ETIMEDOUT (RDS's timeout), EINTR, or 0 for a congestion notice that
// belongs to the library.
func (op *msgOp) recvBlocking(fd uintptr) (done bool, e unix.Errno) {
	op.armRecv()
	var n uintptr
	if rawNoError {
		n, _ = unix.RawSyscallNoError(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags&^unix.MSG_DONTWAIT))
		n, e = rawResult(n)
	} else {
		n, _, e = syscall.RawSyscall6(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags&^unix.MSG_DONTWAIT), 0, 0, 0)
	}
	switch e {
	case unix.EAGAIN, unix.ETIMEDOUT, unix.EINTR:
		return false, e
	}
	if op.skipCong && e == 0 && isCongNotice(int(n), &op.hdr) {
		return false, 0
	}
	op.n, op.errno = int(n), e
	return true, e
}

// congNoticeSpace is the control data of a congestion notice: one
// RDS_CMSG_CONG_UPDATE message holding a 64-bit port mask.
const congNoticeSpace = unix.SizeofCmsghdr + 8

// isCongNotice reports whether a received message is a congestion notice:
// no data, no sender, and exactly that one control message.
func isCongNotice(n int, h *unix.Msghdr) bool {
	if n != 0 || h.Namelen != 0 || h.Flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 ||
		h.Control == nil || uint64(h.Controllen) != congNoticeSpace {
		return false
	}
	cm := (*unix.Cmsghdr)(unsafe.Pointer(h.Control))
	return cm.Level == solRDS && cm.Type == rdsabi.CmsgCongUpdate && uint64(cm.Len) == congNoticeSpace
}

// useOwnControl points the receive's control data at the op's own buffer,
// for a caller whose oob is too small to hold a congestion notice.
func (op *msgOp) useOwnControl() {
	op.hdr.Control = &op.ctl[0]
	op.ctlLen = len(op.ctl)
}

// handOver gives the caller the control data received into the op's own
// buffer: all of it if it fits oob, else none, with MSG_CTRUNC, which is
// what the kernel reports when control data does not fit.
func (op *msgOp) handOver(oob []byte) (oobn int, flags int32) {
	n, flags := int(op.hdr.Controllen), op.hdr.Flags
	if n > len(oob) {
		return 0, flags | unix.MSG_CTRUNC
	}
	return copy(oob, op.ctl[:n]), flags
}

// sendRetries bounds how often a send that failed with EAGAIN while the
// socket polls writable is retried before EAGAIN goes to the caller. Such
// an EAGAIN does not come from a full send buffer (for example an RDMA
// registration on a connection still being set up), so waiting for the
// poller would wait for an edge that never comes.
const sendRetries = 3

// doSend runs sendmsg until the kernel takes the message or refuses it for
// a reason the caller gets; it reports whether the poller may stop waiting.
// The body of sendmsg is written out here, to spare each send a call; the
// choice of Syscall or RawSyscall is the one sendmsg documents.
func (op *msgOp) doSend(fd uintptr) bool {
	for tries := 0; ; {
		var n int
		var e unix.Errno
		if op.hdr.Control != nil && registersMemory(&op.hdr) {
			n, e = sendmsgBlocking(fd, &op.hdr, op.flags)
		} else {
			var r uintptr
			if rawNoError {
				r, _ = unix.RawSyscallNoError(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags))
				r, e = rawResult(r)
			} else {
				r, _, e = syscall.RawSyscall6(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&op.hdr)), uintptr(op.flags), 0, 0, 0)
			}
			n = int(r)
		}
		if e == unix.EINTR {
			continue
		}
		if e == unix.ENOBUFS {
			op.sawCong = true
			if op.waitCong {
				return false // congested: the monitor's update wakes the poller
			}
		}
		if e == unix.EAGAIN && !op.dontWait {
			if !writable(fd) {
				return false // send buffer full: wait for the poller
			}
			if tries++; tries <= sendRetries {
				continue
			}
		}
		op.n, op.errno = int(n), e
		return true
	}
}

// sendmsg runs one sendmsg system call on socket fd; flags hold
// MSG_DONTWAIT.
//
// The call never sleeps in the kernel, so a message is sent with
// RawSyscall, which skips the scheduler's system-call hand-off: on a small
// message that hand-off costs as much as the kernel's own work, and when
// the call takes longer than sysmon's 20 µs the P goes to another thread
// and the caller waits for one when it returns (RDMA operations, which pin
// their local pages, took 0.75 of C's rate at depth 4 that way, 0.89 with
// RawSyscall, in a 2-round trial on 6.1). The exception is a message that
// registers memory (RDS_CMSG_RDMA_MAP): the kernel waits for the device to
// finish the registration (rds_ib_post_reg_frmr), so it goes through
// Syscall and leaves the P to other goroutines meanwhile.
func sendmsg(fd uintptr, hdr *unix.Msghdr, flags int) (int, unix.Errno) {
	if hdr.Control != nil && registersMemory(hdr) {
		return sendmsgBlocking(fd, hdr, flags)
	}
	var n uintptr
	var e unix.Errno
	if rawNoError {
		n, _ = unix.RawSyscallNoError(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(hdr)), uintptr(flags))
		n, e = rawResult(n)
	} else {
		n, _, e = syscall.RawSyscall6(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(hdr)), uintptr(flags), 0, 0, 0)
	}
	return int(n), e
}

// sendmsgBlocking is sendmsg through the scheduler's system-call path.
func sendmsgBlocking(fd uintptr, hdr *unix.Msghdr, flags int) (int, unix.Errno) {
	n, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(hdr)), uintptr(flags))
	return int(n), e
}

// registersMemory reports whether the control data of hdr holds an
// RDS_CMSG_RDMA_MAP message. A malformed buffer is left for the kernel to
// refuse. It runs on every send with control data, so it walks the
// headers itself rather than through a cmsg.Parser (half the work).
func registersMemory(hdr *unix.Msghdr) bool {
	if hdr.Control == nil {
		return false
	}
	b := unsafe.Slice(hdr.Control, hdr.Controllen)
	for len(b) >= unix.SizeofCmsghdr {
		var n uint64
		if cmsgLenSize == 8 {
			n = binary.NativeEndian.Uint64(b)
		} else {
			n = uint64(binary.NativeEndian.Uint32(b))
		}
		if n < unix.SizeofCmsghdr || n > uint64(len(b)) {
			return false
		}
		if int32(binary.NativeEndian.Uint32(b[cmsgLevelOff:])) == solRDS &&
			int32(binary.NativeEndian.Uint32(b[cmsgTypeOff:])) == rdsabi.CmsgRDMAMap {
			return true
		}
		b = b[min(cmsg.Space(int(n)-unix.SizeofCmsghdr), len(b)):]
	}
	return false
}

// The layout of a control message header (struct cmsghdr).
const (
	cmsgLenSize  = unsafe.Sizeof(unix.Cmsghdr{}.Len)
	cmsgLevelOff = unsafe.Offsetof(unix.Cmsghdr{}.Level)
	cmsgTypeOff  = unsafe.Offsetof(unix.Cmsghdr{}.Type)
)

func writable(fd uintptr) bool {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(pfd[:], 0)
	return err == nil && n == 1 && pfd[0].Revents&unix.POLLOUT != 0
}

// ReadMsg receives one message into b and its control messages into oob
// (parse them with package cmsg). It returns the bytes of data and control
// data received, the recvmsg flags, and the sender.
//
// A result of 0 data bytes is a message, never end of file: RDMA completion
// notices, congestion updates and zero-copy completions arrive as 0-byte
// messages that carry only control data (and no sender), and RDS ping
// replies are 0-byte messages from port 0. The congestion notices that
// wake senders waiting with Config.WaitCongested are skipped (see there).
//
// If the message or its control data did not fit (MSG_TRUNC, MSG_CTRUNC in
// flags), ReadMsg returns what fit together with an error for which
// errors.Is(err, ErrTruncated) holds; the rest is lost.
func (c *Conn) ReadMsg(b, oob []byte) (n, oobn, flags int, from netip.AddrPort, err error) {
	return c.readMsg(nil, b, oob, 0)
}

// ReadMsgContext is ReadMsg that gives up when ctx is done and passes
// recvmsg flags such as MSG_PEEK or MSG_DONTWAIT (which returns an EAGAIN
// error instead of waiting); 0 is a plain receive. A context that can
// never be canceled (context.Background) costs nothing extra; one that can
// be uses the socket's read deadline while the call waits. A loop that
// reads with one such context pays for watching it about once; a context
// made for each call (context.WithTimeout around every read) brings a
// timer and allocations of its own each time, so bound a busy loop's
// reads with one context per period instead. A nil ctx is refused with
// an error.
func (c *Conn) ReadMsgContext(ctx context.Context, b, oob []byte, flags int) (n, oobn, rflags int, from netip.AddrPort, err error) {
	if ctx == nil {
		return 0, 0, 0, netip.AddrPort{}, opError("read", c.LocalAddr(), nil, errNilContext)
	}
	return c.readMsg(ctx, b, oob, flags)
}

func (c *Conn) readMsg(ctx context.Context, b, oob []byte, flags int) (n, oobn, rflags int, from netip.AddrPort, err error) {
	op, pooled := c.getOp(0, b, oob, flags)
	if pooled {
		op.saTo = netip.AddrPort{} // the receive overwrites the address it holds
	}
	op.ctlLen = len(oob)
	op.spin = busySpin{limit: time.Duration(c.busyPoll.Load())}
	op.skipCong = c.ownsCongNotices()
	ownCtl := op.skipCong && len(oob) < congNoticeSpace
	if ownCtl {
		op.useOwnControl()
	}
	if ctx == context.Background() { // rdmaops' reads without a context
		ctx = nil
	}
	var perr error
	done, blocked := false, time.Duration(-1)
	if w := c.k.waits.Load(); skipping(w) && op.spin.limit == 0 && !op.dontWait {
		done, blocked = c.recvSkipping(ctx, op, nil, w)
	}
	if !done {
		perr = c.recvWait(ctx, op, nil, &op.recvWait, blocked)
	}
	n, oobn, rflags = op.n, int(op.hdr.Controllen), int(op.hdr.Flags)
	if ownCtl {
		var f int32
		oobn, f = op.handOver(oob)
		rflags = int(f)
	}
	from, ok := op.sa.inet4(op.hdr.Namelen)
	if !ok {
		from = op.sa.getZone(op.hdr.Namelen, c.otherNS)
	}
	errno := op.errno
	c.putOp(false, op)
	switch {
	case perr != nil:
		return 0, 0, 0, netip.AddrPort{}, opError("read", c.LocalAddr(), nil, c.pollErr(perr))
	case errno != 0:
		return 0, 0, 0, netip.AddrPort{}, opError("read", c.LocalAddr(), nil, wrapSyscall("recvmsg", errno, ""))
	case rflags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		return n, oobn, rflags, from, opError("read", c.LocalAddr(), addrOrNil(from), ErrTruncated)
	}
	return n, oobn, rflags, from, nil
}

// WriteMsg sends b as one message to to, with the control messages in oob
// (build them with package cmsg). A zero to sends to the address set with
// Connect. b may be empty: a 0-byte message with control data is how some
// RDMA requests travel, and a 0-byte message to port 0 is an RDS ping.
//
// The first send to a peer over RDS/TCP first brings the connection up,
// unless Config.NoAutoWarmUp is set (see the package documentation).
// The call waits while the send buffer is full. It fails with ErrCongested
// when the destination port is congested (or waits, with
// Config.WaitCongested) and with ErrMessageTooLarge when b exceeds half the
// send buffer.
func (c *Conn) WriteMsg(b, oob []byte, to netip.AddrPort) (int, error) {
	return c.writeMsg(nil, b, oob, to, 0)
}

// WriteMsgContext is WriteMsg that gives up when ctx is done and passes
// sendmsg flags such as MSG_ZEROCOPY or MSG_DONTWAIT (which returns an
// EAGAIN error instead of waiting); 0 is a plain send. A nil ctx is
// refused with an error.
func (c *Conn) WriteMsgContext(ctx context.Context, b, oob []byte, to netip.AddrPort, flags int) (int, error) {
	if ctx == nil {
		return 0, opError("write", c.LocalAddr(), addrOrNil(to), errNilContext)
	}
	return c.writeMsg(ctx, b, oob, to, flags)
}

func (c *Conn) writeMsg(ctx context.Context, b, oob []byte, to netip.AddrPort, flags int) (int, error) {
	if !c.warm.off.Load() {
		if err := c.warmedUp(ctx, to, flags); err != nil {
			return 0, opError("write", c.LocalAddr(), addrOrNil(to), c.pollErr(err))
		}
	}
	op, _ := c.getOp(1, b, oob, flags)
	op.hdr.SetControllen(len(oob))
	op.hdr.Flags = 0
	op.sawCong = false
	if !to.IsValid() {
		op.hdr.Name, op.hdr.Namelen = nil, 0 // the address set with Connect
	} else if !op.sameDest(to) {
		if err := op.setDest(to); err != nil {
			c.putOp(true, op)
			return 0, opError("write", c.LocalAddr(), &Addr{to}, err)
		}
	}
	op.waitCong = !op.dontWait && c.waitCongested.Load()
	// The first try, then a wait (Conn.wait, written out).
	perr := ctxErr(ctx)
	if perr == nil {
		ok := false
		if c.k.acquire() {
			ok = op.doSend(uintptr(c.k.fd))
			c.k.release()
		}
		if !ok {
			perr = c.waitAfterTry(ctx, true, &op.sendWait)
		}
	}
	n, errno := op.n, op.errno
	if op.sawCong {
		c.congestedSends.Add(1)
	}
	c.putOp(true, op)
	switch {
	case perr != nil:
		return 0, opError("write", c.LocalAddr(), addrOrNil(to), c.pollErr(perr))
	case errno != 0:
		detail := ""
		if errno == unix.EMSGSIZE {
			sndbuf, _ := c.WriteBuffer()
			detail = tooLargeDetail(len(b), sndbuf)
		}
		return 0, opError("write", c.LocalAddr(), addrOrNil(to), wrapSyscall("sendmsg", errno, detail))
	}
	return n, nil
}

// CongestedSends returns how many sends on c found their destination
// port congested: the kernel refused them with ENOBUFS, and they either
// waited until the port was free (Config.WaitCongested) or returned
// ErrCongested. A send that was refused several times before it went
// through counts once, and so does a WriteBatch call.
func (c *Conn) CongestedSends() uint64 { return c.congestedSends.Load() }

// sameDest points the op's header at destination to if sa holds it
// already, from the op's previous send; else setDest encodes it.
func (op *msgOp) sameDest(to netip.AddrPort) bool {
	if to != op.saTo {
		return false
	}
	op.hdr.Name, op.hdr.Namelen = (*byte)(unsafe.Pointer(&op.sa.raw)), op.saLen
	return true
}

// setDest points the op's header at destination to, encoded in sa.
func (op *msgOp) setDest(to netip.AddrPort) error {
	op.saTo = netip.AddrPort{}
	sl, err := op.sa.put(to)
	if err != nil {
		return err
	}
	op.saLen = sl
	if to.Addr().Zone() == "" {
		op.saTo = to // a zone's index could change: look it up each time
	}
	op.hdr.Name = (*byte)(unsafe.Pointer(&op.sa.raw))
	op.hdr.Namelen = sl
	return nil
}

// recvWait is Conn.wait for a receive, written out: it tries, then waits
// as the socket's solo waiter, calling op's doRecv directly (or ow's
// callback if op is nil: a batch, bop). That is the way of a read with no
// context (ctx nil) and of one whose context the read deadline mux
// watches already, as a loop that reads with the same context call after
// call finds it: such a wait relies on the mux's standing registration
// without its lock (see waitContext), and the context's end wakes it with
// a deadline in the past. A wait that must register, park, or go the
// shared way, or that a deadline woke, goes on as waitAfterTry does. It
// spares each waiting read four calls or more. A read that skips its
// try comes here only when recvSkipping, its own way, did not get its
// message; blocked is then how long it slept in recvmsg (negative: it
// did not sleep there).
func (c *Conn) recvWait(ctx context.Context, op *msgOp, bop *batchOp, ow *opWait, blocked time.Duration) error {
	k := c.k
	// A read of a socket whose last reads had to wait (skipAfter in a row)
	// goes straight to the solo read's sleep in recvmsg, which returns a
	// message that is there at once: the try with MSG_DONTWAIT would most
	// likely find nothing, and in the test VM such a recvmsg costs 5-8 us
	// of CPU time. Every probeEvery-th such read tries first all the same,
	// and if it finds its message the run of waits is over: a receiver
	// whose messages now come faster than it reads them goes back to
	// trying. Every other way to wait either tries first or sleeps
	// until the socket is readable, as a try would have found it; a wait
	// that ends without its message (a passed deadline) or goes the shared
	// way makes the skipped try before it goes on. Busy polling keeps the
	// try. A batch skips its recvmmsg the same way (its sleep is one
	// recvmmsg that waits for the first message).
	w := k.waits.Load()
	skip := skipping(w) &&
		(op != nil && op.spin.limit == 0 && !op.dontWait || bop != nil && bop.spin.limit == 0 && !bop.dontWait)
	// A read whose context has ended returns its error, not a message
	// that is there: a try comes after the check, and a skipped one after
	// the check below (ctx.Err once the context is watched).
	if !skip {
		if err := ctxErr(ctx); err != nil {
			return err
		}
	}
	if !k.acquire() {
		return c.waitAfterTry(ctx, false, ow) // reports the closed socket
	}
	if !skip && tryRecv(op, ow, k.fd) {
		k.release()
		if w != 0 {
			k.waits.Store(0)
		}
		return nil
	}
	if w++; w >= skipAfter+probeEvery {
		w = skipAfter // the probe found nothing: a new round
	}
	k.waits.Store(w)
	mux := &c.readDeadline
	lockless := false
	if ctx != nil {
		if done := ctx.Done(); done != nil {
			if !mux.enterLockless(done) {
				if skip && ctx.Err() != nil {
					k.release()
					return ctx.Err()
				}
				if skip && tryRecv(op, ow, k.fd) {
					k.release() // the skipped try, before the shared way
					k.waits.Store(0)
					return nil
				}
				k.release()
				return c.waitContext(ctx, done, false, ow) // registers
			}
			lockless = true
			if err := ctx.Err(); err != nil {
				k.release()
				mux.leaveLockless()
				return err
			}
		}
	}
	var err error
	if k.soloBusy.CompareAndSwap(false, true) {
		var done, park bool
		done, park, err = k.soloSleep(op, bop, ow.f, blocked >= 0, blocked)
		if skip && !park && (!done || err != nil) && tryRecv(op, ow, k.fd) {
			// The wait ended without its message (a deadline, or the
			// shared way): the skipped try comes first.
			done, err = true, nil
		}
		k.soloBusy.Store(false)
		k.release()
		switch {
		case park:
			err = k.parkedWait(ow.f, false)
			done = err == nil || !errors.Is(err, os.ErrDeadlineExceeded)
		case done:
			done = err == nil || !errors.Is(err, os.ErrDeadlineExceeded)
		}
		if !done {
			// A deadline passed (the application's, a stale one the
			// mux applies again, or the one that says ctx ended), or
			// the shared way must go on: waitOn tells which and
			// handles each.
			err = c.waitOn(ctx, mux, false, ow)
		}
	} else {
		if skip && tryRecv(op, ow, k.fd) {
			k.release()
			k.waits.Store(0)
			if lockless {
				mux.leaveLockless()
			}
			return nil
		}
		k.release()
		err = c.waitOn(ctx, mux, false, ow)
	}
	if lockless {
		mux.leaveLockless()
	}
	return err
}

// skipping reports whether a read of a socket whose count of waits is w
// skips its try (see recvWait).
func skipping(w int32) bool {
	return w >= skipAfter && uint32(w-skipAfter)%probeEvery != probeEvery-1
}

// recvSkipping is the common way of a read that skips its try (see
// recvWait; w is the count of waits it read), op's or if op is nil the
// batch bop's: the socket's only reader,
// with no context or one the read deadline mux watches, on one of several
// Ps, sleeps in recvmsg at once, with soloSleep's checks and blockRecv's
// sleep written out, which spares it the calls and generality of the
// other ways. It reports whether the read is done (then without error:
// a receive's own error is op's). If not, recvWait goes on as for any
// such read, this call's effects undone but for one: if blocked is not
// negative, the read slept that long in recvmsg without a message, and
// soloSleep counts that sleep as its own.
func (c *Conn) recvSkipping(ctx context.Context, op *msgOp, bop *batchOp, w int32) (done bool, blocked time.Duration) {
	mux := &c.readDeadline
	lockless := false
	if ctx != nil {
		if d := ctx.Done(); d != nil {
			if !mux.enterLockless(d) {
				return false, -1
			}
			if ctx.Err() != nil {
				mux.leaveLockless()
				return false, -1
			}
			lockless = true
		}
	}
	done, blocked = false, -1
	k := c.k
	if k.acquire() {
		if k.soloBusy.CompareAndSwap(false, true) {
			done, blocked = k.blockSolo(op, bop)
			k.soloBusy.Store(false)
		}
		k.release()
	}
	if lockless {
		mux.leaveLockless()
	}
	if done {
		if w++; w >= skipAfter+probeEvery {
			w = skipAfter
		}
		k.waits.Store(w)
	}
	return done, blocked
}

// skipAfter is how many reads of a socket in a row must have waited for
// their message before the next one skips its try (Conn.recvWait). One is
// not enough: a receiver of a stream waits once it has read all that was
// queued, and by the time it reads again the next message is usually
// there, where the sleep in recvmsg costs more than the try (the thread's
// ID, a system call, its lock). Request/response and RDMA at depth 1 wait
// on every read and skip from the third on. The rates do not settle it: in
// 8-round A/B trials against no skipping (rdsbench -ab), skipping after
// every wait gave rdscat's oneway 64B 0.81 of the rate and RDMA WRITE 4KiB
// qd1 1.05; skipping after two, 0.88 (in a run whose spread was 83-142%)
// and 0.97; what holds is the system calls per message (perf stat; see
// the changelog).
//
// probeEvery is how often a read in such a run tries first all the same:
// a try that finds its message ends the run. It replaces a clock read
// around every sleep, which told whether the sleep had found its message
// at once.
const (
	skipAfter  = 2
	probeEvery = 8
)

// tryRecv makes a read's try with MSG_DONTWAIT: op's, or if op is nil
// ow's callback (a batch's).
func tryRecv(op *msgOp, ow *opWait, fd int) bool {
	if op != nil {
		return op.doRecv(uintptr(fd))
	}
	return ow.f(uintptr(fd))
}

// pollErr normalises an error from the runtime poller: after Close it is
// net.ErrClosed, as for the net package's sockets.
func (c *Conn) pollErr(err error) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	return err
}

// ReadFrom implements net.PacketConn: it receives one message's data. It
// skips 0-byte notices that carry only control data (they have no sender;
// use ReadMsg to see them). A message longer than p returns what fit with
// an error matching ErrTruncated.
func (c *Conn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, _, flags, from, err := c.readMsg(nil, p, nil, 0)
		if err != nil && flags == 0 {
			return 0, nil, err // a failed receive, not a truncated one
		}
		if n == 0 && !from.IsValid() && flags&unix.MSG_TRUNC == 0 {
			continue // a control-only notice
		}
		if flags&unix.MSG_TRUNC == 0 {
			err = nil // only control data was cut, and none was asked for
		}
		return n, addrOrNil(from), err
	}
}

// WriteTo implements net.PacketConn: it sends p as one message to addr,
// which may be an *Addr, a *net.UDPAddr, or anything whose String is
// "ip:port".
func (c *Conn) WriteTo(p []byte, addr net.Addr) (int, error) {
	if addr == nil {
		return 0, opError("write", c.LocalAddr(), nil, errInvalidAddr)
	}
	ap, ok := addrPortOf(addr)
	if !ok || !ap.IsValid() {
		return 0, opError("write", c.LocalAddr(), addr, errInvalidAddr)
	}
	return c.writeMsg(nil, p, nil, ap, 0)
}

// Write sends b to the address set with Connect.
func (c *Conn) Write(b []byte) (int, error) {
	if c.peer.Load() == nil {
		return 0, opError("write", c.LocalAddr(), nil, unix.EDESTADDRREQ)
	}
	return c.writeMsg(nil, b, nil, netip.AddrPort{}, 0)
}

func addrOrNil(ap netip.AddrPort) net.Addr {
	if !ap.IsValid() {
		return nil
	}
	return &Addr{ap}
}

// rawResult decodes what unix.RawSyscallNoError returned where rawNoError
// holds: a value in [-4095, -1] is an error, the result then ^uintptr(0)
// as from syscall.RawSyscall6.
func rawResult(r uintptr) (uintptr, unix.Errno) {
	if r > ^uintptr(4095) { // -4096
		return ^uintptr(0), unix.Errno(-r)
	}
	return r, 0
}
