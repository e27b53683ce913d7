// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import "slices"

// A Builder appends control messages to a caller-owned buffer, each
// padded to its Space, ready to pass as the msg_control of sendmsg.
//
// Appending does not allocate while the buffer has capacity for the
// message; otherwise the buffer grows as with append (size it with the
// *Space constants to avoid that). The first invalid argument sets a
// sticky error: later calls do nothing and Finish reports it. The zero
// Builder appends to a nil buffer. A Builder must not be copied after
// first use if the copies keep building.
type Builder struct {
	buf []byte
	err error
}

// NewBuilder returns a Builder that appends to buf after its current
// contents. Use buf[:0] of a reused buffer to avoid allocation.
func NewBuilder(buf []byte) Builder { return Builder{buf: buf} }

// Reset makes b append to buf and clears the sticky error.
func (b *Builder) Reset(buf []byte) { b.buf, b.err = buf, nil }

// Finish returns the buffer with every message appended, and the sticky
// error if any call failed.
func (b *Builder) Finish() ([]byte, error) { return b.buf, b.err }

// next appends a zeroed message of Space(n) bytes with its header filled
// in and returns its n data bytes, or nil after an error.
func (b *Builder) next(level, typ int32, n int) []byte {
	d := b.nextFilled(level, typ, n)
	clear(d)
	return d
}

// nextFilled is next for a caller that writes every one of the n data
// bytes: only the padding after them is zeroed.
func (b *Builder) nextFilled(level, typ int32, n int) []byte {
	if b.err != nil {
		return nil
	}
	sp := Space(n)
	off := len(b.buf)
	if cap(b.buf)-off < sp {
		b.buf = slices.Grow(b.buf, sp)
	}
	b.buf = b.buf[:off+sp]
	m := b.buf[off:]
	h := (*[HeaderLen]byte)(m) // one length check for the header's fields
	putHdrLen(h[:], HeaderLen+n)
	ne.PutUint32(h[offLevel:], uint32(level))
	ne.PutUint32(h[offType:], uint32(typ))
	clear(m[HeaderLen+n:])
	return m[HeaderLen : HeaderLen+n]
}

func (b *Builder) fail(err error, level, typ int32, n int) {
	if b.err == nil {
		b.err = &Error{Err: err, Offset: len(b.buf), Level: level, Type: typ, Len: n}
	}
}

// Append adds a message with arbitrary level, type and data, such as one
// this package has no method for.
func (b *Builder) Append(level, typ int32, data []byte) {
	if d := b.nextFilled(level, typ, len(data)); d != nil {
		copy(d, data)
	}
}

func putIOVec(d []byte, v IOVec) {
	ne.PutUint64(d[offIovecAddr:], v.Addr)
	ne.PutUint64(d[offIovecBytes:], v.Bytes)
}

// RDMAArgs adds RDS_CMSG_RDMA_ARGS (send; IB transport only).
func (b *Builder) RDMAArgs(a RDMAArgs) {
	m := b.nextFilled(LevelRDS, TypeRDMAArgs, rdmaArgsLen)
	if m == nil {
		return
	}
	d := (*[rdmaArgsLen]byte)(m) // one length check for every field
	ne.PutUint64(d[offRDMACookie:], uint64(a.Cookie))
	ne.PutUint64(d[offRDMARemote+offIovecAddr:], a.Remote.Addr)
	ne.PutUint64(d[offRDMARemote+offIovecBytes:], a.Remote.Bytes)
	ne.PutUint64(d[offRDMALocalVec:], a.LocalVecAddr)
	ne.PutUint64(d[offRDMANrLocal:], a.NumLocal)
	ne.PutUint64(d[offRDMAFlags:], uint64(a.Flags))
	ne.PutUint64(d[offRDMAUserToken:], a.UserToken)
}

// RDMADest adds RDS_CMSG_RDMA_DEST: on send, the cookie of a registration
// to use as the destination of the peer's RDMA; on receive (what the
// kernel attaches), the cookie the peer sent with the message.
func (b *Builder) RDMADest(c Cookie) {
	if d := b.nextFilled(LevelRDS, TypeRDMADest, rdmaDestLen); d != nil {
		ne.PutUint64(d, uint64(c))
	}
}

// RDMAMap adds RDS_CMSG_RDMA_MAP (send; IB transport only).
func (b *Builder) RDMAMap(a MapArgs) {
	d := b.next(LevelRDS, TypeRDMAMap, rdmaMapLen)
	if d == nil {
		return
	}
	putIOVec(d[offMapVec:], a.Vec)
	ne.PutUint64(d[offMapCookieAddr:], a.CookieAddr)
	ne.PutUint64(d[offMapFlags:], uint64(a.Flags))
}

// RDMAStatus adds RDS_CMSG_RDMA_STATUS (receive only: for fakes and
// tests).
func (b *Builder) RDMAStatus(n Notify) {
	d := b.next(LevelRDS, TypeRDMAStatus, rdmaStatusLen)
	if d == nil {
		return
	}
	ne.PutUint64(d[offNotifyUserToken:], n.UserToken)
	ne.PutUint32(d[offNotifyStatus:], uint32(n.Status))
}

// CongUpdate adds RDS_CMSG_CONG_UPDATE (receive only): mask has the
// congestion-monitor bit of every port group that became uncongested.
func (b *Builder) CongUpdate(mask uint64) {
	if d := b.next(LevelRDS, TypeCongUpdate, congUpdateLen); d != nil {
		ne.PutUint64(d, mask)
	}
}

