// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"io"
	"math"
	"time"
)

// A Message is one control message. Data aliases the parsed buffer; it is
// valid until the buffer is reused.
type Message struct {
	Level int32
	Type  int32
	Data  []byte
}

// Is reports whether m has the given level and type.
func (m Message) Is(level, typ int32) bool { return m.Level == level && m.Type == typ }

// A Parser walks a received control buffer (msg_control[:msg_controllen])
// message by message without allocating. It is a small value: copy it to
// remember a position.
type Parser struct {
	buf []byte
	off int
	err error
}

// NewParser returns a Parser positioned at the start of buf.
func NewParser(buf []byte) Parser { return Parser{buf: buf} }

// Reset positions p at the start of buf and clears its error.
func (p *Parser) Reset(buf []byte) { *p = Parser{buf: buf} }

// Next returns the next message. At the end of the buffer it returns
// io.EOF; a malformed header returns an *Error wrapping ErrShortHeader,
// ErrHeaderLen or ErrOverrun. Errors are sticky: later calls return the
// same error.
//
// Like the kernel's CMSG_NXTHDR, Next accepts a last message whose
// trailing padding is missing (put_cmsg trims it when the buffer ends).
func (p *Parser) Next() (Message, error) {
	if p.err != nil {
		return Message{}, p.err
	}
	rest := p.buf[p.off:]
	if len(rest) == 0 {
		return Message{}, io.EOF
	}
	if len(rest) < HeaderLen {
		return Message{}, p.fail(ErrShortHeader, 0, 0, len(rest))
	}
	n := hdrLen(rest)
	level := int32(ne.Uint32(rest[offLevel:]))
	typ := int32(ne.Uint32(rest[offType:]))
	if n < HeaderLen {
		return Message{}, p.fail(ErrHeaderLen, level, typ, clampLen(n))
	}
	if n > uint64(len(rest)) {
		return Message{}, p.fail(ErrOverrun, level, typ, clampLen(n))
	}
	m := Message{Level: level, Type: typ, Data: rest[HeaderLen:n:n]}
	p.off += min(align(int(n)), len(rest))
	return m, nil
}

func (p *Parser) fail(err error, level, typ int32, n int) error {
	p.err = &Error{Err: err, Offset: p.off, Level: level, Type: typ, Len: n}
	return p.err
}

// clampLen converts a cmsg_len for error reports, capped at MaxInt32.
func clampLen(n uint64) int {
	return int(min(n, math.MaxInt32))
}

// check verifies m's level, type and data length for a decoder.
func (m Message) check(level, typ int32, n int) error {
	if m.Level != level || m.Type != typ {
		return &Error{Err: ErrWrongType, Offset: -1, Level: m.Level, Type: m.Type, Len: len(m.Data)}
	}
	return m.checkLen(n)
}

func (m Message) checkLen(n int) error {
	if len(m.Data) != n {
		return &Error{Err: ErrDataLen, Offset: -1, Level: m.Level, Type: m.Type, Len: len(m.Data)}
	}
	return nil
}

func iovec(d []byte) IOVec {
	return IOVec{Addr: ne.Uint64(d[offIovecAddr:]), Bytes: ne.Uint64(d[offIovecBytes:])}
}

// RDMAArgs decodes RDS_CMSG_RDMA_ARGS.
func (m Message) RDMAArgs() (RDMAArgs, error) {
	if err := m.check(LevelRDS, TypeRDMAArgs, rdmaArgsLen); err != nil {
		return RDMAArgs{}, err
	}
	d := m.Data
	return RDMAArgs{
		Cookie:       Cookie(ne.Uint64(d[offRDMACookie:])),
		Remote:       iovec(d[offRDMARemote:]),
		LocalVecAddr: ne.Uint64(d[offRDMALocalVec:]),
		NumLocal:     ne.Uint64(d[offRDMANrLocal:]),
		Flags:        Flags(ne.Uint64(d[offRDMAFlags:])),
		UserToken:    ne.Uint64(d[offRDMAUserToken:]),
	}, nil
}

// RDMADest decodes RDS_CMSG_RDMA_DEST.
func (m Message) RDMADest() (Cookie, error) {
	if err := m.check(LevelRDS, TypeRDMADest, rdmaDestLen); err != nil {
		return 0, err
	}
	return Cookie(ne.Uint64(m.Data)), nil
}

// RDMAMap decodes RDS_CMSG_RDMA_MAP.
func (m Message) RDMAMap() (MapArgs, error) {
	if err := m.check(LevelRDS, TypeRDMAMap, rdmaMapLen); err != nil {
		return MapArgs{}, err
	}
	d := m.Data
	return MapArgs{
		Vec:        iovec(d[offMapVec:]),
		CookieAddr: ne.Uint64(d[offMapCookieAddr:]),
		Flags:      Flags(ne.Uint64(d[offMapFlags:])),
	}, nil
}

// RDMAStatus decodes RDS_CMSG_RDMA_STATUS.
func (m Message) RDMAStatus() (Notify, error) {
	if err := m.check(LevelRDS, TypeRDMAStatus, rdmaStatusLen); err != nil {
		return Notify{}, err
	}
	return Notify{
		UserToken: ne.Uint64(m.Data[offNotifyUserToken:]),
		Status:    NotifyStatus(int32(ne.Uint32(m.Data[offNotifyStatus:]))),
	}, nil
}

// CongUpdate decodes RDS_CMSG_CONG_UPDATE: the mask of port groups that
// became uncongested.
func (m Message) CongUpdate() (uint64, error) {
	if err := m.check(LevelRDS, TypeCongUpdate, congUpdateLen); err != nil {
		return 0, err
	}
	return ne.Uint64(m.Data), nil
}

