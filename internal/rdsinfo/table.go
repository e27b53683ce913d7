// Package rdsinfo reads the kernel's RDS information tables (the
// RDS_INFO_* and RDS6_INFO_* getsockopt options of linux/rds.h) and decodes
// their rows through the generated internal/rdsabi structs. It is the one
// decoder of every table: rdssock's typed methods (Conn.Connections,
// Conn.Sockets and the others), rdscat info and the tests use it.
package rdsinfo

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/go-rds/rds/internal/rdsabi"
)

// Table identifies one RDS_INFO_* or RDS6_INFO_* table; the values are
// the kernel's.
type Table int

// The kernel's tables. Counters are global; connections, messages and
// sockets are those of the socket's network namespace. The RDS6 tables
// list IPv4 peers too, as IPv4-mapped addresses.
const (
	Counters         Table = rdsabi.InfoCounters
	Connections      Table = rdsabi.InfoConnections
	SendMessages     Table = rdsabi.InfoSendMessages
	RetransMessages  Table = rdsabi.InfoRetransMessages
	RecvMessages     Table = rdsabi.InfoRecvMessages
	Sockets          Table = rdsabi.InfoSockets
	TCPSockets       Table = rdsabi.InfoTCPSockets
	IBConnections    Table = rdsabi.InfoIBConnections
	ConnectionStats  Table = rdsabi.InfoConnectionStats
	IWARPConnections Table = rdsabi.InfoIWARPConnections
	Connections6     Table = rdsabi.Info6Connections
	SendMessages6    Table = rdsabi.Info6SendMessages
	RetransMessages6 Table = rdsabi.Info6RetransMessages
	RecvMessages6    Table = rdsabi.Info6RecvMessages
	Sockets6         Table = rdsabi.Info6Sockets
	TCPSockets6      Table = rdsabi.Info6TCPSockets
	IBConnections6   Table = rdsabi.Info6IBConnections

	first Table = rdsabi.InfoFirst
	last  Table = rdsabi.InfoLast
)

var names = map[Table]string{
	Counters:         "counters",
	Connections:      "connections",
	SendMessages:     "send-messages",
	RetransMessages:  "retrans-messages",
	RecvMessages:     "recv-messages",
	Sockets:          "sockets",
	TCPSockets:       "tcp-sockets",
	IBConnections:    "ib-connections",
	ConnectionStats:  "connection-stats",
	IWARPConnections: "iwarp-connections",
	Connections6:     "connections6",
	SendMessages6:    "send-messages6",
	RetransMessages6: "retrans-messages6",
	RecvMessages6:    "recv-messages6",
	Sockets6:         "sockets6",
	TCPSockets6:      "tcp-sockets6",
	IBConnections6:   "ib-connections6",
}

// String returns a short name such as "connections" or "sockets6".
func (t Table) String() string {
	if s, ok := names[t]; ok {
		return s
	}
	return fmt.Sprintf("Table(%d)", int(t))
}

// V6 reports whether t is an RDS6 table (rows with 16-byte addresses).
func (t Table) V6() bool { return t >= Connections6 && t <= last }

// Tables lists every table linux/rds.h defines, in numeric order.
// ConnectionStats and IWARPConnections have no provider in mainline
// kernels (reading them gives ENOPROTOOPT), and the IB tables need
// rds_rdma.
func Tables() []Table {
	out := make([]Table, 0, len(names))
	for t := first; t <= last; t++ {
		if _, ok := names[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Parse parses a name as returned by Table.String.
func Parse(s string) (Table, error) {
	for t, n := range names {
		if n == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("rds: unknown info table %q", s)
}

// ErrFormat is returned by the decoders for data that is not a whole
// number of rows.
var ErrFormat = errors.New("rds: malformed info table data")

// The decoded rows, with every field of the kernel's; rdssock's exported
// row types convert from these.
type (
	// Counter is a row of RDS_INFO_COUNTERS.
	Counter struct {
		Name  string
		Value uint64
	}
	// Connection is a row of RDS_INFO_CONNECTIONS or RDS6_INFO_CONNECTIONS.
	Connection struct {
		NextTxSeq uint64
		NextRxSeq uint64
		Local     netip.Addr
		Remote    netip.Addr
		Transport string
		Flags     uint8
		TOS       uint8 // IPv4 table only
	}
	// Message is a row of the send, retransmit or receive queue tables.
	Message struct {
		Seq    uint64
		Len    uint32
		Local  netip.AddrPort
		Remote netip.AddrPort
		Flags  uint8
		TOS    uint8
	}
	// Socket is a row of RDS_INFO_SOCKETS or RDS6_INFO_SOCKETS.
	Socket struct {
		SendBuffer    uint32
		ReceiveBuffer uint32
		Bound         netip.AddrPort
		Connected     netip.AddrPort
		Inode         uint64
	}
	// TCPSocket is a row of RDS_INFO_TCP_SOCKETS or RDS6_INFO_TCP_SOCKETS.
	TCPSocket struct {
		Local           netip.AddrPort
		Peer            netip.AddrPort
		HeaderRemaining uint64
		DataRemaining   uint64
		LastSentNext    uint32
		LastExpectedUna uint32
		LastSeenUna     uint32
		TOS             uint8 // IPv4 table only
	}
	// IBConnection is a row of RDS_INFO_IB_CONNECTIONS or
	// RDS6_INFO_IB_CONNECTIONS.
	IBConnection struct {
		Source      netip.Addr
		Dest        netip.Addr
		SourceGID   [16]byte
		DestGID     [16]byte
		MaxSendWR   uint32
		MaxRecvWR   uint32
		MaxSendSGE  uint32
		RDMAMRMax   uint32
		RDMAMRSize  uint32
		TOS         uint8
		SL          uint8
		CacheAllocs uint32
	}
)
