//go:build linux

package rdssock

import (
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/go-rds/rds/internal/sendlink"
	"golang.org/x/sys/unix"
)

func init() {
	sendlink.Try = func(conn unsafe.Pointer, b, oob []byte, to netip.AddrPort) bool {
		return (*Conn)(conn).sendQuick(b, oob, to)
	}
}

// sendQuick is sendlink.Try: rdmaops' first attempt at each operation's
// message. It uses the Conn's own send state (Conn.op), and only when it
// already holds to's encoded address, where WriteMsgContext takes a
// context, resets the whole state, looks at deadlines and congestion
// settings and walks the control data for a registration: in all about
// 300 instructions of each RDMA operation (integration/cmd/rdsinstr).
func (c *Conn) sendQuick(b, oob []byte, to netip.AddrPort) bool {
	if !c.warmReady(to) {
		return false // WriteMsgContext warms the connection up
	}
	if !c.opBusy[1].CompareAndSwap(false, true) {
		return false
	}
	sent := false
	if op := c.op[1]; op != nil && (op.saTo == to || !to.IsValid()) && c.k.acquire() {
		h := &op.hdr
		h.Name, h.Namelen = nil, 0 // the address set with Connect
		if to.IsValid() {
			h.Name, h.Namelen = (*byte)(unsafe.Pointer(&op.sa.raw)), op.saLen
		}
		h.Iov, h.Iovlen = nil, 0
		if len(b) > 0 {
			op.iov.Base = &b[0]
			op.iov.SetLen(len(b))
			h.Iov = &op.iov
			h.SetIovlen(1)
		}
		h.Control, h.Controllen = nil, 0
		if len(oob) > 0 {
			h.Control = &oob[0]
			h.SetControllen(len(oob))
		}
		h.Flags = 0
		var e unix.Errno
		if rawNoError {
			r, _ := unix.RawSyscallNoError(unix.SYS_SENDMSG, uintptr(c.k.fd), uintptr(unsafe.Pointer(h)), unix.MSG_DONTWAIT)
			_, e = rawResult(r)
		} else {
			_, _, e = syscall.RawSyscall6(unix.SYS_SENDMSG, uintptr(c.k.fd), uintptr(unsafe.Pointer(h)), unix.MSG_DONTWAIT, 0, 0, 0)
		}
		c.k.release()
		op.iov.Base, h.Control = nil, nil
		sent = e == 0
	}
	c.opBusy[1].Store(false)
	return sent
}

// warmReady reports whether a send to to (zero: the address set with
// Connect) needs no warm-up now, as Conn.warmedUp decides without waiting.
func (c *Conn) warmReady(to netip.AddrPort) bool {
	if c.warm.off.Load() {
		return true
	}
	if !to.IsValid() {
		p := c.peer.Load()
		if p == nil {
			return true
		}
		to = p.AddrPort
	}
	return to.Port() == 0 || c.warm.isReady(to.Addr())
}
