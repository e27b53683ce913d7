// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

package rdsabi

// Address family and socket level.
const (
	// Family is AF_RDS (and PF_RDS) from <linux/socket.h>; RDS sockets are
	// created with socket(Family, SOCK_SEQPACKET, 0).
	Family = 21
	// SOL is SOL_RDS, the level of RDS socket options and control messages.
	SOL = 276
	// IBABIVersion is RDS_IB_ABI_VERSION, the wire protocol version of the
	// IB transport.
	IBABIVersion = 0x301
)

// Socket options at level SOL.
const (
	OptCancelSentTo  = 1  // RDS_CANCEL_SENT_TO: drop queued messages to a destination
	OptGetMR         = 2  // RDS_GET_MR: register memory (GetMRArgs)
	OptFreeMR        = 3  // RDS_FREE_MR: release a registration (FreeMRArgs)
	OptBarrier       = 4  // RDS_BARRIER: removed from the kernel; listed only to reserve the number
	OptRecvErr       = 5  // RDS_RECVERR: report RDMA errors (int)
	OptCongMonitor   = 6  // RDS_CONG_MONITOR: switch congestion monitoring on or off (int); the kernel builds the port mask itself
	OptGetMRForDest  = 7  // RDS_GET_MR_FOR_DEST: register memory for one peer (GetMRForDestArgs)
	OptTransport     = 8  // SO_RDS_TRANSPORT: get or force the transport (int)
	OptRxPathLatency = 10 // SO_RDS_MSG_RXPATH_LATENCY: enable receive-path tracing (RxTraceOption)
)

// Transports, the values of OptTransport.
const (
	TransIB    = 0        // RDS_TRANS_IB: InfiniBand, RoCE, Soft-RoCE (module rds_rdma)
	TransGap   = 1        // RDS_TRANS_GAP: formerly iWARP, no longer implemented
	TransIWARP = TransGap // RDS_TRANS_IWARP: deprecated alias of TransGap
	TransTCP   = 2        // RDS_TRANS_TCP: RDS over TCP (module rds_tcp)
	TransCount = 3        // RDS_TRANS_COUNT: number of transports the header names

	// TransLoop is the value OptTransport reads on a socket bound to a
	// loopback address (127.0.0.0/8, ::1), whose traffic the kernel's
	// internal loop transport carries. The header does not name it; it is
	// the loop transport's t_type, equal to TransCount, as measured on
	// Linux 6.1.
	TransLoop = 3

	// TransNone is RDS_TRANS_NONE (~0): no transport attached yet, the
	// value an unbound socket reads.
	TransNone = ^uint32(0)
)

// ioctl requests (SIOCPROTOPRIVATE is 0x89E0).
const (
	IoctlSetTOS = 0x89E0 // SIOCRDSSETTOS: set the socket's type of service (uint8)
	IoctlGetTOS = 0x89E1 // SIOCRDSGETTOS: read the socket's type of service (uint8)
)

// Control message types at level SOL.
const (
	CmsgRDMAArgs         = 1  // RDS_CMSG_RDMA_ARGS (send): RDMAArgs
	CmsgRDMADest         = 2  // RDS_CMSG_RDMA_DEST (receive, send): 64-bit cookie
	CmsgRDMAMap          = 3  // RDS_CMSG_RDMA_MAP (send): GetMRArgs
	CmsgRDMAStatus       = 4  // RDS_CMSG_RDMA_STATUS (receive): RDMANotify
	CmsgCongUpdate       = 5  // RDS_CMSG_CONG_UPDATE (receive): 64-bit port mask
	CmsgAtomicFADD       = 6  // RDS_CMSG_ATOMIC_FADD (send): AtomicArgs
	CmsgAtomicCSWP       = 7  // RDS_CMSG_ATOMIC_CSWP (send): AtomicArgs
	CmsgMaskedAtomicFADD = 8  // RDS_CMSG_MASKED_ATOMIC_FADD (send): AtomicArgs
	CmsgMaskedAtomicCSWP = 9  // RDS_CMSG_MASKED_ATOMIC_CSWP (send): AtomicArgs
	CmsgRxPathLatency    = 11 // RDS_CMSG_RXPATH_LATENCY (receive): CmsgRxTrace
	CmsgZcopyCookie      = 12 // RDS_CMSG_ZCOPY_COOKIE (send): 32-bit cookie
	CmsgZcopyCompletion  = 13 // RDS_CMSG_ZCOPY_COMPLETION (receive): ZcopyCookies
)

