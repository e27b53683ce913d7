//go:build linux

package rdssock

import (
	"context"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: a msghdr and the length the kernel reports.
// Go pads it to the msghdr's alignment as C does: 64 bytes on 64-bit
// ABIs, 32 on 32-bit ones (an explicit tail pad would break the latter).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// batchOp is the state of one recvmmsg or sendmmsg call, pooled like
// msgOp. Its arrays grow to the largest batch seen and are then reused.
type batchOp struct {
	hdrs        []mmsghdr
	iovs        []unix.Iovec
	addrs       []sockaddrBuf
	ctlLens     []int                   // each receive's control buffer size
	ctls        [][congNoticeSpace]byte // see msgOp.ctl
	skipCong    bool                    // see msgOp.skipCong
	numericZone bool                    // see sockaddrBuf.getZone
	flags       int
	dontWait    bool
	waitCong    bool
	sawCong     bool // see msgOp
	spin        busySpin
	n           int
	errno       unix.Errno

	// The op Conn keeps for ReadBatch (kept) leaves its headers prepared
	// for the buffers in bufs, set by prepare; nil after a send.
	kept bool
	bufs []batchBufs

	recv func(fd uintptr) bool
	send func(fd uintptr) bool

	recvWait, sendWait opWait // see msgOp
}

// batchBufs is where one message's data and control data go.
type batchBufs struct {
	buf, oob       *byte
	bufLen, oobLen int
}

func newBatchOp() *batchOp {
	op := new(batchOp)
	op.recv = op.doRecv
	op.send = op.doSend
	op.recvWait.bind(op.recv)
	op.sendWait.bind(op.send)
	return op
}

var batchPool = sync.Pool{New: func() any { return newBatchOp() }}

// getBatch prepares a batch. skipCong (receives only) makes the batch skip
// congestion notices as msgOp does; it gives messages whose OOB is too
// small to hold one the op's own control buffer.
func getBatch(ms []Message, flags int, send, skipCong bool) (*batchOp, error) {
	op := batchPool.Get().(*batchOp)
	if err := op.prepare(ms, send, skipCong); err != nil {
		putBatch(op)
		return nil, err
	}
	op.reset(flags)
	return op, nil
}

// getReadBatch returns the op for a ReadBatch on c: the one c keeps, its
// headers prepared already if ms holds the buffers of its last call, or
// one from the pool while another call has it.
func (c *Conn) getReadBatch(ms []Message, flags int, skipCong bool) (*batchOp, error) {
	if !c.readBatchBusy.CompareAndSwap(false, true) {
		return getBatch(ms, flags, false, skipCong)
	}
	// Only the holder of the flag touches c.readBatch.
	op := c.readBatch
	if op == nil {
		op = newBatchOp()
		op.kept = true
		c.readBatch = op
	}
	if !op.preparedFor(ms, skipCong) {
		_ = op.prepare(ms, false, skipCong) // fails for sends only
	}
	op.reset(flags)
	return op, nil
}

// putReadBatch gives back an op from getReadBatch. The kept one restores
// the header fields recvmmsg wrote, so that it stays prepared.
func (c *Conn) putReadBatch(op *batchOp) {
	if !op.kept {
		putBatch(op)
		return
	}
	if op.errno == 0 && op.n > 0 {
		op.rearm(op.n)
	}
	c.readBatchBusy.Store(false)
}

// prepare points the op's headers at the buffers of ms.
func (op *batchOp) prepare(ms []Message, send, skipCong bool) error {
	if cap(op.hdrs) < len(ms) {
		op.hdrs = make([]mmsghdr, len(ms))
		op.iovs = make([]unix.Iovec, len(ms))
		op.addrs = make([]sockaddrBuf, len(ms))
		op.ctlLens = make([]int, len(ms))
	}
	op.hdrs, op.iovs, op.addrs, op.ctlLens = op.hdrs[:len(ms)], op.iovs[:len(ms)], op.addrs[:len(ms)], op.ctlLens[:len(ms)]
	op.skipCong = skipCong && !send
	if op.skipCong && cap(op.ctls) < len(ms) {
		op.ctls = make([][congNoticeSpace]byte, len(ms))
	}
	op.bufs = op.bufs[:0]
	for i := range ms {
		m, h := &ms[i], &op.hdrs[i]
		*h = mmsghdr{}
		if len(m.Buffer) > 0 {
			op.iovs[i] = unix.Iovec{Base: &m.Buffer[0]}
			op.iovs[i].SetLen(len(m.Buffer))
			h.hdr.Iov = &op.iovs[i]
			h.hdr.SetIovlen(1)
		}
		op.ctlLens[i] = len(m.OOB)
		switch {
		case op.skipCong && len(m.OOB) < congNoticeSpace:
			h.hdr.Control = &op.ctls[i][0]
			op.ctlLens[i] = congNoticeSpace
		case len(m.OOB) > 0:
			h.hdr.Control = &m.OOB[0]
		}
		h.hdr.SetControllen(op.ctlLens[i])
		switch {
		case !send:
			h.hdr.Name = (*byte)(unsafe.Pointer(&op.addrs[i].raw))
			h.hdr.Namelen = unix.SizeofSockaddrInet6
		case m.Addr.IsValid():
			n, err := op.addrs[i].put(m.Addr)
			if err != nil {
				return err
			}
			h.hdr.Name = (*byte)(unsafe.Pointer(&op.addrs[i].raw))
			h.hdr.Namelen = n
		}
	}
	if op.kept && !send {
		for i := range ms {
			op.bufs = append(op.bufs, bufsOf(&ms[i]))
		}
	}
	return nil
}

// bufsOf is where m's data and control data go.
func bufsOf(m *Message) batchBufs {
	return batchBufs{unsafe.SliceData(m.Buffer), unsafe.SliceData(m.OOB), len(m.Buffer), len(m.OOB)}
}

// preparedFor reports whether the op's headers are prepared for receiving
// into the buffers of ms, with skipCong as given.
func (op *batchOp) preparedFor(ms []Message, skipCong bool) bool {
	if len(ms) != len(op.bufs) || skipCong != op.skipCong {
		return false
	}
	bufs := op.bufs[:len(ms)]
	for i := range ms {
		m, b := &ms[i], &bufs[i]
		if unsafe.SliceData(m.Buffer) != b.buf || len(m.Buffer) != b.bufLen || unsafe.SliceData(m.OOB) != b.oob || len(m.OOB) != b.oobLen {
			return false
		}
	}
	return true
}

// reset readies a prepared op for a call with flags.
func (op *batchOp) reset(flags int) {
	op.flags = flags | unix.MSG_DONTWAIT // the descriptor blocks: see kernelSocket
	op.dontWait = flags&unix.MSG_DONTWAIT != 0
	op.waitCong, op.sawCong = false, false
	op.spin = busySpin{}
	op.n, op.errno = 0, 0
}

// putBatch drops the references to the caller's buffers before pooling.
func putBatch(op *batchOp) {
	clear(op.hdrs)
	clear(op.iovs)
	batchPool.Put(op)
}

func (op *batchOp) doRecv(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&op.hdrs[0])), uintptr(len(op.hdrs)), uintptr(op.flags), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN && !op.dontWait {
			if op.spin.limit > 0 && op.spin.again() { // the check inline: most sockets do not spin
				continue
			}
			return false
		}
		if e == 0 && op.skipCong && op.onlyCongNotices(int(n)) {
			op.rearm(int(n))
			continue // nothing but the library's own wake-ups: receive again
		}
		op.n, op.errno = int(n), e
		return true
	}
}

