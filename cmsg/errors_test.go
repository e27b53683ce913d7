// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseErrors(t *testing.T) {
	hl := wordSize + 8                 // sizeof(struct cmsghdr)
	okCong := image(solRDS, 5, u64(1)) // one good message
	huge := hdr(0, solRDS, 5)          // cmsg_len all ones
	copy(huge, bytes.Repeat([]byte{0xff}, wordSize))
	for _, c := range []struct {
		name    string
		buf     []byte
		good    int // messages parsed before the error
		want    error
		offset  int
		wantLen int
	}{
		{
			name: "short header",
			buf:  hdr(uint64(hl), solRDS, 5)[:hl-1],
			want: ErrShortHeader, wantLen: hl - 1,
		},
		{
			name: "short header after a message",
			buf:  append(bytes.Clone(okCong), 0x10, 0, 0),
			good: 1, want: ErrShortHeader, offset: len(okCong), wantLen: 3,
		},
		{
			name: "cmsg_len zero",
			buf:  hdr(0, solRDS, 5),
			want: ErrHeaderLen, wantLen: 0,
		},
		{
			name: "cmsg_len one short of the header",
			buf:  hdr(uint64(hl-1), solRDS, 5),
			want: ErrHeaderLen, wantLen: hl - 1,
		},
		{
			name: "cmsg_len past buffer",
			buf:  append(hdr(uint64(hl+9), solRDS, 5), 1, 2, 3, 4, 5, 6, 7, 8),
			want: ErrOverrun, wantLen: hl + 9,
		},
		{
			name: "cmsg_len huge",
			buf:  huge,
			want: ErrOverrun, wantLen: math.MaxInt32,
		},
		{
			name: "second message past buffer",
			buf: append(append(bytes.Clone(okCong), hdr(uint64(hl+16), solRDS, 4)...),
				1, 2, 3, 4),
			good: 1, want: ErrOverrun, offset: len(okCong), wantLen: hl + 16,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(c.buf)
			for i := 0; i < c.good; i++ {
				if _, err := p.Next(); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			_, err := p.Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("Next error = %v, want %v", err, c.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			if e.Offset != c.offset || e.Len != c.wantLen {
				t.Errorf("offset, len = %d, %d; want %d, %d", e.Offset, e.Len, c.offset, c.wantLen)
			}
			if !strings.HasPrefix(err.Error(), c.want.Error()) {
				t.Errorf("message %q does not start with %q", err, c.want)
			}
			if _, again := p.Next(); again != err {
				t.Errorf("error not sticky: %v", again)
			}
		})
	}
}