// atomic writes struct rds_atomic_args; w holds the union's four words.
func (b *Builder) atomic(typ int32, c Cookie, local, remote uint64, w [4]uint64, f Flags, token uint64) {
	d := b.next(LevelRDS, typ, atomicLen)
	if d == nil {
		return
	}
	ne.PutUint64(d[offAtomicCookie:], uint64(c))
	ne.PutUint64(d[offAtomicLocal:], local)
	ne.PutUint64(d[offAtomicRemote:], remote)
	for i, v := range w {
		ne.PutUint64(d[offAtomicUnion+8*i:], v)
	}
	ne.PutUint64(d[offAtomicFlags:], uint64(f))
	ne.PutUint64(d[offAtomicUserToken:], token)
}

// AtomicFADD adds RDS_CMSG_ATOMIC_FADD (send; IB transport only).
func (b *Builder) AtomicFADD(a AtomicFADD) {
	b.atomic(TypeAtomicFADD, a.Cookie, a.LocalAddr, a.RemoteAddr,
		[4]uint64{a.Add}, a.Flags, a.UserToken)
}

// AtomicCSWP adds RDS_CMSG_ATOMIC_CSWP (send; IB transport only).
func (b *Builder) AtomicCSWP(a AtomicCSWP) {
	b.atomic(TypeAtomicCSWP, a.Cookie, a.LocalAddr, a.RemoteAddr,
		[4]uint64{a.Compare, a.Swap}, a.Flags, a.UserToken)
}

// MaskedAtomicFADD adds RDS_CMSG_MASKED_ATOMIC_FADD (send; IB only).
func (b *Builder) MaskedAtomicFADD(a MaskedAtomicFADD) {
	b.atomic(TypeMaskedAtomicFADD, a.Cookie, a.LocalAddr, a.RemoteAddr,
		[4]uint64{a.Add, a.NocarryMask}, a.Flags, a.UserToken)
}

// MaskedAtomicCSWP adds RDS_CMSG_MASKED_ATOMIC_CSWP (send; IB only).
func (b *Builder) MaskedAtomicCSWP(a MaskedAtomicCSWP) {
	b.atomic(TypeMaskedAtomicCSWP, a.Cookie, a.LocalAddr, a.RemoteAddr,
		[4]uint64{a.Compare, a.Swap, a.CompareMask, a.SwapMask}, a.Flags, a.UserToken)
}

// RxPathLatency adds RDS_CMSG_RXPATH_LATENCY (receive only). A Count
// above MaxTracePoints sets the sticky error ErrInvalid.
func (b *Builder) RxPathLatency(t RxTrace) {
	if t.Count > MaxTracePoints {
		b.fail(ErrInvalid, LevelRDS, TypeRxPathLatency, int(t.Count))
		return
	}
	d := b.next(LevelRDS, TypeRxPathLatency, rxPathLatencyLen)
	if d == nil {
		return
	}
	d[offTraceCount] = t.Count
	for i, p := range t.Points {
		d[offTracePoints+i] = uint8(p)
	}
	for i, v := range t.Latency {
		ne.PutUint64(d[offTraceLatency+8*i:], uint64(v))
	}
}

// ZeroCopyCookie adds RDS_CMSG_ZCOPY_COOKIE (send; TCP transport, with
// MSG_ZEROCOPY): the cookie that a later completion reports for this
// message.
func (b *Builder) ZeroCopyCookie(cookie uint32) {
	if d := b.next(LevelRDS, TypeZeroCopyCookie, zeroCopyCookieLen); d != nil {
		ne.PutUint32(d, cookie)
	}
}

// ZeroCopyCompletion adds RDS_CMSG_ZCOPY_COMPLETION (receive only). All
// eight cookie slots are written as given; an N outside
// [0, MaxZeroCopyCookies] sets the sticky error ErrInvalid.
func (b *Builder) ZeroCopyCompletion(z ZeroCopyCookies) {
	if z.N < 0 || z.N > MaxZeroCopyCookies {
		b.fail(ErrInvalid, LevelRDS, TypeZeroCopyCompletion, z.N)
		return
	}
	d := b.next(LevelRDS, TypeZeroCopyCompletion, zeroCopyCompletionLen)
	if d == nil {
		return
	}
	ne.PutUint32(d[offZcopyNum:], uint32(z.N))
	for i, c := range z.Cookies {
		ne.PutUint32(d[offZcopyCookies+4*i:], c)
	}
}

// timeval adds a Timeval: two longs for TypeTimestamp, two int64 for
// TypeTimestampNew.
func (b *Builder) timeval(typ int32, t Timeval) {
	if typ == TypeTimestampNew {
		if d := b.next(LevelSocket, typ, timevalLen); d != nil {
			ne.PutUint64(d[0:], uint64(t.Sec))
			ne.PutUint64(d[8:], uint64(t.Usec))
		}
		return
	}
	if b.err != nil {
		return
	}
	var v [oldTimevalLen]byte
	if !putLong(v[:], t.Sec) || !putLong(v[Alignment:], t.Usec) {
		b.fail(ErrInvalid, LevelSocket, typ, oldTimevalLen)
		return
	}
	if d := b.next(LevelSocket, typ, oldTimevalLen); d != nil {
		copy(d, v[:])
	}
}

// Timestamp adds SCM_TIMESTAMP (receive only), what RDS attaches with
// SO_TIMESTAMP (SO_TIMESTAMP_OLD) enabled. On 32-bit ABIs a Sec or Usec
// that a 32-bit long cannot hold sets the sticky error ErrInvalid.
func (b *Builder) Timestamp(t Timeval) { b.timeval(TypeTimestamp, t) }

// TimestampNew adds SO_TIMESTAMP_NEW (receive only), what RDS attaches
// with SO_TIMESTAMP_NEW enabled.
func (b *Builder) TimestampNew(t Timeval) { b.timeval(TypeTimestampNew, t) }
