// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"fmt"
	"time"

	"github.com/go-rds/rds/internal/rdsabi"
	"golang.org/x/sys/unix"
)

// Layout of struct cmsghdr: cmsg_len (a size_t counting the header: 8
// bytes on 64-bit ABIs, 4 on 32-bit ones), cmsg_level (4), cmsg_type (4),
// then the data, with each message padded to a multiple of sizeof(long)
// (CMSG_ALIGN). Every integer is in host byte order.
const (
	// HeaderLen is sizeof(struct cmsghdr): 16 on 64-bit ABIs, 12 on
	// 32-bit ones.
	HeaderLen = unix.SizeofCmsghdr
	// Alignment is the unit CMSG_ALIGN rounds to, sizeof(long): 8 on
	// 64-bit ABIs, 4 on 32-bit ones.
	Alignment = 4 << (^uint(0) >> 63)
)

// align rounds n up to a multiple of Alignment, like CMSG_ALIGN.
func align(n int) int { return (n + Alignment - 1) &^ (Alignment - 1) }

// Space is CMSG_SPACE: the bytes a message carrying dataLen bytes occupies
// in a control buffer, padding included. The message's cmsg_len
// (CMSG_LEN) is HeaderLen + dataLen.
func Space(dataLen int) int { return HeaderLen + align(dataLen) }

// BUG(kernel): On 386 the RDMA_STATUS and RXPATH_LATENCY layouts are
// those of an i386 kernel (12 and 28 bytes). A 386 program on a 64-bit
// kernel would receive them in the 64-bit layout (16 and 32 bytes), since
// net/rds writes both structs with put_cmsg without a compat translation
// (read from the source, not measured); their decoders then report
// ErrDataLen.

// Levels.
const (
	// LevelRDS is SOL_RDS, the level of every RDS control message.
	LevelRDS = rdsabi.SOL
	// LevelSocket is SOL_SOCKET, the level of timestamps.
	LevelSocket = unix.SOL_SOCKET
)

// Types at LevelRDS.
const (
	TypeRDMAArgs           = rdsabi.CmsgRDMAArgs
	TypeRDMADest           = rdsabi.CmsgRDMADest
	TypeRDMAMap            = rdsabi.CmsgRDMAMap
	TypeRDMAStatus         = rdsabi.CmsgRDMAStatus
	TypeCongUpdate         = rdsabi.CmsgCongUpdate
	TypeAtomicFADD         = rdsabi.CmsgAtomicFADD
	TypeAtomicCSWP         = rdsabi.CmsgAtomicCSWP
	TypeMaskedAtomicFADD   = rdsabi.CmsgMaskedAtomicFADD
	TypeMaskedAtomicCSWP   = rdsabi.CmsgMaskedAtomicCSWP
	TypeRxPathLatency      = rdsabi.CmsgRxPathLatency
	TypeZeroCopyCookie     = rdsabi.CmsgZcopyCookie
	TypeZeroCopyCompletion = rdsabi.CmsgZcopyCompletion
)

// Types at LevelSocket: the only two an RDS socket delivers
// (rds_cmsg_recv in net/rds/recv.c). SO_TIMESTAMP asks for TypeTimestamp,
// a struct timeval of two longs (8 bytes on 32-bit ABIs); SO_TIMESTAMP_NEW
// asks for TypeTimestampNew, a __kernel_sock_timeval of two int64
// everywhere.
const (
	TypeTimestamp    = unix.SO_TIMESTAMP_OLD // SCM_TIMESTAMP: Timeval
	TypeTimestampNew = unix.SO_TIMESTAMP_NEW // SO_TIMESTAMP_NEW: Timeval
)

// Data lengths (the payload after the header) of each message type; the
// numbers in comments are those of 64-bit ABIs. Users size buffers with
// the *Space constants below.
const (
	rdmaArgsLen           = rdsabi.SizeofRDMAArgs     // 56
	rdmaDestLen           = rdsabi.SizeofCookie       // 8
	rdmaMapLen            = rdsabi.SizeofGetMRArgs    // 32
	rdmaStatusLen         = rdsabi.SizeofRDMANotify   // 16 (12 on 386)
	congUpdateLen         = 8                         // a uint64 port mask
	atomicLen             = rdsabi.SizeofAtomicArgs   // 72, all four atomic types
	rxPathLatencyLen      = rdsabi.SizeofCmsgRxTrace  // 32 (28 on 386)
	zeroCopyCookieLen     = 4                         // a uint32
	zeroCopyCompletionLen = rdsabi.SizeofZcopyCookies // 36
	timevalLen            = 16                        // __kernel_sock_timeval; SCM_TIMESTAMP on 64-bit ABIs
)

// oldTimevalLen is the data length of SCM_TIMESTAMP: two longs.
const oldTimevalLen = 2 * Alignment

