// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build ignore

// This file is the input of "go tool cgo -godefs"; see gen.go.
//
// godefs derives Go field names from C field names, and the header's names
// ("next_tx_seq") would come out as "Tx_seq" after godefs strips what it
// takes for a prefix. Every struct is therefore mirrored here by a twin
// whose fields carry Go-style names. A twin has exactly the layout of its
// kernel struct: the _Static_assert lines below compare the size and every
// field offset of each twin with the real struct from <linux/rds.h>, so the
// generator refuses to run if a twin drifts from the header.
//
// The kernel declares most RDS_INFO structs __attribute__((packed)), with
// 64-bit and 32-bit integers at offsets that are not multiples of their
// size. Go cannot express such a layout with integer fields, so in the twins
// of packed structs every multi-byte field is a byte array (alignment 1):
// host-order integers are read with encoding/binary.NativeEndian and
// network-order addresses and ports are used as they are.

package rdsabi

/*
#include <stddef.h>
#include <linux/rds.h>

#define SAME_SIZE(twin, real) \
	_Static_assert(sizeof(struct twin) == sizeof(struct real), "size of " #twin)
#define SAME_OFF(twin, tf, real, rf) \
	_Static_assert(offsetof(struct twin, tf) == offsetof(struct real, rf), #twin "." #tf)

struct goInfoCounter {
	__u8	Name[32];
	__u64	Value;
};
SAME_SIZE(goInfoCounter, rds_info_counter);
SAME_OFF(goInfoCounter, Name, rds_info_counter, name);
SAME_OFF(goInfoCounter, Value, rds_info_counter, value);

struct goInfoConnection {
	__u8	NextTxSeq[8];
	__u8	NextRxSeq[8];
	__u8	LocalAddr[4];
	__u8	ForeignAddr[4];
	__u8	Transport[TRANSNAMSIZ];
	__u8	Flags;
	__u8	TOS;
};
SAME_SIZE(goInfoConnection, rds_info_connection);
SAME_OFF(goInfoConnection, NextTxSeq, rds_info_connection, next_tx_seq);
SAME_OFF(goInfoConnection, NextRxSeq, rds_info_connection, next_rx_seq);
SAME_OFF(goInfoConnection, LocalAddr, rds_info_connection, laddr);
SAME_OFF(goInfoConnection, ForeignAddr, rds_info_connection, faddr);
SAME_OFF(goInfoConnection, Transport, rds_info_connection, transport);
SAME_OFF(goInfoConnection, Flags, rds_info_connection, flags);
SAME_OFF(goInfoConnection, TOS, rds_info_connection, tos);

struct goInfo6Connection {
	__u8	NextTxSeq[8];
	__u8	NextRxSeq[8];
	__u8	LocalAddr[16];
	__u8	ForeignAddr[16];
	__u8	Transport[TRANSNAMSIZ];
	__u8	Flags;
};
SAME_SIZE(goInfo6Connection, rds6_info_connection);
SAME_OFF(goInfo6Connection, NextTxSeq, rds6_info_connection, next_tx_seq);
SAME_OFF(goInfo6Connection, NextRxSeq, rds6_info_connection, next_rx_seq);
SAME_OFF(goInfo6Connection, LocalAddr, rds6_info_connection, laddr);
SAME_OFF(goInfo6Connection, ForeignAddr, rds6_info_connection, faddr);
SAME_OFF(goInfo6Connection, Transport, rds6_info_connection, transport);
SAME_OFF(goInfo6Connection, Flags, rds6_info_connection, flags);

struct goInfoMessage {
	__u8	Seq[8];
	__u8	Len[4];
	__u8	LocalAddr[4];
	__u8	ForeignAddr[4];
	__u8	LocalPort[2];
	__u8	ForeignPort[2];
	__u8	Flags;
	__u8	TOS;
};
SAME_SIZE(goInfoMessage, rds_info_message);
SAME_OFF(goInfoMessage, Seq, rds_info_message, seq);
SAME_OFF(goInfoMessage, Len, rds_info_message, len);
SAME_OFF(goInfoMessage, LocalAddr, rds_info_message, laddr);
SAME_OFF(goInfoMessage, ForeignAddr, rds_info_message, faddr);
SAME_OFF(goInfoMessage, LocalPort, rds_info_message, lport);
SAME_OFF(goInfoMessage, ForeignPort, rds_info_message, fport);
SAME_OFF(goInfoMessage, Flags, rds_info_message, flags);
SAME_OFF(goInfoMessage, TOS, rds_info_message, tos);

struct goInfo6Message {
	__u8	Seq[8];
	__u8	Len[4];
	__u8	LocalAddr[16];
	__u8	ForeignAddr[16];
	__u8	LocalPort[2];
	__u8	ForeignPort[2];
	__u8	Flags;
	__u8	TOS;
};
SAME_SIZE(goInfo6Message, rds6_info_message);
SAME_OFF(goInfo6Message, Seq, rds6_info_message, seq);
SAME_OFF(goInfo6Message, Len, rds6_info_message, len);
SAME_OFF(goInfo6Message, LocalAddr, rds6_info_message, laddr);
SAME_OFF(goInfo6Message, ForeignAddr, rds6_info_message, faddr);
SAME_OFF(goInfo6Message, LocalPort, rds6_info_message, lport);
SAME_OFF(goInfo6Message, ForeignPort, rds6_info_message, fport);
SAME_OFF(goInfo6Message, Flags, rds6_info_message, flags);
SAME_OFF(goInfo6Message, TOS, rds6_info_message, tos);

struct goInfoSocket {
	__u8	SndBuf[4];
	__u8	BoundAddr[4];
	__u8	ConnectedAddr[4];
	__u8	BoundPort[2];
	__u8	ConnectedPort[2];
	__u8	RcvBuf[4];
	__u8	Inum[8];
};
SAME_SIZE(goInfoSocket, rds_info_socket);
SAME_OFF(goInfoSocket, SndBuf, rds_info_socket, sndbuf);
SAME_OFF(goInfoSocket, BoundAddr, rds_info_socket, bound_addr);
SAME_OFF(goInfoSocket, ConnectedAddr, rds_info_socket, connected_addr);
SAME_OFF(goInfoSocket, BoundPort, rds_info_socket, bound_port);
SAME_OFF(goInfoSocket, ConnectedPort, rds_info_socket, connected_port);
SAME_OFF(goInfoSocket, RcvBuf, rds_info_socket, rcvbuf);
SAME_OFF(goInfoSocket, Inum, rds_info_socket, inum);

struct goInfo6Socket {
	__u8	SndBuf[4];
	__u8	BoundAddr[16];
	__u8	ConnectedAddr[16];
	__u8	BoundPort[2];
	__u8	ConnectedPort[2];
	__u8	RcvBuf[4];
	__u8	Inum[8];
};
SAME_SIZE(goInfo6Socket, rds6_info_socket);
SAME_OFF(goInfo6Socket, SndBuf, rds6_info_socket, sndbuf);
SAME_OFF(goInfo6Socket, BoundAddr, rds6_info_socket, bound_addr);
SAME_OFF(goInfo6Socket, ConnectedAddr, rds6_info_socket, connected_addr);
SAME_OFF(goInfo6Socket, BoundPort, rds6_info_socket, bound_port);
SAME_OFF(goInfo6Socket, ConnectedPort, rds6_info_socket, connected_port);
SAME_OFF(goInfo6Socket, RcvBuf, rds6_info_socket, rcvbuf);
SAME_OFF(goInfo6Socket, Inum, rds6_info_socket, inum);

struct goInfoTCPSocket {
	__u8	LocalAddr[4];
	__u8	LocalPort[2];
	__u8	PeerAddr[4];
	__u8	PeerPort[2];
	__u8	HdrRem[8];
	__u8	DataRem[8];
	__u8	LastSentNxt[4];
	__u8	LastExpectedUna[4];
	__u8	LastSeenUna[4];
	__u8	TOS;
};
SAME_SIZE(goInfoTCPSocket, rds_info_tcp_socket);
SAME_OFF(goInfoTCPSocket, LocalAddr, rds_info_tcp_socket, local_addr);
SAME_OFF(goInfoTCPSocket, LocalPort, rds_info_tcp_socket, local_port);
SAME_OFF(goInfoTCPSocket, PeerAddr, rds_info_tcp_socket, peer_addr);
SAME_OFF(goInfoTCPSocket, PeerPort, rds_info_tcp_socket, peer_port);
SAME_OFF(goInfoTCPSocket, HdrRem, rds_info_tcp_socket, hdr_rem);
SAME_OFF(goInfoTCPSocket, DataRem, rds_info_tcp_socket, data_rem);
SAME_OFF(goInfoTCPSocket, LastSentNxt, rds_info_tcp_socket, last_sent_nxt);
SAME_OFF(goInfoTCPSocket, LastExpectedUna, rds_info_tcp_socket, last_expected_una);
SAME_OFF(goInfoTCPSocket, LastSeenUna, rds_info_tcp_socket, last_seen_una);
SAME_OFF(goInfoTCPSocket, TOS, rds_info_tcp_socket, tos);

struct goInfo6TCPSocket {
	__u8	LocalAddr[16];
	__u8	LocalPort[2];
	__u8	PeerAddr[16];
	__u8	PeerPort[2];
	__u8	HdrRem[8];
	__u8	DataRem[8];
	__u8	LastSentNxt[4];
	__u8	LastExpectedUna[4];
	__u8	LastSeenUna[4];
};
SAME_SIZE(goInfo6TCPSocket, rds6_info_tcp_socket);
SAME_OFF(goInfo6TCPSocket, LocalAddr, rds6_info_tcp_socket, local_addr);
SAME_OFF(goInfo6TCPSocket, LocalPort, rds6_info_tcp_socket, local_port);
SAME_OFF(goInfo6TCPSocket, PeerAddr, rds6_info_tcp_socket, peer_addr);
SAME_OFF(goInfo6TCPSocket, PeerPort, rds6_info_tcp_socket, peer_port);
SAME_OFF(goInfo6TCPSocket, HdrRem, rds6_info_tcp_socket, hdr_rem);
SAME_OFF(goInfo6TCPSocket, DataRem, rds6_info_tcp_socket, data_rem);
SAME_OFF(goInfo6TCPSocket, LastSentNxt, rds6_info_tcp_socket, last_sent_nxt);
SAME_OFF(goInfo6TCPSocket, LastExpectedUna, rds6_info_tcp_socket, last_expected_una);
SAME_OFF(goInfo6TCPSocket, LastSeenUna, rds6_info_tcp_socket, last_seen_una);

struct goInfoRDMAConnection {
	__u8	SrcAddr[4];
	__u8	DstAddr[4];
	__u8	SrcGID[RDS_IB_GID_LEN];
	__u8	DstGID[RDS_IB_GID_LEN];
	__u32	MaxSendWR;
	__u32	MaxRecvWR;
	__u32	MaxSendSGE;
	__u32	RDMAMRMax;
	__u32	RDMAMRSize;
	__u8	TOS;
	__u8	SL;
	__u32	CacheAllocs;
};
SAME_SIZE(goInfoRDMAConnection, rds_info_rdma_connection);
SAME_OFF(goInfoRDMAConnection, SrcAddr, rds_info_rdma_connection, src_addr);
SAME_OFF(goInfoRDMAConnection, DstAddr, rds_info_rdma_connection, dst_addr);
SAME_OFF(goInfoRDMAConnection, SrcGID, rds_info_rdma_connection, src_gid);
SAME_OFF(goInfoRDMAConnection, DstGID, rds_info_rdma_connection, dst_gid);
SAME_OFF(goInfoRDMAConnection, MaxSendWR, rds_info_rdma_connection, max_send_wr);
SAME_OFF(goInfoRDMAConnection, MaxRecvWR, rds_info_rdma_connection, max_recv_wr);
SAME_OFF(goInfoRDMAConnection, MaxSendSGE, rds_info_rdma_connection, max_send_sge);
SAME_OFF(goInfoRDMAConnection, RDMAMRMax, rds_info_rdma_connection, rdma_mr_max);
SAME_OFF(goInfoRDMAConnection, RDMAMRSize, rds_info_rdma_connection, rdma_mr_size);
SAME_OFF(goInfoRDMAConnection, TOS, rds_info_rdma_connection, tos);
SAME_OFF(goInfoRDMAConnection, SL, rds_info_rdma_connection, sl);
SAME_OFF(goInfoRDMAConnection, CacheAllocs, rds_info_rdma_connection, cache_allocs);

struct goInfo6RDMAConnection {
	__u8	SrcAddr[16];
	__u8	DstAddr[16];
	__u8	SrcGID[RDS_IB_GID_LEN];
	__u8	DstGID[RDS_IB_GID_LEN];
	__u32	MaxSendWR;
	__u32	MaxRecvWR;
	__u32	MaxSendSGE;
	__u32	RDMAMRMax;
	__u32	RDMAMRSize;
	__u8	TOS;
	__u8	SL;
	__u32	CacheAllocs;
};
SAME_SIZE(goInfo6RDMAConnection, rds6_info_rdma_connection);
SAME_OFF(goInfo6RDMAConnection, SrcAddr, rds6_info_rdma_connection, src_addr);
SAME_OFF(goInfo6RDMAConnection, DstAddr, rds6_info_rdma_connection, dst_addr);
SAME_OFF(goInfo6RDMAConnection, SrcGID, rds6_info_rdma_connection, src_gid);
SAME_OFF(goInfo6RDMAConnection, DstGID, rds6_info_rdma_connection, dst_gid);
SAME_OFF(goInfo6RDMAConnection, MaxSendWR, rds6_info_rdma_connection, max_send_wr);
SAME_OFF(goInfo6RDMAConnection, MaxRecvWR, rds6_info_rdma_connection, max_recv_wr);
SAME_OFF(goInfo6RDMAConnection, MaxSendSGE, rds6_info_rdma_connection, max_send_sge);
SAME_OFF(goInfo6RDMAConnection, RDMAMRMax, rds6_info_rdma_connection, rdma_mr_max);
SAME_OFF(goInfo6RDMAConnection, RDMAMRSize, rds6_info_rdma_connection, rdma_mr_size);
SAME_OFF(goInfo6RDMAConnection, TOS, rds6_info_rdma_connection, tos);
SAME_OFF(goInfo6RDMAConnection, SL, rds6_info_rdma_connection, sl);
SAME_OFF(goInfo6RDMAConnection, CacheAllocs, rds6_info_rdma_connection, cache_allocs);

struct goRxTraceOption {
	__u8	RxTraces;
	__u8	RxTracePos[RDS_MSG_RX_DGRAM_TRACE_MAX];
};
SAME_SIZE(goRxTraceOption, rds_rx_trace_so);
SAME_OFF(goRxTraceOption, RxTraces, rds_rx_trace_so, rx_traces);
SAME_OFF(goRxTraceOption, RxTracePos, rds_rx_trace_so, rx_trace_pos);

// rx_trace is the only __u64 in these structs that C places after a gap:
// at offset 8 where __u64 is aligned to 8 (every 64-bit ABI, and arm EABI
// and mips o32 among the 32-bit ones), at offset 4 on i386. Go aligns
// uint64 to 4 on all its 32-bit ports, so the gap is spelled out as a field
// for godefs to copy; without it Go on arm and mips would put RxTrace at 4.
// The last assertion checks that no implicit padding is left.
struct goCmsgRxTrace {
	__u8	RxTraces;
	__u8	RxTracePos[RDS_MSG_RX_DGRAM_TRACE_MAX];
#if !defined(__i386__)
	__u8	Pad[4];
#endif
	__u64	RxTrace[RDS_MSG_RX_DGRAM_TRACE_MAX];
};
SAME_SIZE(goCmsgRxTrace, rds_cmsg_rx_trace);
SAME_OFF(goCmsgRxTrace, RxTraces, rds_cmsg_rx_trace, rx_traces);
SAME_OFF(goCmsgRxTrace, RxTracePos, rds_cmsg_rx_trace, rx_trace_pos);
SAME_OFF(goCmsgRxTrace, RxTrace, rds_cmsg_rx_trace, rx_trace);
_Static_assert(offsetof(struct goCmsgRxTrace, RxTrace) ==
	offsetof(struct goCmsgRxTrace, RxTracePos) + RDS_MSG_RX_DGRAM_TRACE_MAX
#if !defined(__i386__)
	+ 4
#endif
	, "goCmsgRxTrace has implicit padding");

struct goIovec {
	__u64	Addr;
	__u64	Bytes;
};
SAME_SIZE(goIovec, rds_iovec);
SAME_OFF(goIovec, Addr, rds_iovec, addr);
SAME_OFF(goIovec, Bytes, rds_iovec, bytes);

struct goGetMRArgs {
	struct goIovec	Vec;
	__u64		CookieAddr;
	__u64		Flags;
};
SAME_SIZE(goGetMRArgs, rds_get_mr_args);
SAME_OFF(goGetMRArgs, Vec, rds_get_mr_args, vec);
SAME_OFF(goGetMRArgs, CookieAddr, rds_get_mr_args, cookie_addr);
SAME_OFF(goGetMRArgs, Flags, rds_get_mr_args, flags);

struct goGetMRForDestArgs {
	__u8		DestAddr[sizeof(struct __kernel_sockaddr_storage)];
	struct goIovec	Vec;
	__u64		CookieAddr;
	__u64		Flags;
};
SAME_SIZE(goGetMRForDestArgs, rds_get_mr_for_dest_args);
SAME_OFF(goGetMRForDestArgs, DestAddr, rds_get_mr_for_dest_args, dest_addr);
SAME_OFF(goGetMRForDestArgs, Vec, rds_get_mr_for_dest_args, vec);
SAME_OFF(goGetMRForDestArgs, CookieAddr, rds_get_mr_for_dest_args, cookie_addr);
SAME_OFF(goGetMRForDestArgs, Flags, rds_get_mr_for_dest_args, flags);

struct goFreeMRArgs {
	__u64	Cookie;
	__u64	Flags;
};
SAME_SIZE(goFreeMRArgs, rds_free_mr_args);
SAME_OFF(goFreeMRArgs, Cookie, rds_free_mr_args, cookie);
SAME_OFF(goFreeMRArgs, Flags, rds_free_mr_args, flags);

struct goRDMAArgs {
	__u64		Cookie;
	struct goIovec	RemoteVec;
	__u64		LocalVecAddr;
	__u64		NrLocal;
	__u64		Flags;
	__u64		UserToken;
};
SAME_SIZE(goRDMAArgs, rds_rdma_args);
SAME_OFF(goRDMAArgs, Cookie, rds_rdma_args, cookie);
SAME_OFF(goRDMAArgs, RemoteVec, rds_rdma_args, remote_vec);
SAME_OFF(goRDMAArgs, LocalVecAddr, rds_rdma_args, local_vec_addr);
SAME_OFF(goRDMAArgs, NrLocal, rds_rdma_args, nr_local);
SAME_OFF(goRDMAArgs, Flags, rds_rdma_args, flags);
SAME_OFF(goRDMAArgs, UserToken, rds_rdma_args, user_token);

struct goRDMANotify {
	__u64	UserToken;
	__s32	Status;
};
SAME_SIZE(goRDMANotify, rds_rdma_notify);
SAME_OFF(goRDMANotify, UserToken, rds_rdma_notify, user_token);
SAME_OFF(goRDMANotify, Status, rds_rdma_notify, status);

struct goZcopyCookies {
	__u32	Num;
	__u32	Cookies[RDS_MAX_ZCOOKIES];
};
SAME_SIZE(goZcopyCookies, rds_zcopy_cookies);
SAME_OFF(goZcopyCookies, Num, rds_zcopy_cookies, num);
SAME_OFF(goZcopyCookies, Cookies, rds_zcopy_cookies, cookies);
*/
import "C"

