//go:build linux

package rdssock

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// infoRetries bounds how often ReadInfo grows its buffer: a table can grow
// between the kernel's answer "ENOSPC, need N bytes" and the next call.
const infoRetries = 8

// ReadInfo reads one information table with the kernel's size protocol:
// a buffer too small gives ENOSPC and the needed length, so ReadInfo grows
// the buffer and asks again. It returns the table's bytes (in buf when buf
// was large enough) and the size of one row, which differs between kernel
// versions; decode with the Parse* functions, or use the typed methods.
// The socket need not be bound.
func (c *Conn) ReadInfo(t InfoTable, buf []byte) (data []byte, itemSize int, err error) {
	if t < infoFirst || t > infoLast {
		return nil, 0, opError("getsockopt", c.LocalAddr(), nil, fmt.Errorf("unknown info table %d", int(t)))
	}
	if cap(buf) == 0 {
		buf = make([]byte, 4096)
	}
	buf = buf[:cap(buf)]
	for range infoRetries {
		var (
			optlen = uint32(len(buf))
			each   uintptr
			errno  unix.Errno
		)
		err := c.control(func(fd int) error {
			each, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), solRDS, uintptr(t),
				uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&optlen)), 0)
			return nil
		})
		switch {
		case err != nil:
			return nil, 0, opError("getsockopt", c.LocalAddr(), nil, err)
		case errno == unix.ENOSPC:
			buf = make([]byte, int(optlen)+int(optlen)/4+256)
			continue
		case errno != 0:
			return nil, 0, opError("getsockopt", c.LocalAddr(), nil,
				wrapSyscall("getsockopt("+t.String()+")", errno, infoDetail(t, errno)))
		}
		return buf[:optlen], int(each), nil
	}
	return nil, 0, opError("getsockopt", c.LocalAddr(), nil, fmt.Errorf("info table %v kept growing; gave up after %d tries", t, infoRetries))
}

func infoDetail(t InfoTable, errno unix.Errno) string {
	if errno != unix.ENOPROTOOPT {
		return ""
	}
	switch t {
	case InfoIBConnections, Info6IBConnections:
		return "the InfiniBand table needs the rds_rdma module: modprobe rds_rdma"
	case InfoTCPSockets, Info6TCPSockets:
		return "the TCP table needs the rds_tcp module: modprobe rds_tcp"
	case InfoConnectionStats, InfoIWARPConnections:
		return "this kernel provides no " + t.String() + " table"
	}
	return ""
}

// Counters returns the kernel's RDS statistics (RDS_INFO_COUNTERS),
// global to the host, including transport counters of loaded modules.
func (c *Conn) Counters() ([]Counter, error) {
	data, each, err := c.ReadInfo(InfoCounters, nil)
	if err != nil {
		return nil, err
	}
	return ParseCounters(data, each)
}

// Connections returns the IPv4 connections of the socket's network
// namespace (RDS_INFO_CONNECTIONS).
func (c *Conn) Connections() ([]Connection, error) { return c.connections(InfoConnections, false) }

// Connections6 returns all connections, IPv4 ones as IPv4-mapped
// addresses (RDS6_INFO_CONNECTIONS). It carries no TOS.
func (c *Conn) Connections6() ([]Connection, error) { return c.connections(Info6Connections, true) }

func (c *Conn) connections(t InfoTable, v6 bool) ([]Connection, error) {
	data, each, err := c.ReadInfo(t, nil)
	if err != nil {
		return nil, err
	}
	return ParseConnections(data, each, v6)
}

// Messages returns the messages in one of the queue tables:
// InfoSendMessages, InfoRetransMessages, InfoRecvMessages or their RDS6
// twins.
func (c *Conn) Messages(t InfoTable) ([]QueuedMessage, error) {
	var v6 bool
	switch t {
	case InfoSendMessages, InfoRetransMessages, InfoRecvMessages:
	case Info6SendMessages, Info6RetransMessages, Info6RecvMessages:
		v6 = true
	default:
		return nil, opError("getsockopt", c.LocalAddr(), nil, fmt.Errorf("%v is not a message table", t))
	}
	data, each, err := c.ReadInfo(t, nil)
	if err != nil {
		return nil, err
	}
	return ParseMessages(data, each, v6)
}

// Sockets returns the RDS sockets of the namespace bound to IPv4 addresses
// (RDS_INFO_SOCKETS).
func (c *Conn) Sockets() ([]SocketInfo, error) { return c.sockets(InfoSockets, false) }

// Sockets6 returns all RDS sockets of the namespace (RDS6_INFO_SOCKETS).
func (c *Conn) Sockets6() ([]SocketInfo, error) { return c.sockets(Info6Sockets, true) }

func (c *Conn) sockets(t InfoTable, v6 bool) ([]SocketInfo, error) {
	data, each, err := c.ReadInfo(t, nil)
	if err != nil {
		return nil, err
	}
	return ParseSockets(data, each, v6)
}

// TCPSockets returns the TCP sockets under IPv4 RDS/TCP connections
// (RDS_INFO_TCP_SOCKETS).
func (c *Conn) TCPSockets() ([]TCPSocket, error) { return c.tcpSockets(InfoTCPSockets, false) }

// TCPSockets6 returns the TCP sockets under all RDS/TCP connections
// (RDS6_INFO_TCP_SOCKETS).
func (c *Conn) TCPSockets6() ([]TCPSocket, error) { return c.tcpSockets(Info6TCPSockets, true) }

func (c *Conn) tcpSockets(t InfoTable, v6 bool) ([]TCPSocket, error) {
	data, each, err := c.ReadInfo(t, nil)
	if err != nil {
		return nil, err
	}
	return ParseTCPSockets(data, each, v6)
}

// IBConnections returns the IPv4 InfiniBand connections
// (RDS_INFO_IB_CONNECTIONS); it needs rds_rdma.
func (c *Conn) IBConnections() ([]IBConnection, error) {
	return c.ibConnections(InfoIBConnections, false)
}

// IBConnections6 returns all InfiniBand connections
// (RDS6_INFO_IB_CONNECTIONS); it needs rds_rdma.
func (c *Conn) IBConnections6() ([]IBConnection, error) {
	return c.ibConnections(Info6IBConnections, true)
}

func (c *Conn) ibConnections(t InfoTable, v6 bool) ([]IBConnection, error) {
	data, each, err := c.ReadInfo(t, nil)
	if err != nil {
		return nil, err
	}
	return ParseIBConnections(data, each, v6)
}
