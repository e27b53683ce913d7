//go:build linux

package bench

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/rdssock"
)

// rawIO is a diagnostic variant of rdssock's message path (worker
// argument raw=1): it waits in the same runtime poller, through
// Conn.SyscallConn, but issues sendmsg and recvmsg with unix.RawSyscall,
// which skips the runtime's entersyscall/exitsyscall bookkeeping. On a
// non-blocking socket these calls never sleep, so the goroutine keeps its
// P and the scheduler has nothing to hand off. Comparing it with the plain
// Go worker shows what that bookkeeping costs; it is not a recommendation
// to call RawSyscall for calls that can block.
//
// With blocking set (worker argument raw=2) the socket is switched to
// blocking mode and the calls are plain unix.Syscall outside the poller,
// as in a C program: the thread sleeps in the kernel instead of the
// goroutine parking in the poller.
type rawIO struct {
	rc       syscall.RawConn
	blocking bool
	fd       uintptr
	hdr      unix.Msghdr
	iov      unix.Iovec
	name     unix.RawSockaddrInet6
	n        int
	errno    unix.Errno
	recvFn   func(fd uintptr) bool
	sendFn   func(fd uintptr) bool
	sendHdr  unix.Msghdr
	sendIov  unix.Iovec
	dst      unix.RawSockaddrInet4
	// sendWaits counts sends that found the send buffer full (EAGAIN)
	// and waited in the poller.
	sendWaits uint64
}

func newRawIO(c *rdssock.Conn, blocking bool) (*rawIO, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &rawIO{rc: rc, blocking: blocking}
	r.recvFn = r.doRecv
	r.sendFn = r.doSend
	if blocking {
		var serr error
		err := rc.Control(func(fd uintptr) {
			r.fd = fd
			serr = unix.SetNonblock(int(fd), false)
		})
		if err != nil {
			return nil, err
		}
		if serr != nil {
			return nil, serr
		}
	}
	return r, nil
}

// call issues a blocking system call on the socket (blocking mode).
func (r *rawIO) call(trap uintptr, h *unix.Msghdr) {
	for {
		n, _, e := unix.Syscall(trap, r.fd, uintptr(unsafe.Pointer(h)), 0)
		if e == unix.EINTR {
			continue
		}
		r.n, r.errno = int(n), e
		return
	}
}

func (r *rawIO) doRecv(fd uintptr) bool {
	n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.hdr)), 0)
	if e == unix.EAGAIN {
		return false
	}
	r.n, r.errno = int(n), e
	return true
}

func (r *rawIO) doSend(fd uintptr) bool {
	n, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&r.sendHdr)), 0)
	if e == unix.EAGAIN {
		r.sendWaits++
		return false
	}
	r.n, r.errno = int(n), e
	return true
}

// read receives one message into b and control data into oob. It returns
// the data length, the control length, the recvmsg flags and whether the
// message has a sender.
func (r *rawIO) read(b, oob []byte) (n, oobn, flags int, named bool, err error) {
	r.hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.name)), Namelen: unix.SizeofSockaddrInet6}
	if len(b) > 0 {
		r.iov = unix.Iovec{Base: &b[0]}
		r.iov.SetLen(len(b))
		r.hdr.Iov = &r.iov
		r.hdr.SetIovlen(1)
	}
	if len(oob) > 0 {
		r.hdr.Control = &oob[0]
		r.hdr.SetControllen(len(oob))
	}
	for {
		if r.blocking {
			r.call(unix.SYS_RECVMSG, &r.hdr)
		} else if err := r.rc.Read(r.recvFn); err != nil {
			return 0, 0, 0, false, err
		}
		if r.errno == unix.EINTR {
			continue
		}
		if r.errno != 0 {
			return 0, 0, 0, false, r.errno
		}
		return r.n, int(r.hdr.Controllen), int(r.hdr.Flags), r.hdr.Namelen > 0, nil
	}
}

// setDest sets the destination of write.
func (r *rawIO) setDest(ap netip.AddrPort) {
	r.dst = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().Unmap().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&r.dst.Port))[:], ap.Port())
}

// replyToLast sets the destination of write to the sender of the message
// read last (IPv4).
func (r *rawIO) replyToLast() {
	r.dst = *(*unix.RawSockaddrInet4)(unsafe.Pointer(&r.name))
}

// write sends b to the destination set last. A congested destination
// (ENOBUFS) is returned as the errno.
func (r *rawIO) write(b []byte) error {
	r.sendHdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.dst)), Namelen: unix.SizeofSockaddrInet4}
	if len(b) > 0 {
		r.sendIov = unix.Iovec{Base: &b[0]}
		r.sendIov.SetLen(len(b))
		r.sendHdr.Iov = &r.sendIov
		r.sendHdr.SetIovlen(1)
	}
	for {
		if r.blocking {
			r.call(unix.SYS_SENDMSG, &r.sendHdr)
		} else if err := r.rc.Write(r.sendFn); err != nil {
			return err
		}
		if r.errno == unix.EINTR {
			continue
		}
		if r.errno != 0 {
			return r.errno
		}
		return nil
	}
}
