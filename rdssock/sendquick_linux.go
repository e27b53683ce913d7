//go:build linux

package rdssock

import (
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/go-rds/rds/internal/sendlink"
	"golang.org/x/sys/unix"
)

func init() { sendlink.Try = sendQuick }

// sendQuick is sendlink.Try, conn a *Conn: rdmaops' first attempt at each
// operation's message. It uses the Conn's own send state (Conn.op), and
// only when that already holds to's encoded address, where
// WriteMsgContext takes a context, resets the whole state, looks at
// deadlines and congestion settings and walks the control data for a
// registration: in all about 300 instructions of each RDMA operation
// (integration/cmd/rdsinstr). Each field of the header is written once,
// as every pointer written costs a write-barrier check.
func sendQuick(conn unsafe.Pointer, b, oob []byte, to netip.AddrPort) bool {
	c := (*Conn)(conn)
	if !c.warm.off.Load() && !c.warmReady(to) {
		return false // WriteMsgContext warms the connection up
	}
	if !c.opBusy[1].CompareAndSwap(false, true) {
		return false
	}
	sent := false
	if op := c.op[1]; op != nil && (op.saTo == to || !to.IsValid()) && c.k.acquire() {
		h := &op.hdr
		var name *byte // nil: the address set with Connect
		var namelen uint32
		if to.IsValid() {
			name, namelen = (*byte)(unsafe.Pointer(&op.sa.raw)), op.saLen
		}
		h.Name, h.Namelen = name, namelen
		op.setBuffers(b, oob)
		h.SetControllen(len(oob))
		h.Flags = 0
		var e unix.Errno // sendmsg's RawSyscall, written out as in doSend
		if rawNoError {
			r, _ := unix.RawSyscallNoError(unix.SYS_SENDMSG, uintptr(c.k.fd), uintptr(unsafe.Pointer(h)), unix.MSG_DONTWAIT)
			_, e = rawResult(r)
		} else {
			_, _, e = syscall.RawSyscall6(unix.SYS_SENDMSG, uintptr(c.k.fd), uintptr(unsafe.Pointer(h)), unix.MSG_DONTWAIT, 0, 0, 0)
		}
		c.k.release()
		op.iov.Base, h.Control = nil, nil // as putOp does
		sent = e == 0
	}
	c.opBusy[1].Store(false)
	return sent
}

// warmReady reports whether a send to to (zero: the address set with
// Connect) on a Conn that warms up connections needs no warm-up now, as
// Conn.warmedUp decides without waiting. (warmedUp makes the same checks
// itself: a call more there cost every WriteMsg about 20 instructions.)
func (c *Conn) warmReady(to netip.AddrPort) bool {
	if !to.IsValid() {
		p := c.peer.Load()
		if p == nil {
			return true
		}
		to = p.AddrPort
	}
	return to.Port() == 0 || c.warm.isReady(to.Addr())
}
