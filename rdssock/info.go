package rdssock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/go-rds/rds/internal/rdsabi"
	"net/netip"
)

// InfoTable identifies one RDS_INFO_* or RDS6_INFO_* table, read with
// getsockopt(SOL_RDS, table). The values are the kernel's.
type InfoTable int

// The kernel's information tables. Counters are global; connections,
// messages and sockets are those of the socket's network namespace. The
// RDS6 tables list IPv4 peers too, as IPv4-mapped addresses.
const (
	InfoCounters         InfoTable = rdsabi.InfoCounters
	InfoConnections      InfoTable = rdsabi.InfoConnections
	InfoSendMessages     InfoTable = rdsabi.InfoSendMessages
	InfoRetransMessages  InfoTable = rdsabi.InfoRetransMessages
	InfoRecvMessages     InfoTable = rdsabi.InfoRecvMessages
	InfoSockets          InfoTable = rdsabi.InfoSockets
	InfoTCPSockets       InfoTable = rdsabi.InfoTCPSockets
	InfoIBConnections    InfoTable = rdsabi.InfoIBConnections
	InfoConnectionStats  InfoTable = rdsabi.InfoConnectionStats
	InfoIWARPConnections InfoTable = rdsabi.InfoIWARPConnections
	Info6Connections     InfoTable = rdsabi.Info6Connections
	Info6SendMessages    InfoTable = rdsabi.Info6SendMessages
	Info6RetransMessages InfoTable = rdsabi.Info6RetransMessages
	Info6RecvMessages    InfoTable = rdsabi.Info6RecvMessages
	Info6Sockets         InfoTable = rdsabi.Info6Sockets
	Info6TCPSockets      InfoTable = rdsabi.Info6TCPSockets
	Info6IBConnections   InfoTable = rdsabi.Info6IBConnections

	infoFirst InfoTable = rdsabi.InfoFirst
	infoLast  InfoTable = rdsabi.InfoLast
)

var infoNames = map[InfoTable]string{
	InfoCounters:         "counters",
	InfoConnections:      "connections",
	InfoSendMessages:     "send-messages",
	InfoRetransMessages:  "retrans-messages",
	InfoRecvMessages:     "recv-messages",
	InfoSockets:          "sockets",
	InfoTCPSockets:       "tcp-sockets",
	InfoIBConnections:    "ib-connections",
	InfoConnectionStats:  "connection-stats",
	InfoIWARPConnections: "iwarp-connections",
	Info6Connections:     "connections6",
	Info6SendMessages:    "send-messages6",
	Info6RetransMessages: "retrans-messages6",
	Info6RecvMessages:    "recv-messages6",
	Info6Sockets:         "sockets6",
	Info6TCPSockets:      "tcp-sockets6",
	Info6IBConnections:   "ib-connections6",
}

// String returns a short name such as "connections" or "sockets6".
func (t InfoTable) String() string {
	if s, ok := infoNames[t]; ok {
		return s
	}
	return fmt.Sprintf("InfoTable(%d)", int(t))
}

