//go:build linux

package rdmaops

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// GetMR registers s for remote access with the RDS_GET_MR socket option
// and returns the registration, announced to no peer yet: send its cookie
// with Announce (an RDS_CMSG_RDMA_DEST message) or in a message of your
// own. The kernel picks the device from the socket's connections, so the
// socket needs an RDS/IB connection already; GetMRForDest names the peer
// instead. flags are those of Register. Free it with MR.Free.
//
// Only memory this package mapped can be registered: s is a span of a
// Region, which counts the registration as a user until it is freed.
// Current kernels answer EOPNOTSUPP (errors.Is with rdssock.ErrNotSupported
// and syscall.EOPNOTSUPP) on FRWR adapters, Soft-RoCE included; Register
// then uses RDS_CMSG_RDMA_MAP. A socket on another transport than RDS/IB
// gets EOPNOTSUPP too, an unbound one ENOTCONN, and one whose address no
// RDS/IB connection has used yet ENODEV; the error text says which.
func (c *Conn) GetMR(s Span, flags cmsg.Flags) (*MR, error) {
	return c.getMR(netip.AddrPort{}, false, s, flags)
}

// GetMRForDest is GetMR with RDS_GET_MR_FOR_DEST, naming dst, the peer
// the registration is for. Linux up to 7.2 at least ignores dst and
// behaves exactly as RDS_GET_MR (net/rds/rdma.c): the device is still
// found through an RDS/IB connection made from the bound address.
func (c *Conn) GetMRForDest(dst netip.AddrPort, s Span, flags cmsg.Flags) (*MR, error) {
	return c.getMR(dst, true, s, flags)
}

func (c *Conn) getMR(dst netip.AddrPort, forDest bool, s Span, flags cmsg.Flags) (*MR, error) {
	if s.r == nil || s.n == 0 || s.n > MaxTransfer {
		return nil, fmt.Errorf("%w: registration of %d bytes (1 to %d)", ErrBadOp, s.n, MaxTransfer)
	}
	if !s.r.acquire() {
		return nil, fmt.Errorf("%w: registration of a span of a closed region", ErrBadOp)
	}
	ck, err := c.rawGetMR(dst, forDest, s, flags)
	if err != nil {
		s.r.release()
		return nil, err
	}
	c.regs.Add(1)
	return &MR{c: c, cookie: ck, span: s, flags: flags}, nil
}

// rawGetMR issues RDS_GET_MR or RDS_GET_MR_FOR_DEST for s, which the
// caller holds (acquire), and returns the cookie.
func (c *Conn) rawGetMR(dst netip.AddrPort, forDest bool, s Span, flags cmsg.Flags) (cmsg.Cookie, error) {
	sc := c.getScratch() // heap memory for the cookie the kernel writes
	defer c.putScratch(sc)
	vec := rdsabi.Iovec{Addr: s.addr(), Bytes: uint64(s.n)}
	cookieAddr := uint64(uintptr(unsafe.Pointer(&sc.cookie)))
	var err error
	if forDest {
		args := rdsabi.GetMRForDestArgs{Vec: vec, CookieAddr: cookieAddr, Flags: uint64(flags)}
		if err := putSockaddr(&args.DestAddr, dst); err != nil {
			return 0, c.optError("RDS_GET_MR_FOR_DEST", dst, err)
		}
		err = c.setsockopt(rdsabi.OptGetMRForDest, unsafe.Pointer(&args), unsafe.Sizeof(args))
		runtime.KeepAlive(&args)
	} else {
		args := rdsabi.GetMRArgs{Vec: vec, CookieAddr: cookieAddr, Flags: uint64(flags)}
		err = c.setsockopt(rdsabi.OptGetMR, unsafe.Pointer(&args), unsafe.Sizeof(args))
		runtime.KeepAlive(&args)
	}
	runtime.KeepAlive(sc)
	if err != nil {
		name := "RDS_GET_MR"
		if forDest {
			name = "RDS_GET_MR_FOR_DEST"
		}
		if oe, ok := err.(optErrno); ok && oe.errno == unix.EOPNOTSUPP {
			if tr, terr := c.c.Transport(); terr == nil && tr != rdssock.TransportIB {
				oe.transport = tr
				err = oe
			}
		}
		return 0, c.optError(name, dst, err)
	}
	return cmsg.Cookie(sc.cookie), nil
}

