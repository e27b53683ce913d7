package rdssock

import "net/netip"

// MessageQueue selects the queue Conn.Messages lists.
type MessageQueue int

// The kernel's message queues (RDS6_INFO_SEND_MESSAGES,
// RDS6_INFO_RETRANS_MESSAGES and RDS6_INFO_RECV_MESSAGES, or their IPv4
// tables on kernels without IPv6 RDS).
const (
	SendQueue       MessageQueue = iota // queued for sending
	RetransmitQueue                     // sent and not yet acknowledged
	ReceiveQueue                        // received and not yet read
)

// Counter is one RDS statistics counter (RDS_INFO_COUNTERS), global to
// the host.
type Counter struct {
	Name  string
	Value uint64
}

// Connection is one RDS connection (path) of the socket's network
// namespace. Addresses of IPv4 connections are IPv4, never IPv4-mapped.
type Connection struct {
	NextTxSeq uint64
	NextRxSeq uint64
	Local     netip.Addr
	Remote    netip.Addr
	Transport string // as the kernel names it: "tcp", "infiniband", "loopback"
	// The state: sending (a transmit is under way), connecting or
	// connected (RDS_INFO_CONNECTION_FLAG_*).
	Sending, Connecting, Connected bool
	TOS                            uint8 // the kernel reports it for IPv4 connections only
}

// QueuedMessage is a message in one of the kernel's queues (see
// MessageQueue). The tables' flags field is left out: mainline kernels
// always write 0 there (net/rds/recv.c).
type QueuedMessage struct {
	Seq    uint64
	Len    uint32
	Local  netip.AddrPort
	Remote netip.AddrPort
	TOS    uint8
}

// SocketInfo is one RDS socket of the namespace, bound or not (an unbound
// socket shows the IPv6 unspecified address).
type SocketInfo struct {
	SendBuffer    uint32
	ReceiveBuffer uint32
	Bound         netip.AddrPort
	Connected     netip.AddrPort
	Inode         uint64
}

// TCPSocket is the TCP connection under an RDS/TCP path.
type TCPSocket struct {
	Local           netip.AddrPort
	Peer            netip.AddrPort
	HeaderRemaining uint64
	DataRemaining   uint64
	LastSentNext    uint32
	LastExpectedUna uint32
	LastSeenUna     uint32
	TOS             uint8 // IPv4 connections only; rds_tcp maps every TOS to 0
}

// IBConnection is an InfiniBand or RoCE connection with its queue limits.
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