// InfoTables lists every table id linux/rds.h defines, in numeric order.
// InfoConnectionStats and InfoIWARPConnections have no provider in mainline
// kernels (reading them gives ENOPROTOOPT), and the IB tables need rds_rdma.
func InfoTables() []InfoTable {
	out := make([]InfoTable, 0, len(infoNames))
	for t := infoFirst; t <= infoLast; t++ {
		if _, ok := infoNames[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// ParseInfoTable parses a name as returned by InfoTable.String.
func ParseInfoTable(s string) (InfoTable, error) {
	for t, n := range infoNames {
		if n == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("rds: unknown info table %q", s)
}

// Counter is one RDS statistics counter (RDS_INFO_COUNTERS).
type Counter struct {
	Name  string
	Value uint64
}

// Connection flags in RDS_INFO_CONNECTIONS.
const (
	ConnSending    = rdsabi.InfoConnFlagSending
	ConnConnecting = rdsabi.InfoConnFlagConnecting
	ConnConnected  = rdsabi.InfoConnFlagConnected
)

// Connection is a row of RDS_INFO_CONNECTIONS or RDS6_INFO_CONNECTIONS.
type Connection struct {
	NextTxSeq uint64
	NextRxSeq uint64
	Local     netip.Addr
	Remote    netip.Addr
	Transport string // as the kernel names it: "tcp", "infiniband", "loopback"
	Flags     uint8  // ConnSending, ConnConnecting, ConnConnected
	TOS       uint8  // IPv4 table only
}

// Message flags in the message tables.
const (
	MessageAck     = rdsabi.InfoMsgFlagAck
	MessageFastAck = rdsabi.InfoMsgFlagFastAck
)

// QueuedMessage is a row of the send, retransmit or receive queue tables.
type QueuedMessage struct {
	Seq    uint64
	Len    uint32
	Local  netip.AddrPort
	Remote netip.AddrPort
	Flags  uint8
	TOS    uint8
}

// SocketInfo is a row of RDS_INFO_SOCKETS or RDS6_INFO_SOCKETS.
type SocketInfo struct {
	SendBuffer    uint32
	ReceiveBuffer uint32
	Bound         netip.AddrPort
	Connected     netip.AddrPort
	Inode         uint64
}

// TCPSocket is a row of RDS_INFO_TCP_SOCKETS or RDS6_INFO_TCP_SOCKETS: the
// TCP connection under an RDS/TCP path.
type TCPSocket struct {
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
type IBConnection struct {
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

// infoTransNameBytes is the size of the NUL-terminated transport name in
// the connection tables (TRANSNAMSIZ). Kernels may report row sizes other
// than those of linux/rds.h (fields are added at the end over time); the
// parsers read the fields that fit in the size the kernel reported.
const infoTransNameBytes = rdsabi.TransNameSize

// ErrInfoFormat is returned by the info parsers for data that is not a
// whole number of rows.
var ErrInfoFormat = errors.New("rds: malformed info table data")

// row is a bounds-checked reader over one table row; fields beyond the
// row's end read as zero.
type row []byte

func (r row) u8(off int) uint8 {
	if off+1 > len(r) {
		return 0
	}
	return r[off]
}

func (r row) u32(off int) uint32 {
	if off+4 > len(r) {
		return 0
	}
	return binary.NativeEndian.Uint32(r[off:])
}

func (r row) u64(off int) uint64 {
	if off+8 > len(r) {
		return 0
	}
	return binary.NativeEndian.Uint64(r[off:])
}

func (r row) be16(off int) uint16 {
	if off+2 > len(r) {
		return 0
	}
	return binary.BigEndian.Uint16(r[off:])
}

func (r row) ip4(off int) netip.Addr {
	if off+4 > len(r) {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(r[off : off+4]))
}

func (r row) ip6(off int) netip.Addr {
	if off+16 > len(r) {
		return netip.Addr{}
	}
	return netip.AddrFrom16([16]byte(r[off : off+16]))
}

func (r row) cstring(off, n int) string {
	if off >= len(r) {
		return ""
	}
	b := r[off:min(off+n, len(r))]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (r row) gid(off int) (g [16]byte) {
	if off < len(r) {
		copy(g[:], r[off:])
	}
	return g
}

// decodeRows splits data into rows of itemSize bytes and decodes each.
func decodeRows[T any](data []byte, itemSize int, decode func(row) T) ([]T, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if itemSize <= 0 || len(data)%itemSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a multiple of the row size %d", ErrInfoFormat, len(data), itemSize)
	}
	out := make([]T, 0, len(data)/itemSize)
	for off := 0; off < len(data); off += itemSize {
		out = append(out, decode(row(data[off:off+itemSize])))
	}
	return out, nil
}

// ParseCounters decodes RDS_INFO_COUNTERS data with the row size the kernel
// reported.
func ParseCounters(data []byte, itemSize int) ([]Counter, error) {
	return decodeRows(data, itemSize, func(r row) Counter {
		return Counter{Name: r.cstring(0, 32), Value: r.u64(32)}
	})
}

// ParseConnections decodes RDS_INFO_CONNECTIONS (v6 false) or
// RDS6_INFO_CONNECTIONS (v6 true) data.
func ParseConnections(data []byte, itemSize int, v6 bool) ([]Connection, error) {
	return decodeRows(data, itemSize, func(r row) Connection {
		c := Connection{NextTxSeq: r.u64(0), NextRxSeq: r.u64(8)}
		if v6 {
			c.Local, c.Remote = r.ip6(16), r.ip6(32)
			c.Transport = r.cstring(48, infoTransNameBytes)
			c.Flags = r.u8(64)
		} else {
			c.Local, c.Remote = r.ip4(16), r.ip4(20)
			c.Transport = r.cstring(24, infoTransNameBytes)
			c.Flags, c.TOS = r.u8(40), r.u8(41)
		}
		return c
	})
}

// ParseMessages decodes the send, retransmit or receive queue tables.
func ParseMessages(data []byte, itemSize int, v6 bool) ([]QueuedMessage, error) {
	return decodeRows(data, itemSize, func(r row) QueuedMessage {
		m := QueuedMessage{Seq: r.u64(0), Len: r.u32(8)}
		if v6 {
			m.Local = netip.AddrPortFrom(r.ip6(12), r.be16(44))
			m.Remote = netip.AddrPortFrom(r.ip6(28), r.be16(46))
			m.Flags, m.TOS = r.u8(48), r.u8(49)
		} else {
			m.Local = netip.AddrPortFrom(r.ip4(12), r.be16(20))
			m.Remote = netip.AddrPortFrom(r.ip4(16), r.be16(22))
			m.Flags, m.TOS = r.u8(24), r.u8(25)
		}
		return m
	})
}

// ParseSockets decodes RDS_INFO_SOCKETS or RDS6_INFO_SOCKETS data.
func ParseSockets(data []byte, itemSize int, v6 bool) ([]SocketInfo, error) {
	return decodeRows(data, itemSize, func(r row) SocketInfo {
		s := SocketInfo{SendBuffer: r.u32(0)}
		if v6 {
			s.Bound = netip.AddrPortFrom(r.ip6(4), r.be16(36))
			s.Connected = netip.AddrPortFrom(r.ip6(20), r.be16(38))
			s.ReceiveBuffer, s.Inode = r.u32(40), r.u64(44)
		} else {
			s.Bound = netip.AddrPortFrom(r.ip4(4), r.be16(12))
			s.Connected = netip.AddrPortFrom(r.ip4(8), r.be16(14))
			s.ReceiveBuffer, s.Inode = r.u32(16), r.u64(20)
		}
		return s
	})
}

// ParseTCPSockets decodes RDS_INFO_TCP_SOCKETS or RDS6_INFO_TCP_SOCKETS data.
func ParseTCPSockets(data []byte, itemSize int, v6 bool) ([]TCPSocket, error) {
	return decodeRows(data, itemSize, func(r row) TCPSocket {
		var s TCPSocket
		off := 12 // start of hdr_rem in the IPv4 row
		if v6 {
			s.Local = netip.AddrPortFrom(r.ip6(0), r.be16(16))
			s.Peer = netip.AddrPortFrom(r.ip6(18), r.be16(34))
			off = 36
		} else {
			s.Local = netip.AddrPortFrom(r.ip4(0), r.be16(4))
			s.Peer = netip.AddrPortFrom(r.ip4(6), r.be16(10))
		}
		s.HeaderRemaining, s.DataRemaining = r.u64(off), r.u64(off+8)
		s.LastSentNext, s.LastExpectedUna, s.LastSeenUna = r.u32(off+16), r.u32(off+20), r.u32(off+24)
		if !v6 {
			s.TOS = r.u8(off + 28)
		}
		return s
	})
}

// ParseIBConnections decodes RDS_INFO_IB_CONNECTIONS or
// RDS6_INFO_IB_CONNECTIONS data.
func ParseIBConnections(data []byte, itemSize int, v6 bool) ([]IBConnection, error) {
	return decodeRows(data, itemSize, func(r row) IBConnection {
		var c IBConnection
		off := 8 // start of the GIDs in the IPv4 row
		if v6 {
			c.Source, c.Dest = r.ip6(0), r.ip6(16)
			off = 32
		} else {
			c.Source, c.Dest = r.ip4(0), r.ip4(4)
		}
		c.SourceGID, c.DestGID = r.gid(off), r.gid(off+16)
		off += 32
		c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE = r.u32(off), r.u32(off+4), r.u32(off+8)
		c.RDMAMRMax, c.RDMAMRSize = r.u32(off+12), r.u32(off+16)
		c.TOS, c.SL = r.u8(off+20), r.u8(off+21)
		c.CacheAllocs = r.u32(off + 24)
		return c
	})
}