// atomic decodes struct rds_atomic_args of the given type.
func (m Message) atomic(typ int32) (c Cookie, local, remote uint64, w [4]uint64, f Flags, token uint64, err error) {
	if err = m.check(LevelRDS, typ, atomicLen); err != nil {
		return
	}
	d := m.Data
	c = Cookie(ne.Uint64(d[offAtomicCookie:]))
	local = ne.Uint64(d[offAtomicLocal:])
	remote = ne.Uint64(d[offAtomicRemote:])
	for i := range w {
		w[i] = ne.Uint64(d[offAtomicUnion+8*i:])
	}
	f = Flags(ne.Uint64(d[offAtomicFlags:]))
	token = ne.Uint64(d[offAtomicUserToken:])
	return
}

// AtomicFADD decodes RDS_CMSG_ATOMIC_FADD.
func (m Message) AtomicFADD() (AtomicFADD, error) {
	c, l, r, w, f, t, err := m.atomic(TypeAtomicFADD)
	return AtomicFADD{Cookie: c, LocalAddr: l, RemoteAddr: r, Add: w[0], Flags: f, UserToken: t}, err
}

// AtomicCSWP decodes RDS_CMSG_ATOMIC_CSWP.
func (m Message) AtomicCSWP() (AtomicCSWP, error) {
	c, l, r, w, f, t, err := m.atomic(TypeAtomicCSWP)
	return AtomicCSWP{Cookie: c, LocalAddr: l, RemoteAddr: r, Compare: w[0], Swap: w[1], Flags: f, UserToken: t}, err
}

// MaskedAtomicFADD decodes RDS_CMSG_MASKED_ATOMIC_FADD.
func (m Message) MaskedAtomicFADD() (MaskedAtomicFADD, error) {
	c, l, r, w, f, t, err := m.atomic(TypeMaskedAtomicFADD)
	return MaskedAtomicFADD{Cookie: c, LocalAddr: l, RemoteAddr: r, Add: w[0], NocarryMask: w[1], Flags: f, UserToken: t}, err
}

// MaskedAtomicCSWP decodes RDS_CMSG_MASKED_ATOMIC_CSWP.
func (m Message) MaskedAtomicCSWP() (MaskedAtomicCSWP, error) {
	c, l, r, w, f, t, err := m.atomic(TypeMaskedAtomicCSWP)
	return MaskedAtomicCSWP{
		Cookie: c, LocalAddr: l, RemoteAddr: r,
		Compare: w[0], Swap: w[1], CompareMask: w[2], SwapMask: w[3],
		Flags: f, UserToken: t,
	}, err
}

// RxPathLatency decodes RDS_CMSG_RXPATH_LATENCY. A count above
// MaxTracePoints is ErrInvalid.
func (m Message) RxPathLatency() (RxTrace, error) {
	if err := m.check(LevelRDS, TypeRxPathLatency, rxPathLatencyLen); err != nil {
		return RxTrace{}, err
	}
	d := m.Data
	t := RxTrace{Count: d[offTraceCount]}
	if t.Count > MaxTracePoints {
		return RxTrace{}, &Error{Err: ErrInvalid, Offset: -1, Level: m.Level, Type: m.Type, Len: int(t.Count)}
	}
	for i := range t.Points {
		t.Points[i] = TracePoint(d[offTracePoints+i])
		t.Latency[i] = time.Duration(ne.Uint64(d[offTraceLatency+8*i:]))
	}
	return t, nil
}

// ZeroCopyCookie decodes RDS_CMSG_ZCOPY_COOKIE.
func (m Message) ZeroCopyCookie() (uint32, error) {
	if err := m.check(LevelRDS, TypeZeroCopyCookie, zeroCopyCookieLen); err != nil {
		return 0, err
	}
	return ne.Uint32(m.Data), nil
}

// ZeroCopyCompletion decodes RDS_CMSG_ZCOPY_COMPLETION. All eight cookie
// slots are copied; only the first N are meaningful. A count above
// MaxZeroCopyCookies is ErrInvalid.
func (m Message) ZeroCopyCompletion() (ZeroCopyCookies, error) {
	if err := m.check(LevelRDS, TypeZeroCopyCompletion, zeroCopyCompletionLen); err != nil {
		return ZeroCopyCookies{}, err
	}
	num := ne.Uint32(m.Data[offZcopyNum:])
	if num > MaxZeroCopyCookies {
		return ZeroCopyCookies{}, &Error{Err: ErrInvalid, Offset: -1, Level: m.Level, Type: m.Type, Len: clampLen(uint64(num))}
	}
	z := ZeroCopyCookies{N: int(num)}
	for i := range z.Cookies {
		z.Cookies[i] = ne.Uint32(m.Data[offZcopyCookies+4*i:])
	}
	return z, nil
}

// Timestamp decodes SCM_TIMESTAMP or SO_TIMESTAMP_NEW.
func (m Message) Timestamp() (Timeval, error) {
	if m.Level != LevelSocket || (m.Type != TypeTimestamp && m.Type != TypeTimestampNew) {
		return Timeval{}, &Error{Err: ErrWrongType, Offset: -1, Level: m.Level, Type: m.Type, Len: len(m.Data)}
	}
	d := m.Data
	if m.Type == TypeTimestampNew {
		if err := m.checkLen(timevalLen); err != nil {
			return Timeval{}, err
		}
		return Timeval{Sec: int64(ne.Uint64(d[0:])), Usec: int64(ne.Uint64(d[8:]))}, nil
	}
	if err := m.checkLen(oldTimevalLen); err != nil {
		return Timeval{}, err
	}
	return Timeval{Sec: long(d[0:]), Usec: long(d[Alignment:])}, nil
}
