//go:build linux

package rdssock

import (
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/internal/rdsabi"
)

// Shorter names for the SOL_RDS options (linux/rds.h).
const (
	solRDS           = rdsabi.SOL
	optCancelSentTo  = rdsabi.OptCancelSentTo
	optRecvErr       = rdsabi.OptRecvErr
	optCongMonitor   = rdsabi.OptCongMonitor
	optTransport     = rdsabi.OptTransport
	optRxPathLatency = rdsabi.OptRxPathLatency
	ioctlSetTOS      = rdsabi.IoctlSetTOS
	ioctlGetTOS      = rdsabi.IoctlGetTOS
)

func (c *Conn) applyConfig(cfg *Config) error {
	if cfg.Transport != TransportAuto {
		if err := c.setTransport(cfg.Transport); err != nil {
			return err
		}
	}
	sndOpt, rcvOpt := unix.SO_SNDBUF, unix.SO_RCVBUF
	if cfg.ForceBuffers {
		sndOpt, rcvOpt = unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE
	}
	if cfg.SendBuffer > 0 {
		if err := c.setInt("SO_SNDBUF", unix.SOL_SOCKET, sndOpt, cfg.SendBuffer); err != nil {
			return err
		}
	}
	if cfg.ReceiveBuffer > 0 {
		if err := c.setInt("SO_RCVBUF", unix.SOL_SOCKET, rcvOpt, cfg.ReceiveBuffer); err != nil {
			return err
		}
	}
	if cfg.RecvErr {
		if err := c.SetRecvErr(true); err != nil {
			return err
		}
	}
	if cfg.CongestionMonitor || cfg.WaitCongested {
		if err := c.setInt("RDS_CONG_MONITOR", solRDS, optCongMonitor, 1); err != nil {
			return err
		}
		c.congNoticesWanted.Store(cfg.CongestionMonitor)
		c.waitCongested.Store(cfg.WaitCongested)
	}
	if err := c.SetBusyPoll(cfg.BusyPoll); err != nil {
		return err
	}
	if cfg.Timestamps {
		if err := c.setInt("SO_TIMESTAMP", unix.SOL_SOCKET, unix.SO_TIMESTAMP, 1); err != nil {
			return err
		}
	}
	if cfg.ZeroCopy {
		if err := c.setInt("SO_ZEROCOPY", unix.SOL_SOCKET, unix.SO_ZEROCOPY, 1); err != nil {
			return err
		}
	}
	if len(cfg.RxPathLatency) > 0 {
		if err := c.setRxPathLatency(cfg.RxPathLatency); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) setInt(name string, level, opt, v int) error {
	err := c.control(func(fd int) error { return unix.SetsockoptInt(fd, level, opt, v) })
	return opError("setsockopt", c.LocalAddr(), nil, wrapSyscall("setsockopt("+name+")", err, ""))
}

func (c *Conn) getInt(name string, level, opt int) (int, error) {
	var v int
	err := c.control(func(fd int) (err error) {
		v, err = unix.GetsockoptInt(fd, level, opt)
		return err
	})
	return v, opError("getsockopt", c.LocalAddr(), nil, wrapSyscall("getsockopt("+name+")", err, ""))
}

func (c *Conn) setTransport(t Transport) error {
	v, ok := t.Kernel()
	if !ok {
		return opError("setsockopt", nil, nil, fmt.Errorf("transport %v cannot be requested: use TransportIB or TransportTCP (loopback is chosen by address)", t))
	}
	err := c.control(func(fd int) error { return unix.SetsockoptInt(fd, solRDS, optTransport, v) })
	detail := ""
	if err == unix.ENOPROTOOPT {
		detail = "transport " + t.String() + " is not loaded: modprobe " + t.Module()
	}
	return opError("setsockopt", nil, nil, wrapSyscall("setsockopt(SO_RDS_TRANSPORT)", err, detail))
}

// Transport returns the transport attached to the socket at bind:
// TransportNone before bind, TransportLoop for 127/8 and ::1. A socket bound
// to another address reports its transport (for example TCP) even though
// the kernel carries its messages to peers on the same host over the
// loopback connection path.
func (c *Conn) Transport() (Transport, error) {
	v, err := c.getInt("SO_RDS_TRANSPORT", solRDS, optTransport)
	if err != nil {
		return TransportNone, err
	}
	return transportFromKernel(int32(v)), nil
}

// SetRecvErr switches RDS_RECVERR: report failed RDMA operations even
// without RDS_RDMA_NOTIFY_ME.
func (c *Conn) SetRecvErr(on bool) error {
	return c.setInt("RDS_RECVERR", solRDS, optRecvErr, boolInt(on))
}

// SetBusyPoll sets how long a receive that finds no message keeps trying
// before it waits in the poller (see Config.BusyPoll); zero turns busy
// polling off. It affects receives that start after it returns.
func (c *Conn) SetBusyPoll(d time.Duration) error {
	if d < 0 {
		return opError("set", c.LocalAddr(), nil, fmt.Errorf("busy poll duration %v is negative: use 0 to wait in the poller at once", d))
	}
	c.busyPoll.Store(int64(d))
	return nil
}

// ownsCongNotices reports whether the socket's congestion notices are the
// library's own business: the monitor is on only to wake sends waiting
// with Config.WaitCongested, so reads skip the notices.
func (c *Conn) ownsCongNotices() bool {
	return c.waitCongested.Load() && !c.congNoticesWanted.Load()
}

// SetReadBuffer sets SO_RCVBUF.
func (c *Conn) SetReadBuffer(bytes int) error {
	return c.setInt("SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, bytes)
}

// SetWriteBuffer sets SO_SNDBUF. The largest message is about half of it.
func (c *Conn) SetWriteBuffer(bytes int) error {
	return c.setInt("SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, bytes)
}

// ReadBuffer returns SO_RCVBUF as the kernel reports it (twice the value
// set).
func (c *Conn) ReadBuffer() (int, error) {
	return c.getInt("SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF)
}

// WriteBuffer returns SO_SNDBUF as the kernel reports it.
func (c *Conn) WriteBuffer() (int, error) {
	return c.getInt("SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF)
}

// setRxPathLatency selects the receive-path points whose latencies the
// kernel reports on each received message (Config.RxPathLatency).
func (c *Conn) setRxPathLatency(points []cmsg.TracePoint) error {
	if len(points) > cmsg.MaxTracePoints {
		return opError("setsockopt", c.LocalAddr(), nil, fmt.Errorf("at most %d receive path points, got %d", cmsg.MaxTracePoints, len(points)))
	}
	so := rdsabi.RxTraceOption{RxTraces: uint8(len(points))}
	for i, p := range points {
		if p >= cmsg.MaxTracePoints {
			return opError("setsockopt", c.LocalAddr(), nil, fmt.Errorf("unknown receive path point %d", p))
		}
		so.RxTracePos[i] = uint8(p)
	}
	err := c.control(func(fd int) error {
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), solRDS, optRxPathLatency,
			uintptr(unsafe.Pointer(&so)), rdsabi.SizeofRxTraceOption, 0)
		return errnoErr(e)
	})
	return opError("setsockopt", c.LocalAddr(), nil, wrapSyscall("setsockopt(SO_RDS_MSG_RXPATH_LATENCY)", err, ""))
}

// CancelSentTo drops every message queued on this socket for dst that the
// transport has not yet sent (RDS_CANCEL_SENT_TO). RDMA operations among
// them complete with status canceled. The socket must be bound.
func (c *Conn) CancelSentTo(dst netip.AddrPort) error {
	var sa sockaddrBuf
	n, err := sa.put(dst)
	if err != nil {
		return opError("setsockopt", c.LocalAddr(), &Addr{dst}, err)
	}
	err = c.control(func(fd int) error {
		_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), solRDS, optCancelSentTo,
			uintptr(unsafe.Pointer(&sa.raw)), uintptr(n), 0)
		return errnoErr(e)
	})
	return opError("setsockopt", c.LocalAddr(), &Addr{dst}, wrapSyscall("setsockopt(RDS_CANCEL_SENT_TO)", err, ""))
}

// SetTOS sets the socket's type of service (SIOCRDSSETTOS). It needs a
// bound socket and fails once the socket has sent or already has a TOS.
func (c *Conn) SetTOS(tos uint8) error {
	err := c.control(func(fd int) error {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctlSetTOS, uintptr(unsafe.Pointer(&tos)))
		return errnoErr(e)
	})
	return opError("ioctl", c.LocalAddr(), nil, wrapSyscall("ioctl(SIOCRDSSETTOS)", err, ""))
}

// TOS returns the socket's type of service (SIOCRDSGETTOS).
func (c *Conn) TOS() (uint8, error) {
	var tos uint8
	err := c.control(func(fd int) error {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctlGetTOS, uintptr(unsafe.Pointer(&tos)))
		return errnoErr(e)
	})
	return tos, opError("ioctl", c.LocalAddr(), nil, wrapSyscall("ioctl(SIOCRDSGETTOS)", err, ""))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errnoErr converts a raw errno to an error, nil for zero.
func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

var _ net.Addr = (*Addr)(nil)
