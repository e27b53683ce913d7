// Package rdssock is a Go binding of Linux Reliable Datagram Sockets
// (AF_RDS, the kernel's net/rds).
//
// # Sockets
//
// An RDS socket is a SOCK_SEQPACKET socket bound to one IP address and
// port. It sends reliable, ordered (per peer) datagrams to any other RDS
// socket and receives from all of them, without connect or accept: the
// kernel opens one connection per pair of hosts on demand. Listen creates
// and binds a socket; Config holds the options that must be set before
// bind, such as the transport.
//
//	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
//	_, err = c.WriteMsg([]byte("hello"), nil, netip.MustParseAddrPort("10.0.0.2:4000"))
//	n, oobn, flags, from, err := c.ReadMsg(buf, oob)
//
// # Transports
//
// A socket's transport is chosen at bind: InfiniBand/RoCE (module rds_rdma)
// where the address belongs to an RDMA device, TCP (rds_tcp) otherwise,
// and the loopback transport for local addresses. Config.Transport forces
// one; Conn.Transport reports the choice, including the loopback value the
// kernel header leaves unnamed.
//
// # Messages and control messages
//
// ReadMsg and WriteMsg carry control messages, which package cmsg encodes
// and decodes. A receive of 0 data bytes is a message, never end of file:
// RDMA completion notices, congestion updates and zero-copy completions
// arrive as 0-byte messages that carry only control data. Truncation is
// reported with ErrTruncated rather than dropped silently.
//
// Sends and receives honour deadlines; ReadMsgContext and WriteMsgContext also take a context and
// recvmsg or sendmsg flags (MSG_PEEK, MSG_DONTWAIT, MSG_ZEROCOPY). They
// issue sendmsg and recvmsg directly with pooled message headers, so a
// call allocates nothing. Any number of goroutines may send and receive on
// one Conn at once, each with its own context. A send to a congested port
// fails with ErrCongested, or waits with Config.WaitCongested.
// A receive that must wait sleeps in the kernel (recvmsg or ppoll),
// keeping its goroutine's P, as a C program sleeps in recvmsg or poll:
// for a loop that answers or reads message after message that costs far
// less CPU time per message than a wake-up through the Go runtime poller.
// After 10 ms (the runtime's own time slice), or after 250 µs when it
// holds the last free P, it parks in the runtime poller instead, so idle
// receivers hold neither a thread nor a P; a busy receiver parks too,
// about every 8 ms, so that the scheduler sees it take turns. With
// GOMAXPROCS=1 (a process bound to one CPU, a container limited to one)
// a receive first lets every runnable goroutine run, then sleeps for 1 ms
// (which the kernel rounds up to its timer tick, a few ms), and parks at
// once while another wait of the package is parked or after its sleeps
// found no message; goroutines that become runnable during such a sleep
// wait for it to end. A send waiting for room in the
// send buffer sleeps in ppoll the same way; one waiting out a congested
// destination parks in the runtime poller. The socket itself is never
// registered with the runtime poller: RDS wakes a socket for every
// acknowledgement of sent messages, and the poller would report each as
// writability. Config.BusyPoll makes a receive retry briefly before it
// waits, trading CPU time for latency.
//
// # Reliability
//
// RDS delivers each message a socket accepted once and in order per
// sender and receiver, over loss, duplication, reordering and link
// failures (see the reliability suite in integration/reliability). It
// drops, and counts in its recv_drop_* counters, messages for a port no
// socket is bound to; messages still queued when a socket is closed are
// freed without a counter.
//
// # New connections
//
// A Conn is always non-blocking, and Linux sends a non-blocking socket's
// messages on a new RDS/TCP connection on path 0 until the kernels'
// handshake has agreed on the number of paths, and on the socket's own
// path afterwards, so later messages could overtake the first ones (RDS
// orders per path); a blocking C socket waits for the handshake instead.
// Linux up to at least 6.12 can also lose messages sent while the paths
// are being set up (see the BUG notes). So a Conn's first send to each
// peer over RDS/TCP brings the connection up first, as WarmUp does: it
// pings the peer from temporary sockets until the kernel answers and waits
// for the connection's TCP paths. The send's deadline or context bounds
// its wait (a send whose deadline passes first fails with the deadline's
// error, and the warm-up goes on for the next one). Concurrent first sends
// to one peer share one warm-up; later sends to that peer look it up
// without allocating and go straight to the kernel. A send with
// MSG_DONTWAIT does not wait: it fails with EAGAIN until the warm-up it
// started is done. Pings (sends to port 0) never wait, and loopback and
// InfiniBand connections, which have one path, need no warm-up.
//
// If the peer does not answer within 3 seconds (its net.rds.ping_enable is
// 0, or it is unreachable), or the paths have not settled within 10
// seconds, the send goes ahead without it and WarmUpTimeouts counts it:
// without an answered handshake the kernel keeps the socket on path 0. Set
// Config.NoAutoWarmUp to send at once instead, for example when calling
// WarmUp ahead of time or when peers do not answer pings.
//
// # Options and information tables
//
// Config sets the options a socket keeps for its life (transport, buffer
// sizes, RDS_RECVERR, RDS_CONG_MONITOR, SO_RDS_MSG_RXPATH_LATENCY,
// SO_TIMESTAMP, SO_ZEROCOPY, the TOS) when Listen makes it; methods cover
// what a program changes or reads later: SetRecvErr, SetBusyPoll,
// CancelSentTo, SetTOS, TOS, Transport, SetReadBuffer, SetWriteBuffer. The
// registration options (RDS_GET_MR, RDS_GET_MR_FOR_DEST, RDS_FREE_MR) are
// package rdmaops' (Conn.GetMR, GetMRForDest, MR.Free): they take only
// memory that package mapped. The kernel's information tables (what
// rds-info shows) have one method per kind: Counters, Connections,
// Messages, Sockets, TCPSockets and IBConnections. Each lists IPv4 and
// IPv6 peers together, IPv4 addresses as IPv4 (never IPv4-mapped).
//
// # Errors
//
// Errors are *net.OpError values (Net "rds") wrapping *os.SyscallError.
// errors.Is matches the errno and, where one applies, a sentinel:
// ErrUnavailable, ErrCongested, ErrMessageTooLarge,
// ErrTransportUnavailable, ErrNotSupported, ErrTruncated.
//
// # Interfaces
//
// *Conn implements net.PacketConn and syscall.Conn.
//
// On operating systems other than Linux the package compiles and every
// function returns an error matching ErrUnavailable.
package rdssock