// Buffer space (CMSG_SPACE) of each message type, for sizing control
// buffers; the numbers in comments are those of 64-bit ABIs.
// TimevalSpace fits both timestamp forms.
const (
	RDMAArgsSpace           = HeaderLen + (rdmaArgsLen+Alignment-1)&^(Alignment-1)           // 72
	RDMADestSpace           = HeaderLen + (rdmaDestLen+Alignment-1)&^(Alignment-1)           // 24
	RDMAMapSpace            = HeaderLen + (rdmaMapLen+Alignment-1)&^(Alignment-1)            // 48
	RDMAStatusSpace         = HeaderLen + (rdmaStatusLen+Alignment-1)&^(Alignment-1)         // 32
	CongUpdateSpace         = HeaderLen + (congUpdateLen+Alignment-1)&^(Alignment-1)         // 24
	AtomicSpace             = HeaderLen + (atomicLen+Alignment-1)&^(Alignment-1)             // 88
	RxPathLatencySpace      = HeaderLen + (rxPathLatencyLen+Alignment-1)&^(Alignment-1)      // 48
	ZeroCopyCookieSpace     = HeaderLen + (zeroCopyCookieLen+Alignment-1)&^(Alignment-1)     // 24
	ZeroCopyCompletionSpace = HeaderLen + (zeroCopyCompletionLen+Alignment-1)&^(Alignment-1) // 56
	TimevalSpace            = HeaderLen + (timevalLen+Alignment-1)&^(Alignment-1)            // 32

	// MaxReceiveSpace is a receive control buffer size that holds
	// everything the kernel attaches to one recvmsg that returns data:
	// RDMA_DEST, a timestamp, a receive-path trace and a zero-copy
	// completion (160 bytes on 64-bit ABIs). Notices (RDMA_STATUS,
	// CONG_UPDATE) come on recvmsg calls of their own; the kernel packs
	// as many RDMA_STATUS messages as fit (controllen/RDMAStatusSpace, at
	// least one), so a larger buffer drains them in fewer calls.
	MaxReceiveSpace = RDMADestSpace + TimevalSpace + RxPathLatencySpace + ZeroCopyCompletionSpace
)

// Cookie is an RDMA cookie (rds_rdma_cookie_t): it names a registered
// memory region to the peer. The kernel packs the region's R_Key in the
// low 32 bits and the offset of the registered address within its first
// page in the high 32 bits.
type Cookie uint64

// MakeCookie packs an R_Key and an offset as the kernel does.
func MakeCookie(rkey, offset uint32) Cookie { return Cookie(rkey) | Cookie(offset)<<32 }

// RKey returns the region's remote key (low 32 bits).
func (c Cookie) RKey() uint32 { return uint32(c) }

// Offset returns the in-page offset of the registered address (high 32
// bits).
func (c Cookie) Offset() uint32 { return uint32(c >> 32) }

// String formats the cookie as its two halves.
func (c Cookie) String() string {
	return fmt.Sprintf("rkey=%#x offset=%#x", c.RKey(), c.Offset())
}

// Flags are the RDS_RDMA_* flags of RDMAArgs, MapArgs and the atomic
// arguments.
type Flags uint64

// RDMA flags. The uapi's RDS_RDMA_DONTWAIT (0x10) is left out: net/rds
// never reads it.
const (
	FlagReadWrite  Flags = rdsabi.RDMAReadWrite  // RDMA WRITE to the peer (without it: READ); registration is writable
	FlagFence      Flags = rdsabi.RDMAFence      // fence the message that carries the operation
	FlagInvalidate Flags = rdsabi.RDMAInvalidate // invalidate the R_Key when the registration is freed
	FlagUseOnce    Flags = rdsabi.RDMAUseOnce    // free the registration after one use
	FlagNotifyMe   Flags = rdsabi.RDMANotifyMe   // queue an RDMA_STATUS when the operation completes
	FlagSilent     Flags = rdsabi.RDMASilent     // do not interrupt the remote side
)

// IOVec is struct rds_iovec: a memory range. In local ranges Addr is a
// user-space address; in a remote range it is an offset into the region
// the cookie names (registrations are zero-based).
type IOVec struct {
	Addr  uint64
	Bytes uint64
}

// RDMAArgs is the data of RDS_CMSG_RDMA_ARGS (struct rds_rdma_args): an
// RDMA READ or WRITE between NumLocal local ranges, listed in an array of
// IOVec (rdsabi.Iovec layout) at user-space address LocalVecAddr, and the
// range Remote of the peer's region Cookie. UserToken comes back in the
// RDMA_STATUS notice when Flags has FlagNotifyMe.
//
// LocalVecAddr and the buffers it lists are user-space addresses the
// kernel dereferences during sendmsg and, for the buffers, until the
// transfer completes: keep them alive (runtime.KeepAlive) and unmoved.
type RDMAArgs struct {
	Cookie       Cookie
	Remote       IOVec
	LocalVecAddr uint64
	NumLocal     uint64
	Flags        Flags
	UserToken    uint64
}

