//go:build linux

package rdssock

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is an RDS socket. It is safe for concurrent use: several goroutines
// may send and receive at once. Reads and writes that must wait sleep in
// the kernel or park in the Go runtime poller (see the package
// documentation), honour deadlines, and have context variants.
type Conn struct {
	k *kfd

	local   atomic.Pointer[Addr]
	peer    atomic.Pointer[Addr] // default destination set by Connect
	closed  atomic.Bool
	otherNS bool // created in Config.NetNS: sender zones are given by index

	waitCongested     atomic.Bool  // Config.WaitCongested is in force
	congNoticesWanted atomic.Bool  // the caller asked for congestion notices
	busyPoll          atomic.Int64 // Config.BusyPoll in nanoseconds

	readDeadline, writeDeadline deadlineMux

	// An op kept for the reads ([0]) and the writes ([1]); opBusy[i] is
	// set while a call uses op[i] (allocated by its first user).
	op     [2]*msgOp
	opBusy [2]atomic.Bool
	// The op kept for ReadBatch, likewise. Its headers stay prepared for
	// the buffers of its last call (so it keeps them reachable until the
	// next call with others): a loop that reads into the same messages
	// call after call prepares them once.
	readBatch     *batchOp
	readBatchBusy atomic.Bool

	warm warmUps // automatic warm-ups (Config.NoAutoWarmUp)

	congestedSends atomic.Uint64 // see CongestedSends
}

// Socket creates an unbound RDS socket with cfg applied (nil means
// defaults). Most programs call Listen instead; Socket is for reading the
// kernel's info tables, which needs no bound address, and for callers who
// bind later with Bind.
func Socket(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	fd, err := kernelSocket(cfg.NetNS)
	if err != nil {
		return nil, opError("socket", nil, nil, wrapSyscall("socket", unwrapSyscall(err), ""))
	}
	c := newConn(newKfd(fd))
	c.otherNS = cfg.NetNS != 0
	if err := c.applyConfig(cfg); err != nil {
		c.closeFD()
		return nil, err
	}
	if err := c.initWarmUps(cfg); err != nil {
		c.closeFD()
		return nil, err
	}
	return c, nil
}

// newConn returns a Conn on k.
func newConn(k *kfd) *Conn {
	c := &Conn{k: k}
	c.readDeadline.set, c.writeDeadline.set = k.setReadDeadline, k.setWriteDeadline
	return c
}

// closeFD closes the descriptor.
func (c *Conn) closeFD() error { return c.k.close() }