// freeMR issues RDS_FREE_MR (a zero cookie flushes the transport's unused
// registrations).
func (c *Conn) freeMR(ck cmsg.Cookie, flags cmsg.Flags) error {
	args := rdsabi.FreeMRArgs{Cookie: uint64(ck), Flags: uint64(flags)}
	err := c.setsockopt(rdsabi.OptFreeMR, unsafe.Pointer(&args), unsafe.Sizeof(args))
	runtime.KeepAlive(&args)
	if err != nil {
		return c.optError("RDS_FREE_MR", netip.AddrPort{}, err)
	}
	return nil
}

// setsockopt sets SOL_RDS option opt to the n bytes at p, through the
// socket's raw connection.
func (c *Conn) setsockopt(opt int, p unsafe.Pointer, n uintptr) error {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	cerr := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_SETSOCKOPT, fd, rdsabi.SOL, uintptr(opt), uintptr(p), n, 0)
	})
	if cerr != nil {
		return cerr
	}
	if errno != 0 {
		return optErrno{errno: errno}
	}
	return nil
}

// optErrno is a registration errno with what to do about it; errors.Is
// matches the errno and, for EOPNOTSUPP, rdssock.ErrNotSupported.
type optErrno struct {
	errno     syscall.Errno
	transport rdssock.Transport // set when EOPNOTSUPP came from a socket not on RDS/IB
}

func (e optErrno) Error() string {
	switch e.errno {
	case unix.EOPNOTSUPP:
		if e.transport != rdssock.TransportAuto {
			return e.errno.Error() + ": only the InfiniBand transport (RDS/IB, RoCE and Soft-RoCE included) registers memory, and this socket uses " + e.transport.String() + ": bind it to an address on an RDMA device"
		}
		return e.errno.Error() + ": this kernel cannot register memory with RDS_GET_MR on FRWR adapters (Soft-RoCE included): use Register, which sends an RDS_CMSG_RDMA_MAP"
	case unix.ENOTCONN:
		return e.errno.Error() + ": the socket is not bound: bind it to an address on an InfiniBand/RoCE device first"
	case unix.ENODEV:
		return e.errno.Error() + ": no RDMA device serves the bound address, or no RDS/IB connection was set up from it yet: bind to an address on an InfiniBand/RoCE device"
	}
	return e.errno.Error()
}

func (e optErrno) Unwrap() []error {
	if e.errno == unix.EOPNOTSUPP {
		return []error{e.errno, rdssock.ErrNotSupported}
	}
	return []error{e.errno}
}

// optError wraps a failed RDS socket option as the package's sockets do:
// a *net.OpError around an *os.SyscallError.
func (c *Conn) optError(name string, dst netip.AddrPort, err error) error {
	if _, ok := err.(optErrno); ok {
		err = os.NewSyscallError("setsockopt("+name+")", err)
	}
	oe := &net.OpError{Op: "setsockopt", Net: "rds", Source: c.c.LocalAddr(), Err: err}
	if dst.IsValid() {
		oe.Addr = &rdssock.Addr{AddrPort: dst}
	}
	return oe
}

// putSockaddr writes dst into b as the sockaddr_in or sockaddr_in6 the
// kernel expects (a v4-mapped address as sockaddr_in).
func putSockaddr(b *[128]uint8, dst netip.AddrPort) error {
	a := dst.Addr()
	if !a.IsValid() {
		return fmt.Errorf("invalid destination address %v", dst)
	}
	*b = [128]uint8{}
	if a.Is4() || a.Is4In6() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(b))
		sa.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], dst.Port())
		sa.Addr = a.Unmap().As4()
		return nil
	}
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(b))
	sa.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], dst.Port())
	sa.Addr = a.As16()
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.Scope_id = uint32(n)
		} else if ifi, err := net.InterfaceByName(z); err == nil {
			sa.Scope_id = uint32(ifi.Index)
		} else {
			return fmt.Errorf("unknown IPv6 zone %q", z)
		}
	}
	return nil
}