// getsockopt(SOL, Info*) names: snapshots of kernel state as arrays of
// fixed-size items. The call returns the item size; a short buffer fails
// with ENOSPC and reports the length needed.
const (
	InfoFirst            = 10000 // RDS_INFO_FIRST
	InfoCounters         = 10000 // RDS_INFO_COUNTERS: InfoCounter items
	InfoConnections      = 10001 // RDS_INFO_CONNECTIONS: InfoConnection items
	InfoFlows            = 10002 // RDS_INFO_FLOWS: deprecated, not served
	InfoSendMessages     = 10003 // RDS_INFO_SEND_MESSAGES: InfoMessage items
	InfoRetransMessages  = 10004 // RDS_INFO_RETRANS_MESSAGES: InfoMessage items
	InfoRecvMessages     = 10005 // RDS_INFO_RECV_MESSAGES: InfoMessage items
	InfoSockets          = 10006 // RDS_INFO_SOCKETS: InfoSocket items
	InfoTCPSockets       = 10007 // RDS_INFO_TCP_SOCKETS: InfoTCPSocket items
	InfoIBConnections    = 10008 // RDS_INFO_IB_CONNECTIONS: InfoRDMAConnection items
	InfoConnectionStats  = 10009 // RDS_INFO_CONNECTION_STATS: InfoCounter items
	InfoIWARPConnections = 10010 // RDS_INFO_IWARP_CONNECTIONS: no longer served
	Info6Connections     = 10011 // RDS6_INFO_CONNECTIONS: Info6Connection items
	Info6SendMessages    = 10012 // RDS6_INFO_SEND_MESSAGES: Info6Message items
	Info6RetransMessages = 10013 // RDS6_INFO_RETRANS_MESSAGES: Info6Message items
	Info6RecvMessages    = 10014 // RDS6_INFO_RECV_MESSAGES: Info6Message items
	Info6Sockets         = 10015 // RDS6_INFO_SOCKETS: Info6Socket items
	Info6TCPSockets      = 10016 // RDS6_INFO_TCP_SOCKETS: Info6TCPSocket items
	Info6IBConnections   = 10017 // RDS6_INFO_IB_CONNECTIONS: Info6RDMAConnection items
	InfoLast             = 10017 // RDS_INFO_LAST
)

// Flags of InfoConnection.Flags and Info6Connection.Flags.
const (
	InfoConnFlagSending    = 0x01 // RDS_INFO_CONNECTION_FLAG_SENDING
	InfoConnFlagConnecting = 0x02 // RDS_INFO_CONNECTION_FLAG_CONNECTING
	InfoConnFlagConnected  = 0x04 // RDS_INFO_CONNECTION_FLAG_CONNECTED
)

// Flags of InfoMessage.Flags and Info6Message.Flags.
const (
	InfoMsgFlagAck     = 0x01 // RDS_INFO_MESSAGE_FLAG_ACK
	InfoMsgFlagFastAck = 0x02 // RDS_INFO_MESSAGE_FLAG_FAST_ACK
)

// Array lengths.
const (
	TransNameSize = 16 // TRANSNAMSIZ: NUL-terminated transport name in InfoConnection
	IBGIDLen      = 16 // RDS_IB_GID_LEN: GID length in InfoRDMAConnection
	MaxZcookies   = 8  // RDS_MAX_ZCOOKIES: cookies in one ZcopyCookies
)

// Receive-path latency trace points (enum rds_message_rxpath_latency),
// the values of RxTraceOption.RxTracePos.
const (
	RxHdrToDgramStart = 0 // RDS_MSG_RX_HDR_TO_DGRAM_START
	RxDgramReassemble = 1 // RDS_MSG_RX_DGRAM_REASSEMBLE
	RxDgramDelivered  = 2 // RDS_MSG_RX_DGRAM_DELIVERED
	RxDgramTraceMax   = 3 // RDS_MSG_RX_DGRAM_TRACE_MAX: number of trace points
)

// CongMonitorSize is RDS_CONG_MONITOR_SIZE, the number of bits in a
// congestion monitor mask.
const CongMonitorSize = 64

// CongMonitorBit is RDS_CONG_MONITOR_BIT: the bit of a congestion monitor
// mask that stands for port (ports are grouped modulo 64).
func CongMonitorBit(port uint16) uint { return uint(port) % CongMonitorSize }

// CongMonitorMask is RDS_CONG_MONITOR_MASK: the mask with only port's bit set.
func CongMonitorMask(port uint16) uint64 { return 1 << CongMonitorBit(port) }

// Status values of RDMANotify.Status.
const (
	RDMASuccess     = 0 // RDS_RDMA_SUCCESS
	RDMARemoteError = 1 // RDS_RDMA_REMOTE_ERROR
	RDMACanceled    = 2 // RDS_RDMA_CANCELED
	RDMADropped     = 3 // RDS_RDMA_DROPPED
	RDMAOtherError  = 4 // RDS_RDMA_OTHER_ERROR
)

// Flags of the RDMA structs (RDMAArgs, GetMRArgs, FreeMRArgs, AtomicArgs).
const (
	RDMAReadWrite  = 0x0001 // RDS_RDMA_READWRITE: RDMA WRITE (else READ); MR writable
	RDMAFence      = 0x0002 // RDS_RDMA_FENCE: fence the immediate send
	RDMAInvalidate = 0x0004 // RDS_RDMA_INVALIDATE: invalidate the R_Key when freeing the MR
	RDMAUseOnce    = 0x0008 // RDS_RDMA_USE_ONCE: free the MR after one use
	RDMADontWait   = 0x0010 // RDS_RDMA_DONTWAIT: historical (barrier)
	RDMANotifyMe   = 0x0020 // RDS_RDMA_NOTIFY_ME: queue an RDMA status on completion
	RDMASilent     = 0x0040 // RDS_RDMA_SILENT: do not interrupt the remote side
)

// MaxMessageSize is RDS_MAX_MSG_SIZE (1 MiB) from the kernel-private
// net/rds/rds.h, not part of the uapi header: the largest message payload
// and the largest RDMA transfer or registration the kernel accepts,
// whatever rds(7) says.
const MaxMessageSize = 1 << 20