// recvBlocking is one recvmmsg that sleeps for its first message
// (MSG_WAITFORONE without MSG_DONTWAIT) and then takes those already
// queued: the solo read's sleep in the kernel for a batch, as
// msgOp.recvBlocking is for one message, and reporting the same way.
func (op *batchOp) recvBlocking(fd uintptr) (done bool, e unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&op.hdrs[0])), uintptr(len(op.hdrs)),
		uintptr(op.flags&^unix.MSG_DONTWAIT|unix.MSG_WAITFORONE), 0, 0)
	switch e {
	case unix.EAGAIN, unix.ETIMEDOUT, unix.EINTR:
		return false, e
	}
	if e == 0 && op.skipCong && op.onlyCongNotices(int(n)) {
		op.rearm(int(n))
		return false, 0
	}
	op.n, op.errno = int(n), e
	return true, e
}

func (op *batchOp) isCongNotice(i int) bool {
	return isCongNotice(int(op.hdrs[i].len), &op.hdrs[i].hdr)
}

func (op *batchOp) onlyCongNotices(n int) bool {
	for i := range n {
		if !op.isCongNotice(i) {
			return false
		}
	}
	return true
}

// rearm restores the fields recvmmsg wrote in the first n headers.
func (op *batchOp) rearm(n int) {
	for i := range n {
		h := &op.hdrs[i]
		h.hdr.Namelen = unix.SizeofSockaddrInet6
		h.hdr.SetControllen(op.ctlLens[i])
		h.hdr.Flags, h.len = 0, 0
	}
}