// InfoCounter is struct rds_info_counter, one item of RDS_INFO_COUNTERS.
type InfoCounter C.struct_goInfoCounter

// InfoConnection is struct rds_info_connection (packed), one item of
// RDS_INFO_CONNECTIONS. NextTxSeq and NextRxSeq are host-order integers;
// the addresses are in network order.
type InfoConnection C.struct_goInfoConnection

// Info6Connection is struct rds6_info_connection (packed), one item of
// RDS6_INFO_CONNECTIONS.
type Info6Connection C.struct_goInfo6Connection

// InfoMessage is struct rds_info_message (packed), one item of
// RDS_INFO_SEND_MESSAGES, RDS_INFO_RETRANS_MESSAGES and
// RDS_INFO_RECV_MESSAGES. Seq and Len are host order; addresses and ports
// are network order.
type InfoMessage C.struct_goInfoMessage

// Info6Message is struct rds6_info_message (packed), the IPv6 form of
// InfoMessage.
type Info6Message C.struct_goInfo6Message

// InfoSocket is struct rds_info_socket (packed), one item of
// RDS_INFO_SOCKETS. SndBuf, RcvBuf and Inum are host order; addresses and
// ports are network order.
type InfoSocket C.struct_goInfoSocket

// Info6Socket is struct rds6_info_socket (packed), one item of
// RDS6_INFO_SOCKETS.
type Info6Socket C.struct_goInfo6Socket

