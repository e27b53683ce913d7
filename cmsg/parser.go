// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux && (amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le)

package cmsg

import "io"

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

// Offset returns the byte offset of the next message.
func (p *Parser) Offset() int { return p.off }

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
	n := le.Uint64(rest[0:])
	level := int32(le.Uint32(rest[8:]))
	typ := int32(le.Uint32(rest[12:]))
	if n < HeaderLen {
		return Message{}, p.fail(ErrHeaderLen, level, typ, clampLen(n))
	}
	if n > uint64(len(rest)) {
		return Message{}, p.fail(ErrOverrun, level, typ, clampLen(n))
	}
	m := Message{Level: level, Type: typ, Data: rest[HeaderLen:n:n]}
	p.off += min(Align(int(n)), len(rest))
	return m, nil
}

func (p *Parser) fail(err error, level, typ int32, n int) error {
	p.err = &Error{Err: err, Offset: p.off, Level: level, Type: typ, Len: n}
	return p.err
}

// clampLen converts a cmsg_len for error reports.
func clampLen(n uint64) int {
	if n > 1<<31 {
		return 1 << 31
	}
	return int(n)
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

func iovec(d []byte) IOVec { return IOVec{Addr: le.Uint64(d[0:]), Bytes: le.Uint64(d[8:])} }

// RDMAArgs decodes RDS_CMSG_RDMA_ARGS.
func (m Message) RDMAArgs() (RDMAArgs, error) {
	if err := m.check(LevelRDS, TypeRDMAArgs, RDMAArgsLen); err != nil {
		return RDMAArgs{}, err
	}
	d := m.Data
	return RDMAArgs{
		Cookie:       Cookie(le.Uint64(d[0:])),
		Remote:       iovec(d[8:]),
		LocalVecAddr: le.Uint64(d[24:]),
		NumLocal:     le.Uint64(d[32:]),
		Flags:        Flags(le.Uint64(d[40:])),
		UserToken:    le.Uint64(d[48:]),
	}, nil
}

// RDMADest decodes RDS_CMSG_RDMA_DEST.
func (m Message) RDMADest() (Cookie, error) {
	if err := m.check(LevelRDS, TypeRDMADest, RDMADestLen); err != nil {
		return 0, err
	}
	return Cookie(le.Uint64(m.Data)), nil
}

// RDMAMap decodes RDS_CMSG_RDMA_MAP.
func (m Message) RDMAMap() (MapArgs, error) {
	if err := m.check(LevelRDS, TypeRDMAMap, RDMAMapLen); err != nil {
		return MapArgs{}, err
	}
	d := m.Data
	return MapArgs{
		Vec:        iovec(d[0:]),
		CookieAddr: le.Uint64(d[16:]),
		Flags:      Flags(le.Uint64(d[24:])),
	}, nil
}

// RDMAStatus decodes RDS_CMSG_RDMA_STATUS.
func (m Message) RDMAStatus() (Notify, error) {
	if err := m.check(LevelRDS, TypeRDMAStatus, RDMAStatusLen); err != nil {
		return Notify{}, err
	}
	return Notify{
		UserToken: le.Uint64(m.Data[0:]),
		Status:    Status(int32(le.Uint32(m.Data[8:]))),
	}, nil
}

// CongUpdate decodes RDS_CMSG_CONG_UPDATE: the mask of port groups that
// became uncongested.
func (m Message) CongUpdate() (uint64, error) {
	if err := m.check(LevelRDS, TypeCongUpdate, CongUpdateLen); err != nil {
		return 0, err
	}
	return le.Uint64(m.Data), nil
}

// atomic decodes struct rds_atomic_args of the given type.
func (m Message) atomic(typ int32) (c Cookie, local, remote uint64, w [4]uint64, f Flags, token uint64, err error) {
	if err = m.check(LevelRDS, typ, AtomicLen); err != nil {
		return
	}
	d := m.Data
	c = Cookie(le.Uint64(d[0:]))
	local = le.Uint64(d[8:])
	remote = le.Uint64(d[16:])
	for i := range w {
		w[i] = le.Uint64(d[24+8*i:])
	}
	f = Flags(le.Uint64(d[56:]))
	token = le.Uint64(d[64:])
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
	if err := m.check(LevelRDS, TypeRxPathLatency, RxPathLatencyLen); err != nil {
		return RxTrace{}, err
	}
	d := m.Data
	t := RxTrace{Count: d[0]}
	if t.Count > MaxTracePoints {
		return RxTrace{}, &Error{Err: ErrInvalid, Offset: -1, Level: m.Level, Type: m.Type, Len: int(t.Count)}
	}
	for i := range t.Points {
		t.Points[i] = TracePoint(d[1+i])
		t.Latency[i] = le.Uint64(d[8+8*i:])
	}
	return t, nil
}

// ZeroCopyCookie decodes RDS_CMSG_ZCOPY_COOKIE.
func (m Message) ZeroCopyCookie() (uint32, error) {
	if err := m.check(LevelRDS, TypeZeroCopyCookie, ZeroCopyCookieLen); err != nil {
		return 0, err
	}
	return le.Uint32(m.Data), nil
}

// ZeroCopyCompletion decodes RDS_CMSG_ZCOPY_COMPLETION. All eight cookie
// slots are copied; only the first N are meaningful. A count above
// MaxZeroCopyCookies is ErrInvalid.
func (m Message) ZeroCopyCompletion() (ZeroCopyCookies, error) {
	if err := m.check(LevelRDS, TypeZeroCopyCompletion, ZeroCopyCompletionLen); err != nil {
		return ZeroCopyCookies{}, err
	}
	num := le.Uint32(m.Data[0:])
	if num > MaxZeroCopyCookies {
		return ZeroCopyCookies{}, &Error{Err: ErrInvalid, Offset: -1, Level: m.Level, Type: m.Type, Len: clampLen(uint64(num))}
	}
	z := ZeroCopyCookies{N: int(num)}
	for i := range z.Cookies {
		z.Cookies[i] = le.Uint32(m.Data[4+4*i:])
	}
	return z, nil
}

func (m Message) checkSocket(oldType, newType int32, n int) error {
	if m.Level != LevelSocket || (m.Type != oldType && m.Type != newType) {
		return &Error{Err: ErrWrongType, Offset: -1, Level: m.Level, Type: m.Type, Len: len(m.Data)}
	}
	return m.checkLen(n)
}

func timespec(d []byte) Timespec {
	return Timespec{Sec: int64(le.Uint64(d[0:])), Nsec: int64(le.Uint64(d[8:]))}
}

// Timestamp decodes SCM_TIMESTAMP or SO_TIMESTAMP_NEW.
func (m Message) Timestamp() (Timeval, error) {
	if err := m.checkSocket(TypeTimestamp, TypeTimestampNew, TimevalLen); err != nil {
		return Timeval{}, err
	}
	return Timeval{Sec: int64(le.Uint64(m.Data[0:])), Usec: int64(le.Uint64(m.Data[8:]))}, nil
}

// TimestampNS decodes SCM_TIMESTAMPNS or SO_TIMESTAMPNS_NEW.
func (m Message) TimestampNS() (Timespec, error) {
	if err := m.checkSocket(TypeTimestampNS, TypeTimestampNSNew, TimespecLen); err != nil {
		return Timespec{}, err
	}
	return timespec(m.Data), nil
}

// Timestamping decodes SCM_TIMESTAMPING or SO_TIMESTAMPING_NEW.
func (m Message) Timestamping() (Timestamping, error) {
	if err := m.checkSocket(TypeTimestamping, TypeTimestampingNew, TimestampingLen); err != nil {
		return Timestamping{}, err
	}
	return Timestamping{
		Software:   timespec(m.Data[0:]),
		Deprecated: timespec(m.Data[16:]),
		Hardware:   timespec(m.Data[32:]),
	}, nil
}
