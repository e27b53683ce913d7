//go:build linux

package rdssock

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/internal/rdsinfo"
)

// Each table method reads the kernel's RDS6 table, which lists IPv4 peers
// too (as IPv4-mapped addresses), and returns IPv4 addresses unmapped.
// Where the IPv6 row lacks a field of the IPv4 one (TOS of connections and
// TCP sockets), IPv4 rows come from the IPv4 table instead. On a kernel
// without IPv6 RDS (the RDS6 table gives ENOPROTOOPT) the IPv4 table is
// read alone.
//
// The IPv4 send and retransmit tables are no substitute: the kernel fills
// their addresses from the first four bytes of the IPv4-mapped address
// (*(__be32 *)&conn->c_laddr in net/rds/connection.c), so every row reads
// 0.0.0.0.

// readInfo reads one table through internal/rdsinfo with this package's
// errors.
func (c *Conn) readInfo(t rdsinfo.Table) ([]byte, int, error) {
	data, each, err := rdsinfo.Read(c.k, t, nil)
	if err != nil {
		return nil, 0, opError("getsockopt", c.LocalAddr(), nil,
			wrapSyscall("getsockopt("+t.String()+")", err, rdsinfo.Hint(t, err)))
	}
	return data, each, nil
}

// infoReader reads one table: Conn.readInfo, or a fake in tests.
type infoReader func(rdsinfo.Table) ([]byte, int, error)

// readTable reads table t6 (an RDS6 table) and decodes it with parse; if
// this kernel has no IPv6 RDS it reads and decodes t4 instead.
func readTable[R any](read infoReader, t6, t4 rdsinfo.Table, parse func([]byte, int, bool) ([]R, error)) ([]R, error) {
	data, each, err := read(t6)
	if err == nil {
		return parse(data, each, true)
	}
	if !errors.Is(err, unix.ENOPROTOOPT) {
		return nil, err
	}
	data, each, err4 := read(t4)
	if err4 != nil {
		return nil, err4
	}
	return parse(data, each, false)
}

// mergeTable is readTable for tables whose IPv4 rows carry more than the
// IPv6 ones: IPv4 rows come from t4, the others from t6.
func mergeTable[R any](read infoReader, t6, t4 rdsinfo.Table, parse func([]byte, int, bool) ([]R, error), is4 func(R) bool) ([]R, error) {
	data, each, err := read(t4)
	if err != nil {
		return nil, err
	}
	rows, err := parse(data, each, false)
	if err != nil {
		return nil, err
	}
	data, each, err = read(t6)
	if errors.Is(err, unix.ENOPROTOOPT) {
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	rows6, err := parse(data, each, true)
	if err != nil {
		return nil, err
	}
	for _, r := range rows6 {
		if !is4(r) {
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// convert maps decoded rows to this package's row types.
func convert[R, P any](rows []R, err error, f func(R) P) ([]P, error) {
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]P, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out, nil
}

func unmap(a netip.Addr) netip.Addr { return a.Unmap() }

func unmapPort(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// Counters returns the kernel's RDS statistics (RDS_INFO_COUNTERS), global
// to the host, including transport counters of loaded modules.
func (c *Conn) Counters() ([]Counter, error) {
	data, each, err := c.readInfo(rdsinfo.Counters)
	if err != nil {
		return nil, err
	}
	cs, err := rdsinfo.ParseCounters(data, each)
	return convert(cs, err, func(x rdsinfo.Counter) Counter { return Counter(x) })
}

// Connections returns the RDS connections of the socket's network
// namespace, IPv4 and IPv6.
func (c *Conn) Connections() ([]Connection, error) {
	cs, err := mergeTable(c.readInfo, rdsinfo.Connections6, rdsinfo.Connections, rdsinfo.ParseConnections,
		func(x rdsinfo.Connection) bool { return x.Local.Is4In6() })
	return convert(cs, err, func(x rdsinfo.Connection) Connection {
		return Connection{
			NextTxSeq: x.NextTxSeq, NextRxSeq: x.NextRxSeq,
			Local: unmap(x.Local), Remote: unmap(x.Remote), Transport: x.Transport,
			Sending:    x.Flags&rdsabi.InfoConnFlagSending != 0,
			Connecting: x.Flags&rdsabi.InfoConnFlagConnecting != 0,
			Connected:  x.Flags&rdsabi.InfoConnFlagConnected != 0,
			TOS:        x.TOS,
		}
	})
}

// Messages returns the messages in one of the namespace's queues.
func (c *Conn) Messages(q MessageQueue) ([]QueuedMessage, error) {
	var t6, t4 rdsinfo.Table
	switch q {
	case SendQueue:
		t6, t4 = rdsinfo.SendMessages6, rdsinfo.SendMessages
	case RetransmitQueue:
		t6, t4 = rdsinfo.RetransMessages6, rdsinfo.RetransMessages
	case ReceiveQueue:
		t6, t4 = rdsinfo.RecvMessages6, rdsinfo.RecvMessages
	default:
		return nil, opError("getsockopt", c.LocalAddr(), nil, fmt.Errorf("unknown message queue %d", int(q)))
	}
	ms, err := readTable(c.readInfo, t6, t4, rdsinfo.ParseMessages)
	return convert(ms, err, func(x rdsinfo.Message) QueuedMessage {
		return QueuedMessage{Seq: x.Seq, Len: x.Len, Local: unmapPort(x.Local), Remote: unmapPort(x.Remote), TOS: x.TOS}
	})
}

// Sockets returns the RDS sockets of the namespace, bound or not.
func (c *Conn) Sockets() ([]SocketInfo, error) {
	ss, err := readTable(c.readInfo, rdsinfo.Sockets6, rdsinfo.Sockets, rdsinfo.ParseSockets)
	return convert(ss, err, func(x rdsinfo.Socket) SocketInfo {
		x.Bound, x.Connected = unmapPort(x.Bound), unmapPort(x.Connected)
		return SocketInfo(x)
	})
}

// TCPSockets returns the TCP sockets under the namespace's RDS/TCP
// connections; it needs rds_tcp.
func (c *Conn) TCPSockets() ([]TCPSocket, error) {
	ss, err := mergeTable(c.readInfo, rdsinfo.TCPSockets6, rdsinfo.TCPSockets, rdsinfo.ParseTCPSockets,
		func(x rdsinfo.TCPSocket) bool { return x.Local.Addr().Is4In6() })
	return convert(ss, err, func(x rdsinfo.TCPSocket) TCPSocket {
		x.Local, x.Peer = unmapPort(x.Local), unmapPort(x.Peer)
		return TCPSocket(x)
	})
}

// IBConnections returns the InfiniBand and RoCE connections of the
// namespace; it needs rds_rdma.
func (c *Conn) IBConnections() ([]IBConnection, error) {
	cs, err := readTable(c.readInfo, rdsinfo.IBConnections6, rdsinfo.IBConnections, rdsinfo.ParseIBConnections)
	return convert(cs, err, func(x rdsinfo.IBConnection) IBConnection {
		x.Source, x.Dest = unmap(x.Source), unmap(x.Dest)
		return IBConnection(x)
	})
}