// InfoTCPSocket is struct rds_info_tcp_socket (packed), one item of
// RDS_INFO_TCP_SOCKETS.
type InfoTCPSocket C.struct_goInfoTCPSocket

// Info6TCPSocket is struct rds6_info_tcp_socket (packed), one item of
// RDS6_INFO_TCP_SOCKETS.
type Info6TCPSocket C.struct_goInfo6TCPSocket

// InfoRDMAConnection is struct rds_info_rdma_connection (not packed), one
// item of RDS_INFO_IB_CONNECTIONS.
type InfoRDMAConnection C.struct_goInfoRDMAConnection

// Info6RDMAConnection is struct rds6_info_rdma_connection (not packed), one
// item of RDS6_INFO_IB_CONNECTIONS.
type Info6RDMAConnection C.struct_goInfo6RDMAConnection

// RxTraceOption is struct rds_rx_trace_so, the value of the
// SO_RDS_MSG_RXPATH_LATENCY socket option.
type RxTraceOption C.struct_goRxTraceOption

// CmsgRxTrace is struct rds_cmsg_rx_trace, the data of an
// RDS_CMSG_RXPATH_LATENCY control message.
type CmsgRxTrace C.struct_goCmsgRxTrace

// Iovec is struct rds_iovec. Addr is a user-space virtual address (or an
// offset into a registered region when it names remote memory).
type Iovec C.struct_goIovec

