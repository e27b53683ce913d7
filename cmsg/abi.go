// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"encoding/binary"
	"unsafe"

	"github.com/go-rds/rds/internal/rdsabi"
	"golang.org/x/sys/unix"
)

// The kernel reads and writes control messages in host byte order.
var ne = binary.NativeEndian

// Where the fields of struct cmsghdr and of the kernel structs sit, taken
// from the layouts of this build's ABI (x/sys/unix and the generated
// rdsabi types) rather than written out. Only a few differ between ABIs:
// the header, and rds_cmsg_rx_trace and rds_rdma_notify on 386.
var (
	abiHdr    unix.Cmsghdr
	abiRDMA   rdsabi.RDMAArgs
	abiMap    rdsabi.GetMRArgs
	abiNotify rdsabi.RDMANotify
	abiAtomic rdsabi.AtomicArgs
	abiTrace  rdsabi.CmsgRxTrace
	abiZcopy  rdsabi.ZcopyCookies
	abiIovec  rdsabi.Iovec
)

const (
	hdrLenSize = int(unsafe.Sizeof(abiHdr.Len)) // size_t: 8 or 4
	offLevel   = int(unsafe.Offsetof(abiHdr.Level))
	offType    = int(unsafe.Offsetof(abiHdr.Type))

	offIovecAddr  = int(unsafe.Offsetof(abiIovec.Addr))
	offIovecBytes = int(unsafe.Offsetof(abiIovec.Bytes))

	offRDMACookie    = int(unsafe.Offsetof(abiRDMA.Cookie))
	offRDMARemote    = int(unsafe.Offsetof(abiRDMA.RemoteVec))
	offRDMALocalVec  = int(unsafe.Offsetof(abiRDMA.LocalVecAddr))
	offRDMANrLocal   = int(unsafe.Offsetof(abiRDMA.NrLocal))
	offRDMAFlags     = int(unsafe.Offsetof(abiRDMA.Flags))
	offRDMAUserToken = int(unsafe.Offsetof(abiRDMA.UserToken))

	offMapVec        = int(unsafe.Offsetof(abiMap.Vec))
	offMapCookieAddr = int(unsafe.Offsetof(abiMap.CookieAddr))
	offMapFlags      = int(unsafe.Offsetof(abiMap.Flags))

	offNotifyUserToken = int(unsafe.Offsetof(abiNotify.UserToken))
	offNotifyStatus    = int(unsafe.Offsetof(abiNotify.Status))

	offAtomicCookie    = int(unsafe.Offsetof(abiAtomic.Cookie))
	offAtomicLocal     = int(unsafe.Offsetof(abiAtomic.LocalAddr))
	offAtomicRemote    = int(unsafe.Offsetof(abiAtomic.RemoteAddr))
	offAtomicUnion     = int(unsafe.Offsetof(abiAtomic.Union))
	offAtomicFlags     = int(unsafe.Offsetof(abiAtomic.Flags))
	offAtomicUserToken = int(unsafe.Offsetof(abiAtomic.UserToken))

	offTraceCount   = int(unsafe.Offsetof(abiTrace.RxTraces))
	offTracePoints  = int(unsafe.Offsetof(abiTrace.RxTracePos))
	offTraceLatency = int(unsafe.Offsetof(abiTrace.RxTrace))

	offZcopyNum     = int(unsafe.Offsetof(abiZcopy.Num))
	offZcopyCookies = int(unsafe.Offsetof(abiZcopy.Cookies))
)

// putHdrLen writes cmsg_len, a size_t.
func putHdrLen(b []byte, n int) {
	if hdrLenSize == 8 {
		ne.PutUint64(b, uint64(n))
	} else {
		ne.PutUint32(b, uint32(n))
	}
}

// hdrLen reads cmsg_len.
func hdrLen(b []byte) uint64 {
	if hdrLenSize == 8 {
		return ne.Uint64(b)
	}
	return uint64(ne.Uint32(b))
}

// putLong writes a C long (Alignment bytes) and reports whether v fits.
func putLong(b []byte, v int64) bool {
	if Alignment == 8 {
		ne.PutUint64(b, uint64(v))
		return true
	}
	ne.PutUint32(b, uint32(v))
	return v == int64(int32(v))
}

// long reads a C long, sign-extended.
func long(b []byte) int64 {
	if Alignment == 8 {
		return int64(ne.Uint64(b))
	}
	return int64(int32(ne.Uint32(b)))
}