// fill sets ms[:n] from the batch's first n receives and returns how many
// messages that is. Congestion notices the batch skips are left out and
// the later messages move down, data and control data copied to the
// earlier slot. If some message would not fit the slot it would move to
// (smaller buffers there), nothing moves: each notice then stays as an
// entry with N and NN 0, no Flags and a zero Addr.
func (op *batchOp) fill(ms []Message, n int) int {
	if !op.skipCong || !op.anyCongNotice(n) {
		// Nothing to leave out, the common case: each message stays.
		for i := range n {
			op.fillOne(ms, i, i)
		}
		return n
	}
	compact := op.fitsCompacted(ms, n)
	out := 0
	for i := range n {
		if op.isCongNotice(i) {
			if !compact {
				ms[i].N, ms[i].NN, ms[i].Flags, ms[i].Addr = 0, 0, 0, netip.AddrPort{}
				out++
			}
			continue
		}
		op.fillOne(ms, i, out)
		out++
	}
	return out
}

// fillOne sets ms[out] from receive i (out <= i), moving the data and
// control data down if out is an earlier slot.
func (op *batchOp) fillOne(ms []Message, i, out int) {
	h, m := &op.hdrs[i], &ms[out]
	m.N, m.NN, m.Flags = int(h.len), int(h.hdr.Controllen), int(h.hdr.Flags)
	m.Addr = op.addrs[i].getZone(h.hdr.Namelen, op.numericZone)
	if out != i {
		copy(m.Buffer, ms[i].Buffer[:min(m.N, len(ms[i].Buffer))])
	}
	if out != i || op.ownControl(ms, i) {
		if ctl := op.control(ms, i); len(ctl) > len(m.OOB) {
			m.NN, m.Flags = 0, m.Flags|unix.MSG_CTRUNC // as the kernel says it
		} else {
			m.NN = copy(m.OOB, ctl)
		}
	}
}

// anyCongNotice reports whether a congestion notice is among the first n
// receives.
func (op *batchOp) anyCongNotice(n int) bool {
	for i := range n {
		if op.isCongNotice(i) {
			return true
		}
	}
	return false
}

// ownControl reports whether ms[i]'s control data went to the op's own
// buffer (see getBatch).
func (op *batchOp) ownControl(ms []Message, i int) bool {
	return op.skipCong && len(ms[i].OOB) < congNoticeSpace
}

// control returns the control data received for ms[i].
func (op *batchOp) control(ms []Message, i int) []byte {
	nn := int(op.hdrs[i].hdr.Controllen)
	if op.ownControl(ms, i) {
		return op.ctls[i][:nn]
	}
	return ms[i].OOB[:nn]
}

// fitsCompacted reports whether leaving out the notices among the first n
// receives moves every later message into a slot that holds it.
func (op *batchOp) fitsCompacted(ms []Message, n int) bool {
	out := 0
	for i := range n {
		if op.isCongNotice(i) {
			continue
		}
		if out != i {
			nn := len(op.control(ms, i))
			ctlFits := nn <= len(ms[out].OOB) || nn > len(ms[i].OOB) // else cut in either slot
			if min(int(op.hdrs[i].len), len(ms[i].Buffer)) > len(ms[out].Buffer) || !ctlFits {
				return false
			}
		}
		out++
	}
	return true
}

// doSend sends the batch with one sendmsg per message. sendmmsg cannot be
// used: it sets MSG_BATCH on all but the last message, and rds_sendmsg
// rejects every flag but MSG_DONTWAIT and MSG_ZEROCOPY with EOPNOTSUPP. The
// loop still runs in one poller callback, so a batch waits and wakes once.
func (op *batchOp) doSend(fd uintptr) bool {
	for tries := 0; op.n < len(op.hdrs); {
		h := &op.hdrs[op.n]
		n, e := sendmsg(fd, &h.hdr, op.flags)
		switch {
		case e == 0:
			h.len = uint32(n)
			op.n++
			continue
		case e == unix.EINTR:
			continue
		case e == unix.ENOBUFS && op.waitCong:
			op.sawCong = true
			return false // congested: wait, keeping the messages sent so far
		case op.n > 0:
			return true // report the messages sent; the next call meets the error
		case e == unix.EAGAIN && !op.dontWait:
			if !writable(fd) {
				return false
			}
			if tries++; tries <= sendRetries {
				continue
			}
		}
		op.errno = e
		return true
	}
	return true
}