// GetMRArgs is struct rds_get_mr_args, the argument of RDS_GET_MR and the
// data of RDS_CMSG_RDMA_MAP. Vec.Addr and CookieAddr are user-space
// addresses.
type GetMRArgs C.struct_goGetMRArgs

// GetMRForDestArgs is struct rds_get_mr_for_dest_args, the argument of
// RDS_GET_MR_FOR_DEST. DestAddr holds a sockaddr_in or sockaddr_in6.
type GetMRForDestArgs C.struct_goGetMRForDestArgs

// FreeMRArgs is struct rds_free_mr_args, the argument of RDS_FREE_MR.
type FreeMRArgs C.struct_goFreeMRArgs

// RDMAArgs is struct rds_rdma_args, the data of RDS_CMSG_RDMA_ARGS.
// LocalVecAddr is the user-space address of an array of NrLocal Iovec.
type RDMAArgs C.struct_goRDMAArgs

// RDMANotify is struct rds_rdma_notify, the data of RDS_CMSG_RDMA_STATUS.
type RDMANotify C.struct_goRDMANotify

// ZcopyCookies is struct rds_zcopy_cookies, the data of
// RDS_CMSG_ZCOPY_COMPLETION.
type ZcopyCookies C.struct_goZcopyCookies

// Sizes of the kernel structs, taken from <linux/rds.h> itself.
const (
	SizeofInfoCounter         = C.sizeof_struct_rds_info_counter
	SizeofInfoConnection      = C.sizeof_struct_rds_info_connection
	SizeofInfo6Connection     = C.sizeof_struct_rds6_info_connection
	SizeofInfoMessage         = C.sizeof_struct_rds_info_message
	SizeofInfo6Message        = C.sizeof_struct_rds6_info_message
	SizeofInfoSocket          = C.sizeof_struct_rds_info_socket
	SizeofInfo6Socket         = C.sizeof_struct_rds6_info_socket
	SizeofInfoTCPSocket       = C.sizeof_struct_rds_info_tcp_socket
	SizeofInfo6TCPSocket      = C.sizeof_struct_rds6_info_tcp_socket
	SizeofInfoRDMAConnection  = C.sizeof_struct_rds_info_rdma_connection
	SizeofInfo6RDMAConnection = C.sizeof_struct_rds6_info_rdma_connection
	SizeofRxTraceOption       = C.sizeof_struct_rds_rx_trace_so
	SizeofCmsgRxTrace         = C.sizeof_struct_rds_cmsg_rx_trace
	SizeofIovec               = C.sizeof_struct_rds_iovec
	SizeofGetMRArgs           = C.sizeof_struct_rds_get_mr_args
	SizeofGetMRForDestArgs    = C.sizeof_struct_rds_get_mr_for_dest_args
	SizeofFreeMRArgs          = C.sizeof_struct_rds_free_mr_args
	SizeofRDMAArgs            = C.sizeof_struct_rds_rdma_args
	SizeofAtomicArgs          = C.sizeof_struct_rds_atomic_args
	SizeofRDMANotify          = C.sizeof_struct_rds_rdma_notify
	SizeofZcopyCookies        = C.sizeof_struct_rds_zcopy_cookies
	SizeofCookie              = C.sizeof_rds_rdma_cookie_t
)
