// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package rdsabi

import (
	"runtime"
	"testing"
	"unsafe"
)

// The expected values below were derived by hand from <linux/rds.h>:
// packed structs are the running sum of their field sizes; the others
// follow the C rules (u32 aligned to 4, struct size a multiple of the
// largest alignment) with u64 aligned to 8 on every Linux ABI Go supports
// except i386, which aligns it to 4 (u64Align).

// u64Align is the alignment C gives __u64 on this ABI.
var u64Align uintptr = 8

func init() {
	if runtime.GOARCH == "386" {
		u64Align = 4
	}
}

// alignUp rounds n up to a multiple of a.
func alignUp(n, a uintptr) uintptr { return (n + a - 1) &^ (a - 1) }

type layoutCase struct {
	name      string
	got, want uintptr
}

func checkLayout(t *testing.T, cases []layoutCase) {
	t.Helper()
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestLayoutInfo(t *testing.T) {
	var (
		ctr InfoCounter
		c4  InfoConnection
		c6  Info6Connection
		m4  InfoMessage
		m6  Info6Message
		s4  InfoSocket
		s6  Info6Socket
		t4  InfoTCPSocket
		t6  Info6TCPSocket
		r4  InfoRDMAConnection
		r6  Info6RDMAConnection
	)
	checkLayout(t, []layoutCase{
		// rds_info_counter: name[32] value(u64) = 40
		{"sizeof(InfoCounter)", unsafe.Sizeof(ctr), 40},
		{"SizeofInfoCounter", SizeofInfoCounter, 40},
		{"InfoCounter.Name", unsafe.Offsetof(ctr.Name), 0},
		{"InfoCounter.Value", unsafe.Offsetof(ctr.Value), 32},

		// rds_info_connection: 8 8 4 4 16 1 1 = 42
		{"sizeof(InfoConnection)", unsafe.Sizeof(c4), 42},
		{"SizeofInfoConnection", SizeofInfoConnection, 42},
		{"InfoConnection.NextTxSeq", unsafe.Offsetof(c4.NextTxSeq), 0},
		{"InfoConnection.NextRxSeq", unsafe.Offsetof(c4.NextRxSeq), 8},
		{"InfoConnection.LocalAddr", unsafe.Offsetof(c4.LocalAddr), 16},
		{"InfoConnection.ForeignAddr", unsafe.Offsetof(c4.ForeignAddr), 20},
		{"InfoConnection.Transport", unsafe.Offsetof(c4.Transport), 24},
		{"InfoConnection.Flags", unsafe.Offsetof(c4.Flags), 40},
		{"InfoConnection.TOS", unsafe.Offsetof(c4.TOS), 41},

		// rds6_info_connection: 8 8 16 16 16 1 = 65
		{"sizeof(Info6Connection)", unsafe.Sizeof(c6), 65},
		{"SizeofInfo6Connection", SizeofInfo6Connection, 65},
		{"Info6Connection.NextTxSeq", unsafe.Offsetof(c6.NextTxSeq), 0},
		{"Info6Connection.NextRxSeq", unsafe.Offsetof(c6.NextRxSeq), 8},
		{"Info6Connection.LocalAddr", unsafe.Offsetof(c6.LocalAddr), 16},
		{"Info6Connection.ForeignAddr", unsafe.Offsetof(c6.ForeignAddr), 32},
		{"Info6Connection.Transport", unsafe.Offsetof(c6.Transport), 48},
		{"Info6Connection.Flags", unsafe.Offsetof(c6.Flags), 64},

		// rds_info_message: 8 4 4 4 2 2 1 1 = 26
		{"sizeof(InfoMessage)", unsafe.Sizeof(m4), 26},
		{"SizeofInfoMessage", SizeofInfoMessage, 26},
		{"InfoMessage.Seq", unsafe.Offsetof(m4.Seq), 0},
		{"InfoMessage.Len", unsafe.Offsetof(m4.Len), 8},
		{"InfoMessage.LocalAddr", unsafe.Offsetof(m4.LocalAddr), 12},
		{"InfoMessage.ForeignAddr", unsafe.Offsetof(m4.ForeignAddr), 16},
		{"InfoMessage.LocalPort", unsafe.Offsetof(m4.LocalPort), 20},
		{"InfoMessage.ForeignPort", unsafe.Offsetof(m4.ForeignPort), 22},
		{"InfoMessage.Flags", unsafe.Offsetof(m4.Flags), 24},
		{"InfoMessage.TOS", unsafe.Offsetof(m4.TOS), 25},

		// rds6_info_message: 8 4 16 16 2 2 1 1 = 50
		{"sizeof(Info6Message)", unsafe.Sizeof(m6), 50},
		{"SizeofInfo6Message", SizeofInfo6Message, 50},
		{"Info6Message.Seq", unsafe.Offsetof(m6.Seq), 0},
		{"Info6Message.Len", unsafe.Offsetof(m6.Len), 8},
		{"Info6Message.LocalAddr", unsafe.Offsetof(m6.LocalAddr), 12},
		{"Info6Message.ForeignAddr", unsafe.Offsetof(m6.ForeignAddr), 28},
		{"Info6Message.LocalPort", unsafe.Offsetof(m6.LocalPort), 44},
		{"Info6Message.ForeignPort", unsafe.Offsetof(m6.ForeignPort), 46},
		{"Info6Message.Flags", unsafe.Offsetof(m6.Flags), 48},
		{"Info6Message.TOS", unsafe.Offsetof(m6.TOS), 49},

		// rds_info_socket: 4 4 4 2 2 4 8 = 28
		{"sizeof(InfoSocket)", unsafe.Sizeof(s4), 28},
		{"SizeofInfoSocket", SizeofInfoSocket, 28},
		{"InfoSocket.SndBuf", unsafe.Offsetof(s4.SndBuf), 0},
		{"InfoSocket.BoundAddr", unsafe.Offsetof(s4.BoundAddr), 4},
		{"InfoSocket.ConnectedAddr", unsafe.Offsetof(s4.ConnectedAddr), 8},
		{"InfoSocket.BoundPort", unsafe.Offsetof(s4.BoundPort), 12},
		{"InfoSocket.ConnectedPort", unsafe.Offsetof(s4.ConnectedPort), 14},
		{"InfoSocket.RcvBuf", unsafe.Offsetof(s4.RcvBuf), 16},
		{"InfoSocket.Inum", unsafe.Offsetof(s4.Inum), 20},

		// rds6_info_socket: 4 16 16 2 2 4 8 = 52
		{"sizeof(Info6Socket)", unsafe.Sizeof(s6), 52},
		{"SizeofInfo6Socket", SizeofInfo6Socket, 52},
		{"Info6Socket.SndBuf", unsafe.Offsetof(s6.SndBuf), 0},
		{"Info6Socket.BoundAddr", unsafe.Offsetof(s6.BoundAddr), 4},
		{"Info6Socket.ConnectedAddr", unsafe.Offsetof(s6.ConnectedAddr), 20},
		{"Info6Socket.BoundPort", unsafe.Offsetof(s6.BoundPort), 36},
		{"Info6Socket.ConnectedPort", unsafe.Offsetof(s6.ConnectedPort), 38},
		{"Info6Socket.RcvBuf", unsafe.Offsetof(s6.RcvBuf), 40},
		{"Info6Socket.Inum", unsafe.Offsetof(s6.Inum), 44},

		// rds_info_tcp_socket: 4 2 4 2 8 8 4 4 4 1 = 41
		{"sizeof(InfoTCPSocket)", unsafe.Sizeof(t4), 41},
		{"SizeofInfoTCPSocket", SizeofInfoTCPSocket, 41},
		{"InfoTCPSocket.LocalAddr", unsafe.Offsetof(t4.LocalAddr), 0},
		{"InfoTCPSocket.LocalPort", unsafe.Offsetof(t4.LocalPort), 4},
		{"InfoTCPSocket.PeerAddr", unsafe.Offsetof(t4.PeerAddr), 6},
		{"InfoTCPSocket.PeerPort", unsafe.Offsetof(t4.PeerPort), 10},
		{"InfoTCPSocket.HdrRem", unsafe.Offsetof(t4.HdrRem), 12},
		{"InfoTCPSocket.DataRem", unsafe.Offsetof(t4.DataRem), 20},
		{"InfoTCPSocket.LastSentNxt", unsafe.Offsetof(t4.LastSentNxt), 28},
		{"InfoTCPSocket.LastExpectedUna", unsafe.Offsetof(t4.LastExpectedUna), 32},
		{"InfoTCPSocket.LastSeenUna", unsafe.Offsetof(t4.LastSeenUna), 36},
		{"InfoTCPSocket.TOS", unsafe.Offsetof(t4.TOS), 40},

		// rds6_info_tcp_socket: 16 2 16 2 8 8 4 4 4 = 64
		{"sizeof(Info6TCPSocket)", unsafe.Sizeof(t6), 64},
		{"SizeofInfo6TCPSocket", SizeofInfo6TCPSocket, 64},
		{"Info6TCPSocket.LocalAddr", unsafe.Offsetof(t6.LocalAddr), 0},
		{"Info6TCPSocket.LocalPort", unsafe.Offsetof(t6.LocalPort), 16},
		{"Info6TCPSocket.PeerAddr", unsafe.Offsetof(t6.PeerAddr), 18},
		{"Info6TCPSocket.PeerPort", unsafe.Offsetof(t6.PeerPort), 34},
		{"Info6TCPSocket.HdrRem", unsafe.Offsetof(t6.HdrRem), 36},
		{"Info6TCPSocket.DataRem", unsafe.Offsetof(t6.DataRem), 44},
		{"Info6TCPSocket.LastSentNxt", unsafe.Offsetof(t6.LastSentNxt), 52},
		{"Info6TCPSocket.LastExpectedUna", unsafe.Offsetof(t6.LastExpectedUna), 56},
		{"Info6TCPSocket.LastSeenUna", unsafe.Offsetof(t6.LastSeenUna), 60},

		// rds_info_rdma_connection (not packed): 4 4 16 16 5*4 1 1,
		// 2 bytes of padding, cache_allocs at 64; size 68.
		{"sizeof(InfoRDMAConnection)", unsafe.Sizeof(r4), 68},
		{"SizeofInfoRDMAConnection", SizeofInfoRDMAConnection, 68},
		{"InfoRDMAConnection.SrcAddr", unsafe.Offsetof(r4.SrcAddr), 0},
		{"InfoRDMAConnection.DstAddr", unsafe.Offsetof(r4.DstAddr), 4},
		{"InfoRDMAConnection.SrcGID", unsafe.Offsetof(r4.SrcGID), 8},
		{"InfoRDMAConnection.DstGID", unsafe.Offsetof(r4.DstGID), 24},
		{"InfoRDMAConnection.MaxSendWR", unsafe.Offsetof(r4.MaxSendWR), 40},
		{"InfoRDMAConnection.MaxRecvWR", unsafe.Offsetof(r4.MaxRecvWR), 44},
		{"InfoRDMAConnection.MaxSendSGE", unsafe.Offsetof(r4.MaxSendSGE), 48},
		{"InfoRDMAConnection.RDMAMRMax", unsafe.Offsetof(r4.RDMAMRMax), 52},
		{"InfoRDMAConnection.RDMAMRSize", unsafe.Offsetof(r4.RDMAMRSize), 56},
		{"InfoRDMAConnection.TOS", unsafe.Offsetof(r4.TOS), 60},
		{"InfoRDMAConnection.SL", unsafe.Offsetof(r4.SL), 61},
		{"InfoRDMAConnection.CacheAllocs", unsafe.Offsetof(r4.CacheAllocs), 64},

		// rds6_info_rdma_connection: 16 16 16 16 5*4 1 1, pad 2, u32 at 88; 92.
		{"sizeof(Info6RDMAConnection)", unsafe.Sizeof(r6), 92},
		{"SizeofInfo6RDMAConnection", SizeofInfo6RDMAConnection, 92},
		{"Info6RDMAConnection.SrcAddr", unsafe.Offsetof(r6.SrcAddr), 0},
		{"Info6RDMAConnection.DstAddr", unsafe.Offsetof(r6.DstAddr), 16},
		{"Info6RDMAConnection.SrcGID", unsafe.Offsetof(r6.SrcGID), 32},
		{"Info6RDMAConnection.DstGID", unsafe.Offsetof(r6.DstGID), 48},
		{"Info6RDMAConnection.MaxSendWR", unsafe.Offsetof(r6.MaxSendWR), 64},
		{"Info6RDMAConnection.MaxRecvWR", unsafe.Offsetof(r6.MaxRecvWR), 68},
		{"Info6RDMAConnection.MaxSendSGE", unsafe.Offsetof(r6.MaxSendSGE), 72},
		{"Info6RDMAConnection.RDMAMRMax", unsafe.Offsetof(r6.RDMAMRMax), 76},
		{"Info6RDMAConnection.RDMAMRSize", unsafe.Offsetof(r6.RDMAMRSize), 80},
		{"Info6RDMAConnection.TOS", unsafe.Offsetof(r6.TOS), 84},
		{"Info6RDMAConnection.SL", unsafe.Offsetof(r6.SL), 85},
		{"Info6RDMAConnection.CacheAllocs", unsafe.Offsetof(r6.CacheAllocs), 88},
	})
}

func TestLayoutRDMA(t *testing.T) {
	var (
		so  RxTraceOption
		tr  CmsgRxTrace
		iov Iovec
		mr  GetMRArgs
		md  GetMRForDestArgs
		fr  FreeMRArgs
		ra  RDMAArgs
		aa  AtomicArgs
		nt  RDMANotify
		zc  ZcopyCookies
	)
	checkLayout(t, []layoutCase{
		// rds_rx_trace_so: u8 u8[3] = 4
		{"sizeof(RxTraceOption)", unsafe.Sizeof(so), 4},
		{"SizeofRxTraceOption", SizeofRxTraceOption, 4},
		{"RxTraceOption.RxTraces", unsafe.Offsetof(so.RxTraces), 0},
		{"RxTraceOption.RxTracePos", unsafe.Offsetof(so.RxTracePos), 1},

		// rds_cmsg_rx_trace: u8 u8[3], pad to the u64 alignment, u64[3]:
		// 32 bytes, 28 on i386
		{"sizeof(CmsgRxTrace)", unsafe.Sizeof(tr), alignUp(4, u64Align) + 24},
		{"SizeofCmsgRxTrace", SizeofCmsgRxTrace, alignUp(4, u64Align) + 24},
		{"CmsgRxTrace.RxTraces", unsafe.Offsetof(tr.RxTraces), 0},
		{"CmsgRxTrace.RxTracePos", unsafe.Offsetof(tr.RxTracePos), 1},
		{"CmsgRxTrace.RxTrace", unsafe.Offsetof(tr.RxTrace), alignUp(4, u64Align)},

		// rds_iovec: u64 u64 = 16
		{"sizeof(Iovec)", unsafe.Sizeof(iov), 16},
		{"SizeofIovec", SizeofIovec, 16},
		{"Iovec.Addr", unsafe.Offsetof(iov.Addr), 0},
		{"Iovec.Bytes", unsafe.Offsetof(iov.Bytes), 8},

		// rds_get_mr_args: iovec(16) u64 u64 = 32
		{"sizeof(GetMRArgs)", unsafe.Sizeof(mr), 32},
		{"SizeofGetMRArgs", SizeofGetMRArgs, 32},
		{"GetMRArgs.Vec", unsafe.Offsetof(mr.Vec), 0},
		{"GetMRArgs.CookieAddr", unsafe.Offsetof(mr.CookieAddr), 16},
		{"GetMRArgs.Flags", unsafe.Offsetof(mr.Flags), 24},

		// rds_get_mr_for_dest_args: sockaddr_storage(128) iovec(16) u64 u64 = 160
		{"sizeof(GetMRForDestArgs)", unsafe.Sizeof(md), 160},
		{"SizeofGetMRForDestArgs", SizeofGetMRForDestArgs, 160},
		{"GetMRForDestArgs.DestAddr", unsafe.Offsetof(md.DestAddr), 0},
		{"GetMRForDestArgs.Vec", unsafe.Offsetof(md.Vec), 128},
		{"GetMRForDestArgs.CookieAddr", unsafe.Offsetof(md.CookieAddr), 144},
		{"GetMRForDestArgs.Flags", unsafe.Offsetof(md.Flags), 152},

		// rds_free_mr_args: cookie(u64) u64 = 16
		{"sizeof(FreeMRArgs)", unsafe.Sizeof(fr), 16},
		{"SizeofFreeMRArgs", SizeofFreeMRArgs, 16},
		{"FreeMRArgs.Cookie", unsafe.Offsetof(fr.Cookie), 0},
		{"FreeMRArgs.Flags", unsafe.Offsetof(fr.Flags), 8},

		// rds_rdma_args: cookie iovec(16) u64 u64 u64 u64 = 56
		{"sizeof(RDMAArgs)", unsafe.Sizeof(ra), 56},
		{"SizeofRDMAArgs", SizeofRDMAArgs, 56},
		{"RDMAArgs.Cookie", unsafe.Offsetof(ra.Cookie), 0},
		{"RDMAArgs.RemoteVec", unsafe.Offsetof(ra.RemoteVec), 8},
		{"RDMAArgs.LocalVecAddr", unsafe.Offsetof(ra.LocalVecAddr), 24},
		{"RDMAArgs.NrLocal", unsafe.Offsetof(ra.NrLocal), 32},
		{"RDMAArgs.Flags", unsafe.Offsetof(ra.Flags), 40},
		{"RDMAArgs.UserToken", unsafe.Offsetof(ra.UserToken), 48},

		// rds_atomic_args: cookie local_addr remote_addr, union of at most
		// four u64 (m_cswp) = 32, flags, user_token = 72
		{"sizeof(AtomicArgs)", unsafe.Sizeof(aa), 72},
		{"SizeofAtomicArgs", SizeofAtomicArgs, 72},
		{"AtomicArgs.Cookie", unsafe.Offsetof(aa.Cookie), 0},
		{"AtomicArgs.LocalAddr", unsafe.Offsetof(aa.LocalAddr), 8},
		{"AtomicArgs.RemoteAddr", unsafe.Offsetof(aa.RemoteAddr), 16},
		{"AtomicArgs.Union", unsafe.Offsetof(aa.Union), 24},
		{"AtomicArgs.Union[AtomicSwapMask]", unsafe.Offsetof(aa.Union) + AtomicSwapMask*8, 48},
		{"AtomicArgs.Flags", unsafe.Offsetof(aa.Flags), 56},
		{"AtomicArgs.UserToken", unsafe.Offsetof(aa.UserToken), 64},

		// rds_rdma_notify: u64 s32, tail padding to the u64 alignment:
		// 16 bytes, 12 on i386
		{"sizeof(RDMANotify)", unsafe.Sizeof(nt), alignUp(12, u64Align)},
		{"SizeofRDMANotify", SizeofRDMANotify, alignUp(12, u64Align)},
		{"RDMANotify.UserToken", unsafe.Offsetof(nt.UserToken), 0},
		{"RDMANotify.Status", unsafe.Offsetof(nt.Status), 8},

		// rds_zcopy_cookies: u32 u32[8] = 36
		{"sizeof(ZcopyCookies)", unsafe.Sizeof(zc), 36},
		{"SizeofZcopyCookies", SizeofZcopyCookies, 36},
		{"ZcopyCookies.Num", unsafe.Offsetof(zc.Num), 0},
		{"ZcopyCookies.Cookies", unsafe.Offsetof(zc.Cookies), 4},

		{"SizeofCookie", SizeofCookie, 8},
	})
}

// TestAtomicUnionOrder pins the meaning of the Union indexes: the union's
// members all start at its first word, so add and compare share index 0.
func TestAtomicUnionOrder(t *testing.T) {
	checkLayout(t, []layoutCase{
		{"AtomicCompare", AtomicCompare, 0},
		{"AtomicSwap", AtomicSwap, 1},
		{"AtomicCompareMask", AtomicCompareMask, 2},
		{"AtomicSwapMask", AtomicSwapMask, 3},
		{"AtomicAdd", AtomicAdd, 0},
		{"AtomicNocarryMask", AtomicNocarryMask, 1},
	})
	if !LayoutsSupported {
		t.Fatal("LayoutsSupported is false on a platform that has the layouts")
	}
}