// ReadBatch receives up to len(ms) messages with one recvmmsg call. It
// waits for the first message, then takes those already queued, and
// returns how many it filled; each Message gets its N, NN, Flags and Addr.
// Like ReadMsg it treats 0-byte messages as messages, and skips the
// congestion notices of Config.WaitCongested. A truncated message is
// reported in its Flags, not as an error, so that the rest of the batch is
// not lost. ctx must not be nil: context.Background() waits without one.
func (c *Conn) ReadBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	if ctx == nil {
		return 0, opError("read", c.LocalAddr(), nil, errNilContext)
	}
	if len(ms) == 0 {
		return 0, nil
	}
	op, err := c.getReadBatch(ms, flags, c.ownsCongNotices())
	if err != nil {
		return 0, opError("read", c.LocalAddr(), nil, err)
	}
	op.numericZone = c.otherNS
	op.spin.limit = time.Duration(c.busyPoll.Load())
	if ctx == context.Background() {
		ctx = nil // as for ReadMsg: no context to watch
	}
	var perr error
	done, blocked := false, time.Duration(-1)
	if w := c.k.waits.Load(); skipping(w) && op.spin.limit == 0 && !op.dontWait {
		done, blocked = c.recvSkipping(ctx, nil, op, w)
	}
	if !done {
		perr = c.recvWait(ctx, nil, op, &op.recvWait, blocked)
	}
	n, errno := op.n, op.errno
	if perr == nil && errno == 0 {
		n = op.fill(ms, n)
	}
	c.putReadBatch(op)
	switch {
	case perr != nil:
		return 0, opError("read", c.LocalAddr(), nil, c.pollErr(perr))
	case errno != 0:
		return 0, opError("read", c.LocalAddr(), nil, wrapSyscall("recvmmsg", errno, ""))
	}
	return n, nil
}

// WriteBatch sends the messages in order and returns how many the kernel
// accepted. RDS refuses sendmmsg (it rejects the MSG_BATCH flag sendmmsg
// adds), so WriteBatch issues one sendmsg per message, all within a single
// wait in the runtime poller. When it accepted some but not all,
// the error is nil and the next call reports what stopped it (for example
// ErrCongested). With Config.WaitCongested the batch waits out congestion
// instead; if that wait ends early (deadline, context, Close) the count of
// messages already accepted comes with the error. Like WriteMsg, it first
// brings up the connection to each new peer. ctx must not be nil:
// context.Background() waits without one.
func (c *Conn) WriteBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	if ctx == nil {
		return 0, opError("write", c.LocalAddr(), nil, errNilContext)
	}
	if len(ms) == 0 {
		return 0, nil
	}
	for i := range ms {
		if err := c.warmedUp(ctx, ms[i].Addr, flags); err != nil {
			return 0, opError("write", c.LocalAddr(), addrOrNil(ms[i].Addr), c.pollErr(err))
		}
	}
	op, err := getBatch(ms, flags, true, false)
	if err != nil {
		return 0, opError("write", c.LocalAddr(), nil, err)
	}
	op.waitCong = !op.dontWait && c.waitCongested.Load()
	perr := c.wait(ctx, true, &op.sendWait)
	n, errno := op.n, op.errno
	for i := range n {
		ms[i].N = int(op.hdrs[i].len)
	}
	if op.sawCong || errno == unix.ENOBUFS {
		c.congestedSends.Add(1)
	}
	putBatch(op)
	switch {
	case perr != nil:
		// A wait for congestion to clear can end (deadline, close) after
		// some messages were accepted: report them with the error.
		return n, opError("write", c.LocalAddr(), nil, c.pollErr(perr))
	case errno != 0:
		return 0, opError("write", c.LocalAddr(), nil, wrapSyscall("sendmsg", errno, ""))
	}
	return n, nil
}