// BUG(kernel): Linux up to at least 6.12 can lose messages sent while a new
// RDS/TCP connection sets up its paths: the accepting side resets a path
// whose TCP already acknowledged them. The automatic warm-up (and WarmUp)
// avoids it, except when both hosts open the same connection at the same
// moment. Upstream fixed it in
// "net/rds: rds_tcp_accept_one ought to not discard messages".

// BUG(kernel): after RDS/TCP connections are reset, Linux up to at least
// 6.12 can pair the new TCP connections with different paths than before,
// so a message retransmitted after the reset may be delivered twice, or a
// new one dropped as old (recv_drop_old_seq); upstream fixed it in
// "net/rds: Encode cp_index in TCP source port". Number messages end to
// end if they must survive a reconnect.

// BUG(kernel): over RDS/TCP, the sender's kernel can, rarely and for an
// unknown reason, keep a port marked congested after the receiver drained
// it, so senders to the port wait (WaitCongested) or fail with
// ErrCongested from then on. Bound such waits with a deadline or context
// and treat a long congestion as a failed peer. TESTING.md ("Kernel
// defects measured") has the rates.

import (
	"net"
	"syscall"
)

var (
	_ net.PacketConn = (*Conn)(nil)
	_ syscall.Conn   = (*Conn)(nil)
)