// MapArgs is the data of RDS_CMSG_RDMA_MAP (struct rds_get_mr_args):
// register Vec and send the resulting cookie with this message; the kernel
// also stores the cookie as a uint64 at user-space address CookieAddr
// (0 for none). Keep both memory ranges alive across sendmsg.
type MapArgs struct {
	Vec        IOVec
	CookieAddr uint64
	Flags      Flags
}

// NotifyStatus is the outcome of an RDMA operation in an RDMA_STATUS
// notice (Notify.Status).
type NotifyStatus int32

// RDMA statuses.
const (
	StatusSuccess     NotifyStatus = rdsabi.RDMASuccess
	StatusRemoteError NotifyStatus = rdsabi.RDMARemoteError
	StatusCanceled    NotifyStatus = rdsabi.RDMACanceled
	StatusDropped     NotifyStatus = rdsabi.RDMADropped
	StatusOtherError  NotifyStatus = rdsabi.RDMAOtherError
)

// String returns the status name.
func (s NotifyStatus) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusRemoteError:
		return "remote error"
	case StatusCanceled:
		return "canceled"
	case StatusDropped:
		return "dropped"
	case StatusOtherError:
		return "other error"
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Notify is the data of RDS_CMSG_RDMA_STATUS (struct rds_rdma_notify):
// the operation tagged UserToken finished with Status.
type Notify struct {
	UserToken uint64
	Status    NotifyStatus
}

// AtomicFADD is the data of RDS_CMSG_ATOMIC_FADD: add Add to the 64-bit
// word at offset RemoteAddr of the peer's region Cookie; the word's old
// value is written to the 8 bytes at user-space address LocalAddr.
type AtomicFADD struct {
	Cookie     Cookie
	LocalAddr  uint64
	RemoteAddr uint64
	Add        uint64
	Flags      Flags
	UserToken  uint64
}

// AtomicCSWP is the data of RDS_CMSG_ATOMIC_CSWP: if the remote word
// equals Compare, replace it with Swap; the old value goes to LocalAddr.
type AtomicCSWP struct {
	Cookie     Cookie
	LocalAddr  uint64
	RemoteAddr uint64
	Compare    uint64
	Swap       uint64
	Flags      Flags
	UserToken  uint64
}

// MaskedAtomicFADD is the data of RDS_CMSG_MASKED_ATOMIC_FADD: a fetch
// and add where set bits of NocarryMask stop carries at that bit.
type MaskedAtomicFADD struct {
	Cookie      Cookie
	LocalAddr   uint64
	RemoteAddr  uint64
	Add         uint64
	NocarryMask uint64
	Flags       Flags
	UserToken   uint64
}

// MaskedAtomicCSWP is the data of RDS_CMSG_MASKED_ATOMIC_CSWP: compare
// the bits of CompareMask with Compare and, if equal, replace the bits of
// SwapMask with those of Swap.
type MaskedAtomicCSWP struct {
	Cookie      Cookie
	LocalAddr   uint64
	RemoteAddr  uint64
	Compare     uint64
	Swap        uint64
	CompareMask uint64
	SwapMask    uint64
	Flags       Flags
	UserToken   uint64
}

// RxTrace is the data of RDS_CMSG_RXPATH_LATENCY (struct
// rds_cmsg_rx_trace): for the first Count entries, Latency[i] was spent in
// stage Points[i]. Count is at most MaxTracePoints. The kernel's fields
// are unsigned nanoseconds; Latency holds them bit for bit.
type RxTrace struct {
	Count   uint8
	Points  [MaxTracePoints]TracePoint
	Latency [MaxTracePoints]time.Duration
}

// MaxZeroCopyCookies is the most cookies one zero-copy completion carries.
const MaxZeroCopyCookies = rdsabi.MaxZcookies

// ZeroCopyCookies is the data of RDS_CMSG_ZCOPY_COMPLETION (struct
// rds_zcopy_cookies): the sends tagged with the first N Cookies have
// completed and their buffers may be reused. N is at most
// MaxZeroCopyCookies.
type ZeroCopyCookies struct {
	N       int
	Cookies [MaxZeroCopyCookies]uint32
}

// List returns the valid cookies, Cookies[:N], without copying; N is
// clamped to the array.
func (z *ZeroCopyCookies) List() []uint32 {
	return z.Cookies[:min(max(z.N, 0), MaxZeroCopyCookies)]
}

// Timeval is the data of SCM_TIMESTAMP and SO_TIMESTAMP_NEW (struct
// timeval / __kernel_sock_timeval): the wall-clock time at which the
// kernel queued the message on the socket, in microseconds.
type Timeval struct {
	Sec  int64
	Usec int64
}

// Time converts t to a time.Time.
func (t Timeval) Time() time.Time { return time.Unix(t.Sec, t.Usec*1e3) }