// Listen creates an RDS socket bound to addr with cfg applied before bind
// (nil means defaults). RDS has no connections to accept: a bound socket
// sends to and receives from any peer. Port 0 picks a free port; LocalAddr
// tells which. IPv6 link-local addresses need a zone.
func Listen(addr netip.AddrPort, cfg *Config) (*Conn, error) {
	c, err := Socket(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Bind(addr); err != nil {
		c.Close()
		return nil, err
	}
	if cfg != nil && cfg.TOS != 0 {
		if err := c.SetTOS(cfg.TOS); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Bind binds an unbound socket to addr. The transport is attached here:
// the one set in Config.Transport, or the first whose address check passes.
func (c *Conn) Bind(addr netip.AddrPort) error {
	sa, err := toSockaddr(addr)
	if err != nil {
		return opError("bind", nil, &Addr{addr}, err)
	}
	if err := c.bind(sa); err != nil {
		return opError("bind", nil, &Addr{addr}, wrapSyscall("bind", unwrapSyscall(err), bindDetail(addr, err)))
	}
	local := addr
	if sa, err := c.getsockname(); err == nil {
		if ap := fromSockaddr(sa, c.otherNS); ap.IsValid() {
			local = ap
		}
	}
	c.local.Store(&Addr{local})
	return nil
}

func bindDetail(addr netip.AddrPort, err error) string {
	switch {
	case errors.Is(err, unix.EADDRNOTAVAIL):
		return "address " + addr.Addr().String() + " is not configured on any interface of this network namespace"
	case errors.Is(err, unix.ENOPROTOOPT):
		return "no transport serves " + addr.Addr().String() + ": load rds_tcp for TCP, or rds_rdma with an RDMA device (for example a Soft-RoCE rxe link) on that address for InfiniBand"
	case errors.Is(err, unix.EINVAL) && addr.Addr().IsLinkLocalUnicast() && addr.Addr().Zone() == "":
		return "IPv6 link-local address needs a zone, for example fe80::1%eth0"
	}
	return ""
}

// Connect sets the default destination used by Write and by WriteMsg with
// a zero address. RDS stays connectionless: nothing is sent, and the socket
// still receives from every peer.
func (c *Conn) Connect(to netip.AddrPort) error {
	sa, err := toSockaddr(to)
	if err != nil {
		return opError("connect", c.LocalAddr(), &Addr{to}, err)
	}
	if err := c.connect(sa); err != nil {
		return opError("connect", c.LocalAddr(), &Addr{to}, wrapSyscall("connect", unwrapSyscall(err), ""))
	}
	c.peer.Store(&Addr{to})
	return nil
}

// Close closes the socket. Blocked reads and writes return net.ErrClosed.
// Messages already queued for sending are dropped by the kernel, and RDMA
// memory registered through this socket is released.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return opError("close", c.LocalAddr(), nil, net.ErrClosed)
	}
	c.closeWarmUps()
	c.readDeadline.release()
	c.writeDeadline.release()
	return opError("close", c.LocalAddr(), nil, c.closeFD())
}

func (c *Conn) bind(sa unix.Sockaddr) error {
	return c.control(func(fd int) error { return unix.Bind(fd, sa) })
}

func (c *Conn) getsockname() (unix.Sockaddr, error) {
	var sa unix.Sockaddr
	err := c.control(func(fd int) (err error) { sa, err = unix.Getsockname(fd); return err })
	return sa, err
}

func (c *Conn) connect(sa unix.Sockaddr) error {
	return c.control(func(fd int) error { return unix.Connect(fd, sa) })
}

// LocalAddr returns the bound address as an *Addr, or nil before bind.
func (c *Conn) LocalAddr() net.Addr {
	if a := c.local.Load(); a != nil {
		return a
	}
	return nil
}

// LocalAddrPort returns the bound address, or the zero value before bind.
func (c *Conn) LocalAddrPort() netip.AddrPort {
	if a := c.local.Load(); a != nil {
		return a.AddrPort
	}
	return netip.AddrPort{}
}

// RemoteAddr returns the default destination set by Connect, or nil.
func (c *Conn) RemoteAddr() net.Addr {
	if a := c.peer.Load(); a != nil {
		return a
	}
	return nil
}

// SetDeadline sets the read and write deadlines, as net.Conn does.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.readDeadline.setUser(t); err != nil {
		return err
	}
	return c.writeDeadline.setUser(t)
}

// SetReadDeadline sets the deadline for reads; zero means none.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.readDeadline.setUser(t) }

// SetWriteDeadline sets the deadline for writes; zero means none. RDS
// sends block only while the send buffer is full.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.writeDeadline.setUser(t) }

// SyscallConn returns the raw connection, for options this package does
// not cover. It implements syscall.Conn. The descriptor blocks (the
// library passes MSG_DONTWAIT where it must not sleep); the raw
// connection's Read and Write make it non-blocking for good before they
// call their function, as such functions expect, and Control leaves it
// as it is.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if c.closed.Load() {
		return nil, opError("syscallconn", c.LocalAddr(), nil, net.ErrClosed)
	}
	return c.k, nil
}

// control runs f on the descriptor outside the poller, for socket options.
func (c *Conn) control(f func(fd int) error) error {
	var ferr error
	if err := c.k.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// unwrapSyscall extracts the errno from an *os.SyscallError; other errors
// pass through.
func unwrapSyscall(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// aLongTimeAgo is a deadline in the past: setting it wakes every waiter.
var aLongTimeAgo = time.Unix(1, 0)