func TestParseEmpty(t *testing.T) {
	for _, buf := range [][]byte{nil, {}} {
		p := NewParser(buf)
		if _, err := p.Next(); err != io.EOF {
			t.Errorf("Next on %v = %v, want io.EOF", buf, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	rds := func(typ int32, n int) Message { return Message{Level: LevelRDS, Type: typ, Data: make([]byte, n)} }
	sock := func(typ int32, n int) Message { return Message{Level: LevelSocket, Type: typ, Data: make([]byte, n)} }
	zc := rds(TypeZeroCopyCompletion, zeroCopyCompletionLen)
	zc.Data[0] = 9 // num = 9
	tr := rds(TypeRxPathLatency, rxPathLatencyLen)
	tr.Data[0] = 4 // rx_traces = 4
	for _, c := range []struct {
		name   string
		decode func() error
		want   error
	}{
		{"RDMAArgs short", func() error { _, err := rds(TypeRDMAArgs, 55).RDMAArgs(); return err }, ErrDataLen},
		{"RDMAArgs long", func() error { _, err := rds(TypeRDMAArgs, 57).RDMAArgs(); return err }, ErrDataLen},
		{"RDMAArgs wrong type", func() error { _, err := rds(TypeRDMAMap, 56).RDMAArgs(); return err }, ErrWrongType},
		{"RDMAArgs wrong level", func() error {
			_, err := Message{Level: 0, Type: TypeRDMAArgs, Data: make([]byte, 56)}.RDMAArgs()
			return err
		}, ErrWrongType},
		{"RDMADest short", func() error { _, err := rds(TypeRDMADest, 4).RDMADest(); return err }, ErrDataLen},
		{"RDMADest wrong level", func() error { _, err := sock(TypeRDMADest, 8).RDMADest(); return err }, ErrWrongType},
		{"RDMAMap short", func() error { _, err := rds(TypeRDMAMap, 0).RDMAMap(); return err }, ErrDataLen},
		{"RDMAStatus truncated (MSG_CTRUNC)", func() error { _, err := rds(TypeRDMAStatus, rdmaStatusLen-4).RDMAStatus(); return err }, ErrDataLen},
		{"RDMAStatus wrong type", func() error { _, err := rds(TypeCongUpdate, 16).RDMAStatus(); return err }, ErrWrongType},
		{"CongUpdate short", func() error { _, err := rds(TypeCongUpdate, 7).CongUpdate(); return err }, ErrDataLen},
		{"AtomicFADD short", func() error { _, err := rds(TypeAtomicFADD, 64).AtomicFADD(); return err }, ErrDataLen},
		{"AtomicFADD as CSWP", func() error { _, err := rds(TypeAtomicFADD, 72).AtomicCSWP(); return err }, ErrWrongType},
		{"MaskedAtomicFADD as FADD", func() error { _, err := rds(TypeMaskedAtomicFADD, 72).AtomicFADD(); return err }, ErrWrongType},
		{"MaskedAtomicCSWP long", func() error { _, err := rds(TypeMaskedAtomicCSWP, 80).MaskedAtomicCSWP(); return err }, ErrDataLen},
		{"MaskedAtomicFADD wrong type", func() error { _, err := rds(TypeAtomicCSWP, 72).MaskedAtomicFADD(); return err }, ErrWrongType},
		{"RxPathLatency short", func() error { _, err := rds(TypeRxPathLatency, rxPathLatencyLen-4).RxPathLatency(); return err }, ErrDataLen},
		{"RxPathLatency count 4", func() error { _, err := tr.RxPathLatency(); return err }, ErrInvalid},
		{"ZeroCopyCookie long", func() error { _, err := rds(TypeZeroCopyCookie, 8).ZeroCopyCookie(); return err }, ErrDataLen},
		{"ZeroCopyCompletion short", func() error {
			_, err := rds(TypeZeroCopyCompletion, 35).ZeroCopyCompletion()
			return err
		}, ErrDataLen},
		{"ZeroCopyCompletion num 9", func() error { _, err := zc.ZeroCopyCompletion(); return err }, ErrInvalid},
		{"Timestamp short", func() error { _, err := sock(TypeTimestamp, 2*wordSize-1).Timestamp(); return err }, ErrDataLen},
		{"Timestamp at SOL_RDS", func() error { _, err := rds(TypeTimestamp, 16).Timestamp(); return err }, ErrWrongType},
		{"TimestampNew short", func() error { _, err := sock(TypeTimestampNew, 15).Timestamp(); return err }, ErrDataLen},
		{"TimestampNew long", func() error { _, err := sock(TypeTimestampNew, 17).Timestamp(); return err }, ErrDataLen},
		{"SCM_TIMESTAMPNS", func() error { _, err := sock(unix.SO_TIMESTAMPNS_OLD, 16).Timestamp(); return err }, ErrWrongType},
	} {
		err := c.decode()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error = %v, want %v", c.name, err, c.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Offset != -1 {
			t.Errorf("%s: error %#v lacks details", c.name, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Err: ErrOverrun, Offset: 24, Level: 276, Type: 4, Len: 32}
	const want = "cmsg: cmsg_len runs past the end of the buffer at offset 24 (level 276, type 4, length 32)"
	if e.Error() != want {
		t.Errorf("Error() = %q\nwant %q", e.Error(), want)
	}
	e.Offset = -1
	if strings.Contains(e.Error(), "offset") {
		t.Errorf("Error() with unknown offset = %q", e.Error())
	}
}
