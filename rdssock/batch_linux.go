//go:build linux

package rdssock

import (
	"context"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: a msghdr and the length the kernel reports.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// batchOp is the state of one recvmmsg or sendmmsg call, pooled like
// msgOp. Its arrays grow to the largest batch seen and are then reused.
type batchOp struct {
	hdrs     []mmsghdr
	iovs     []unix.Iovec
	addrs    []sockaddrBuf
	flags    int
	dontWait bool
	waitCong bool
	spin     busySpin
	n        int
	errno    unix.Errno

	recv func(fd uintptr) bool
	send func(fd uintptr) bool
}

var batchPool = sync.Pool{New: func() any {
	op := new(batchOp)
	op.recv = op.doRecv
	op.send = op.doSend
	return op
}}

func getBatch(ms []Message, flags int, send bool) (*batchOp, error) {
	op := batchPool.Get().(*batchOp)
	if cap(op.hdrs) < len(ms) {
		op.hdrs = make([]mmsghdr, len(ms))
		op.iovs = make([]unix.Iovec, len(ms))
		op.addrs = make([]sockaddrBuf, len(ms))
	}
	op.hdrs, op.iovs, op.addrs = op.hdrs[:len(ms)], op.iovs[:len(ms)], op.addrs[:len(ms)]
	for i := range ms {
		m, h := &ms[i], &op.hdrs[i]
		*h = mmsghdr{}
		if len(m.Buffer) > 0 {
			op.iovs[i] = unix.Iovec{Base: &m.Buffer[0]}
			op.iovs[i].SetLen(len(m.Buffer))
			h.hdr.Iov = &op.iovs[i]
			h.hdr.SetIovlen(1)
		}
		if len(m.OOB) > 0 {
			h.hdr.Control = &m.OOB[0]
			h.hdr.SetControllen(len(m.OOB))
		}
		switch {
		case !send:
			h.hdr.Name = (*byte)(unsafe.Pointer(&op.addrs[i].raw))
			h.hdr.Namelen = unix.SizeofSockaddrInet6
		case m.Addr.IsValid():
			n, err := op.addrs[i].put(m.Addr)
			if err != nil {
				putBatch(op)
				return nil, err
			}
			h.hdr.Name = (*byte)(unsafe.Pointer(&op.addrs[i].raw))
			h.hdr.Namelen = n
		}
	}
	op.flags = flags
	op.dontWait = flags&unix.MSG_DONTWAIT != 0
	op.waitCong = false
	op.spin = busySpin{}
	op.n, op.errno = 0, 0
	return op, nil
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
			if op.spin.again() {
				continue
			}
			return false
		}
		op.n, op.errno = int(n), e
		return true
	}
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
// Like ReadMsg it treats 0-byte messages as messages. A truncated message
// is reported in its Flags, not as an error, so that the rest of the batch
// is not lost. ctx may be nil.
func (c *Conn) ReadBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	op, err := getBatch(ms, flags, false)
	if err != nil {
		return 0, opError("read", c.LocalAddr(), nil, err)
	}
	op.spin.limit = time.Duration(c.busyPoll.Load())
	perr := c.wait(ctx, false, op.recv)
	n, errno := op.n, op.errno
	if perr == nil && errno == 0 {
		for i := range n {
			h, m := &op.hdrs[i], &ms[i]
			m.N, m.NN, m.Flags = int(h.len), int(h.hdr.Controllen), int(h.hdr.Flags)
			m.Addr = op.addrs[i].get(h.hdr.Namelen)
		}
	}
	putBatch(op)
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
// messages already accepted comes with the error. ctx may be nil.
func (c *Conn) WriteBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	op, err := getBatch(ms, flags, true)
	if err != nil {
		return 0, opError("write", c.LocalAddr(), nil, err)
	}
	op.waitCong = !op.dontWait && c.waitCongested.Load()
	perr := c.wait(ctx, true, op.send)
	n, errno := op.n, op.errno
	for i := range n {
		ms[i].N = int(op.hdrs[i].len)
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
