// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

// Package cmsg encodes and decodes the control messages (ancillary data)
// of Linux RDS sockets without allocating.
//
// A [Builder] appends messages to a caller-owned buffer for sendmsg; a
// [Parser] walks the buffer recvmsg filled and yields [Message] values
// whose Data aliases that buffer; typed decoders on Message (RDMAStatus,
// ZeroCopyCompletion, ...) check level, type and length and return plain
// Go values. Every message type has both an encoder and a decoder, so
// tests and fakes can produce what the kernel would send.
//
// The layout is the kernel's on the architecture the program is built
// for: a header of cmsg_len (a size_t counting the header), cmsg_level and
// cmsg_type ([HeaderLen]: 16 bytes on 64-bit ABIs, 12 on 32-bit ones), the
// data, and padding to a multiple of sizeof(long) ([Alignment]); integers
// are in host byte order. The package builds for linux on every
// architecture Go supports, little- and big-endian, 32- and 64-bit; the
// struct layouts come from package internal/rdsabi. On i386 two structs
// are smaller (RDMA_STATUS: 12 bytes, RXPATH_LATENCY: 28), and on 32-bit
// ABIs SCM_TIMESTAMP carries 32-bit fields.
//
// # Messages
//
// At level SOL_RDS ([LevelRDS]):
//
//	type                 direction      data                 transport
//	RDMA_ARGS            send           RDMAArgs             IB only
//	RDMA_DEST            send, receive  Cookie               IB only
//	RDMA_MAP             send           MapArgs              IB only
//	RDMA_STATUS          receive        Notify               IB only
//	CONG_UPDATE          receive        uint64 port mask     any
//	ATOMIC_FADD          send           AtomicFADD           IB only
//	ATOMIC_CSWP          send           AtomicCSWP           IB only
//	MASKED_ATOMIC_FADD   send           MaskedAtomicFADD     IB only
//	MASKED_ATOMIC_CSWP   send           MaskedAtomicCSWP     IB only
//	RXPATH_LATENCY       receive        RxTrace              any
//	ZCOPY_COOKIE         send           uint32               TCP (MSG_ZEROCOPY)
//	ZCOPY_COMPLETION     receive        ZeroCopyCookies      TCP
//
// RDMA_ARGS asks for an RDMA READ or WRITE against a region the peer
// registered and announced by its cookie; RDMA_MAP registers local memory
// and ships the cookie with the message, where the peer receives it as
// RDMA_DEST; RDMA_STATUS reports the completion of an operation sent with
// FlagNotifyMe. The atomics operate on one 64-bit word of a registered
// region (the masked forms are what the kernel posts for all of them;
// providers without masked atomics, such as Soft-RoCE, fail them).
// On the TCP transport every RDMA and atomic message makes sendmsg fail
// with EOPNOTSUPP (measured); the loopback transport has no RDMA either. CONG_UPDATE names, as a bit per port
// group (port % 64), the monitored ports that stopped being congested.
// RXPATH_LATENCY, enabled with SO_RDS_MSG_RXPATH_LATENCY, reports
// nanoseconds spent in stages of the receive path. ZCOPY_COOKIE tags a
// MSG_ZEROCOPY send; the tags come back, up to eight at a time, in
// ZCOPY_COMPLETION once the kernel no longer needs the pages.
//
// At level SOL_SOCKET ([LevelSocket]), RDS attaches SCM_TIMESTAMP (a
// [Timeval] of two longs) when SO_TIMESTAMP is on, or SO_TIMESTAMP_NEW (two
// int64) when SO_TIMESTAMP_NEW is: the time the kernel queued the message
// on the socket. These are the only SOL_SOCKET messages net/rds/recv.c
// writes; RDS has no SCM_TIMESTAMPNS or SCM_TIMESTAMPING.
//
// # Messages without data
//
// RDMA_STATUS notices, congestion updates and zero-copy completions are
// delivered as recvmsg results of zero data bytes that carry only control
// messages, ahead of queued data. On an RDS socket a zero-byte read is such
// a message, never end of file; always parse the control buffer. The
// kernel packs as many RDMA_STATUS messages into one call as the control
// buffer holds.
//
// # Buffer sizes
//
// [Space] is CMSG_SPACE; each type has a constant such as [RDMAArgsSpace].
// [MaxReceiveSpace] fits everything that may accompany one received data
// message. A message the kernel could not fit is cut short (MSG_CTRUNC)
// and its decoder reports [ErrDataLen].
//
// # Errors
//
// Malformed input never panics: the Parser and decoders return an *[Error]
// wrapping one of the sentinel errors ([ErrShortHeader], [ErrHeaderLen],
// [ErrOverrun], [ErrDataLen], [ErrWrongType], [ErrInvalid]). Errors are
// built only on failure; the success paths do not allocate.
package cmsg
