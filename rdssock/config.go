package rdssock

import (
	"time"

	"github.com/go-rds/rds/cmsg"
)

// Config holds options applied between socket() and bind() (TOS just
// after bind, since it needs a transport). A nil *Config means defaults.
type Config struct {
	// Transport forces a transport (SO_RDS_TRANSPORT). TransportAuto lets
	// bind choose: IB where the address has an RDMA device, else TCP;
	// loopback for local addresses. Forcing IB on an address without an
	// RDMA device fails at bind with ErrTransportUnavailable.
	Transport Transport

	// SendBuffer and ReceiveBuffer set SO_SNDBUF and SO_RCVBUF in bytes (the
	// kernel doubles the value). Zero keeps the system default. A message
	// may be at most about half the send buffer, so 1 MiB messages need
	// SendBuffer >= 2 MiB; a receiver of large messages needs a large
	// ReceiveBuffer too.
	SendBuffer, ReceiveBuffer int

	// ForceBuffers uses SO_SNDBUFFORCE and SO_RCVBUFFORCE, which may exceed
	// net.core.wmem_max/rmem_max but need CAP_NET_ADMIN.
	ForceBuffers bool

	// RecvErr (RDS_RECVERR) asks the kernel to report RDMA operations that
	// failed even when they did not request a completion notice.
	RecvErr bool

	// CongestionMonitor (RDS_CONG_MONITOR) switches on explicit congestion
	// monitoring: after a send fails with ErrCongested, the kernel remembers
	// the destination port in the socket's 64-bit monitor mask (bit
	// port%64) and queues an RDS_CMSG_CONG_UPDATE control message, received
	// as a 0-byte message, when a monitored port becomes uncongested.
	CongestionMonitor bool

	// WaitCongested makes sends to a congested port wait until the port is
	// uncongested, as a blocking C socket does, instead of failing with
	// ErrCongested. The wait happens in the runtime poller (deadlines and
	// contexts bound it) and allocates nothing. It switches on the kernel's
	// congestion monitor, whose RDS_CMSG_CONG_UPDATE notice wakes the
	// waiting send. Those notices queue on this socket's receive side;
	// reads skip them (they are the library's business), unless
	// CongestionMonitor is set too, in which case reads return them.
	WaitCongested bool

	// BusyPoll, when positive, makes a receive that finds no message try
	// again for up to this long, yielding the CPU between tries, before it
	// waits (see the package documentation). It trades CPU time for
	// latency where answers come back within microseconds
	// (request/response over loopback or a fast fabric): a wake-up costs
	// more system calls and scheduler work than a retry. The goroutine
	// keeps its thread while it spins, and a deadline or context ending
	// during the spin is noticed after it. Zero waits at once.
	BusyPoll time.Duration

	// Timestamps (SO_TIMESTAMP) attaches the receive time to each message
	// as an SCM_TIMESTAMP control message.
	Timestamps bool

	// ZeroCopy (SO_ZEROCOPY) allows WriteMsgContext with MSG_ZEROCOPY and an
	// RDS_CMSG_ZCOPY_COOKIE control message; RDS/TCP only.
	ZeroCopy bool

	// RxPathLatency lists receive-path points, at most cmsg.MaxTracePoints,
	// whose latencies the kernel attaches to each received message as an
	// RDS_CMSG_RXPATH_LATENCY control message (SO_RDS_MSG_RXPATH_LATENCY;
	// cmsg.Message.RxPathLatency decodes it). Point 2 runs from the message
	// being queued on the socket until recvmsg writes the control data
	// (net/rds/recv.c). RDS/TCP and RDS/IB measure every point; the
	// loopback transport only point 2 (point 0 reads 0 there, point 1 the
	// raw clock since boot).
	RxPathLatency []cmsg.TracePoint

	// TOS sets the type of service (SIOCRDSSETTOS) after bind. IB opens a
	// separate connection per TOS; TCP accepts it but maps every value to
	// 0. The TOS of a socket can be set only once and only before it sends.
	TOS uint8

	// NoAutoWarmUp turns off the automatic warm-up: by default, a Conn's
	// first send to a peer over RDS/TCP first brings the connection up
	// (see WarmUp and the package documentation), so that messages on a
	// new connection arrive in order and are not exposed to the kernel's
	// loss while its paths are set up. With NoAutoWarmUp, sends go to the
	// kernel at once, as on a raw non-blocking socket; set it when the
	// application calls WarmUp itself or pings peers that do not answer.
	NoAutoWarmUp bool

	// NetNS, if not zero, is a file descriptor of a network namespace in
	// which to create the socket (netlinkcfg.Namespace.FD gives one).
	// Needs CAP_SYS_ADMIN. Interface names there are unknown to this process:
	// give IPv6 zones by index; sender and bound addresses (LocalAddr)
	// carry the index too.
	NetNS int
}
