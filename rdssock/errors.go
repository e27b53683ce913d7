package rdssock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Sentinel errors for the failures callers branch on. Every error returned
// by a Conn is a *net.OpError (Net "rds") wrapping an *os.SyscallError; when
// the errno is one of the cases below, errors.Is reports both the sentinel
// and the plain errno (for example syscall.ENOBUFS).
var (
	// ErrUnavailable means the kernel has no AF_RDS (EAFNOSUPPORT): the rds
	// modules are not loaded, or the kernel was built without them.
	ErrUnavailable = errors.New("RDS is not available in this kernel: load a transport module (modprobe rds_tcp, or modprobe rds_rdma for InfiniBand/RoCE)")

	// ErrCongested means the destination port is congested (ENOBUFS). The
	// message was not queued. Wait for a congestion update (see
	// Config.CongestionMonitor) or poll for writability, then retry.
	ErrCongested = errors.New("destination port is congested; retry after a congestion update")

	// ErrMessageTooLarge means the message exceeds what the socket can queue
	// (EMSGSIZE). RDS limits a message to about half of the send buffer
	// (SO_SNDBUF) and to 1 MiB in any case.
	ErrMessageTooLarge = errors.New("message too large: RDS accepts at most half the send buffer (raise Config.SendBuffer) and never more than 1 MiB")

	// ErrTransportUnavailable means no usable transport serves the address
	// (ENOPROTOOPT at bind or SO_RDS_TRANSPORT): the transport's module is
	// not loaded, or, for InfiniBand, no RDMA device carries that address.
	ErrTransportUnavailable = errors.New("no RDS transport available for this address: load rds_tcp, or for InfiniBand load rds_rdma and put the address on an RDMA-capable device")

	// ErrNotSupported means the bound transport cannot do the operation
	// (EOPNOTSUPP), for example RDMA control messages on RDS/TCP, or
	// changing the transport of a socket that already has one.
	ErrNotSupported = errors.New("operation not supported by this RDS transport")

	// ErrTruncated is returned together with the data that did fit when a
	// received message (MSG_TRUNC) or its control messages (MSG_CTRUNC) did
	// not fit the caller's buffers. RDS discards the rest of the message.
	ErrTruncated = errors.New("message truncated: receive buffer too small")
)

// rdsErrno is an errno annotated with the sentinel it stands for (if any)
// and advice for the user. errors.Is matches both the sentinel and the
// errno.
type rdsErrno struct {
	errno    syscall.Errno
	sentinel error
	detail   string
	wrapped  [2]error // what Unwrap returns, built once
}

func (e *rdsErrno) Error() string {
	if e.detail != "" {
		return e.errno.Error() + ": " + e.detail
	}
	return e.errno.Error() + ": " + e.sentinel.Error()
}

// Unwrap returns the errno and, if there is one, the sentinel. It returns
// a slice of a field so that errors.Is does not allocate on each walk.
func (e *rdsErrno) Unwrap() []error {
	if e.sentinel == nil {
		return e.wrapped[:1]
	}
	return e.wrapped[:2]
}

// newRDSErrno builds an rdsErrno with its Unwrap slice filled in, so that
// Unwrap only reads and is safe for concurrent use.
func newRDSErrno(errno syscall.Errno, sentinel error, detail string) *rdsErrno {
	e := &rdsErrno{errno: errno, sentinel: sentinel, detail: detail}
	if sentinel == nil {
		e.wrapped[0] = errno
	} else {
		e.wrapped[0], e.wrapped[1] = sentinel, errno
	}
	return e
}

// sentinelFor returns the sentinel an errno maps to for the named system
// call, or nil. Some errnos only carry their RDS meaning for certain calls:
// ENOPROTOOPT from an unknown socket option is not a transport problem.
func sentinelFor(syscallName string, errno syscall.Errno) error {
	switch errno {
	case syscall.EAFNOSUPPORT:
		if syscallName == "socket" {
			return ErrUnavailable
		}
	case syscall.ENOBUFS:
		if syscallName == "sendmsg" || syscallName == "sendmmsg" {
			return ErrCongested
		}
	case syscall.EMSGSIZE:
		return ErrMessageTooLarge
	case syscall.ENOPROTOOPT:
		if syscallName == "bind" || syscallName == "setsockopt(SO_RDS_TRANSPORT)" {
			return ErrTransportUnavailable
		}
	case syscall.EOPNOTSUPP:
		return ErrNotSupported
	}
	return nil
}

// wrapSyscall turns a raw errno from syscallName into an *os.SyscallError,
// annotated with its sentinel where one applies. detail, if not empty,
// replaces the sentinel's generic advice.
func wrapSyscall(syscallName string, err error, detail string) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if s := sentinelFor(syscallName, errno); s != nil || detail != "" {
			return os.NewSyscallError(syscallName, newRDSErrno(errno, s, detail))
		}
		return os.NewSyscallError(syscallName, errno)
	}
	return err
}

// opError builds the *net.OpError returned by Conn methods.
func opError(op string, source, addr net.Addr, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrClosed) {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: network, Source: source, Addr: addr, Err: err}
}

// tooLargeDetail explains EMSGSIZE for a send of n bytes.
func tooLargeDetail(n, sndbuf int) string {
	if sndbuf > 0 {
		return fmt.Sprintf("message of %d bytes exceeds the limit of about %d bytes (half of SO_SNDBUF=%d; 1 MiB at most): raise Config.SendBuffer or split the message", n, sndbuf/2, sndbuf)
	}
	return fmt.Sprintf("message of %d bytes exceeds the limit (half of SO_SNDBUF, 1 MiB at most): raise Config.SendBuffer or split the message", n)
}

// errInvalidAddr is returned for a zero netip.AddrPort where an address is
// required.
var errInvalidAddr = errors.New("invalid address: want an IPv4 or IPv6 address and port, for example 10.0.0.1:4000")

// errNilContext is returned by the methods that take a context when given
// nil (net/http refuses a nil context too).
var errNilContext = errors.New("nil context: pass context.Background() to wait without one")

// zoneError reports an IPv6 zone that names no interface.
type zoneError struct{ zone string }

func (e *zoneError) Error() string {
	return fmt.Sprintf("unknown IPv6 zone %q: use an interface name or index (link-local RDS addresses need one)", e.zone)
}
