// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

// kinds lists every message type as (level, type, decoder, encoder).
type kind struct {
	level, typ int32
	decode     func(Message) (any, error)
	encode     func(*Builder, any)
}

var kinds = []kind{
	{LevelRDS, TypeRDMAArgs, func(m Message) (any, error) { return m.RDMAArgs() }, func(b *Builder, v any) { b.RDMAArgs(v.(RDMAArgs)) }},
	{LevelRDS, TypeRDMADest, func(m Message) (any, error) { return m.RDMADest() }, func(b *Builder, v any) { b.RDMADest(v.(Cookie)) }},
	{LevelRDS, TypeRDMAMap, func(m Message) (any, error) { return m.RDMAMap() }, func(b *Builder, v any) { b.RDMAMap(v.(MapArgs)) }},
	{LevelRDS, TypeRDMAStatus, func(m Message) (any, error) { return m.RDMAStatus() }, func(b *Builder, v any) { b.RDMAStatus(v.(Notify)) }},
	{LevelRDS, TypeCongUpdate, func(m Message) (any, error) { return m.CongUpdate() }, func(b *Builder, v any) { b.CongUpdate(v.(uint64)) }},
	{LevelRDS, TypeAtomicFADD, func(m Message) (any, error) { return m.AtomicFADD() }, func(b *Builder, v any) { b.AtomicFADD(v.(AtomicFADD)) }},
	{LevelRDS, TypeAtomicCSWP, func(m Message) (any, error) { return m.AtomicCSWP() }, func(b *Builder, v any) { b.AtomicCSWP(v.(AtomicCSWP)) }},
	{LevelRDS, TypeMaskedAtomicFADD, func(m Message) (any, error) { return m.MaskedAtomicFADD() }, func(b *Builder, v any) { b.MaskedAtomicFADD(v.(MaskedAtomicFADD)) }},
	{LevelRDS, TypeMaskedAtomicCSWP, func(m Message) (any, error) { return m.MaskedAtomicCSWP() }, func(b *Builder, v any) { b.MaskedAtomicCSWP(v.(MaskedAtomicCSWP)) }},
	{LevelRDS, TypeRxPathLatency, func(m Message) (any, error) { return m.RxPathLatency() }, func(b *Builder, v any) { b.RxPathLatency(v.(RxTrace)) }},
	{LevelRDS, TypeZeroCopyCookie, func(m Message) (any, error) { return m.ZeroCopyCookie() }, func(b *Builder, v any) { b.ZeroCopyCookie(v.(uint32)) }},
	{LevelRDS, TypeZeroCopyCompletion, func(m Message) (any, error) { return m.ZeroCopyCompletion() }, func(b *Builder, v any) { b.ZeroCopyCompletion(v.(ZeroCopyCookies)) }},
	{LevelSocket, TypeTimestamp, func(m Message) (any, error) { return m.Timestamp() }, func(b *Builder, v any) { b.Timestamp(v.(Timeval)) }},
	{LevelSocket, TypeTimestampNew, func(m Message) (any, error) { return m.Timestamp() }, func(b *Builder, v any) { b.TimestampNew(v.(Timeval)) }},
}

func FuzzParse(f *testing.F) {
	for _, c := range codecCases {
		f.Add(c.wantImage())
	}
	var b Builder
	buildEvery(&b)
	all, _ := b.Finish()
	f.Add(all)
	f.Add([]byte{})
	f.Add([]byte{0x10, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x01, 0, 0, 0x04, 0, 0, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		p := NewParser(buf)
		for {
			off := p.off
			m, err := p.Next()
			if err == io.EOF {
				if off != len(buf) {
					t.Fatalf("EOF at offset %d of %d", off, len(buf))
				}
				return
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Offset != off {
					t.Fatalf("error %v: not an *Error at offset %d", err, off)
				}
				return
			}
			// Data must be exactly the bytes cmsg_len covers.
			n := int(cmsgLen(buf[off:]))
			if len(m.Data) != n-HeaderLen || cap(m.Data) != len(m.Data) {
				t.Fatalf("data len %d cap %d for cmsg_len %d", len(m.Data), cap(m.Data), n)
			}
			if len(m.Data) > 0 && &m.Data[0] != &buf[off+HeaderLen] {
				t.Fatalf("data does not alias the buffer")
			}
			if p.off <= off || p.off > len(buf) {
				t.Fatalf("offset went from %d to %d (len %d)", off, p.off, len(buf))
			}
			// Every decoder must cope with every message; what decodes
			// must survive encode and decode unchanged.
			for _, k := range kinds {
				v, err := k.decode(m)
				if err != nil {
					continue
				}
				if m.Level != k.level || (m.Type != k.typ && m.Type != pairedType(k.typ)) {
					t.Fatalf("decoder for type %d accepted level %d type %d", k.typ, m.Level, m.Type)
				}
				var rb Builder
				k.encode(&rb, v)
				out, err := rb.Finish()
				if err != nil {
					t.Fatalf("re-encoding %+v: %v", v, err)
				}
				rp := NewParser(out)
				rm, err := rp.Next()
				if err != nil {
					t.Fatal(err)
				}
				v2, err := k.decode(rm)
				if err != nil || !reflect.DeepEqual(v, v2) {
					t.Fatalf("re-decoded %+v, %v; want %+v", v2, err, v)
				}
			}
		}
	})
}

// pairedType returns the other number of a SOL_SOCKET timestamp type
// (old for new and new for old): one decoder accepts both.
func pairedType(typ int32) int32 {
	switch typ {
	case TypeTimestamp:
		return TypeTimestampNew
	case TypeTimestampNew:
		return TypeTimestamp
	}
	return typ
}

// valueFor derives a value of kind k from fuzzed words.
func valueFor(i int, w [6]uint64, s int32, n uint8) any {
	c := Cookie(w[0])
	switch kinds[i].typ {
	case TypeRDMAArgs:
		return RDMAArgs{Cookie: c, Remote: IOVec{w[1], w[2]}, LocalVecAddr: w[3], NumLocal: w[4], Flags: Flags(w[5]), UserToken: w[1] ^ w[5]}
	case TypeRDMADest:
		return c
	case TypeRDMAMap:
		return MapArgs{Vec: IOVec{w[1], w[2]}, CookieAddr: w[3], Flags: Flags(w[4])}
	case TypeRDMAStatus:
		return Notify{UserToken: w[1], Status: NotifyStatus(s)}
	case TypeCongUpdate:
		return w[2]
	case TypeAtomicFADD:
		return AtomicFADD{Cookie: c, LocalAddr: w[1], RemoteAddr: w[2], Add: w[3], Flags: Flags(w[4]), UserToken: w[5]}
	case TypeAtomicCSWP:
		return AtomicCSWP{Cookie: c, LocalAddr: w[1], RemoteAddr: w[2], Compare: w[3], Swap: w[4], Flags: Flags(w[5]), UserToken: w[0] + 1}
	case TypeMaskedAtomicFADD:
		return MaskedAtomicFADD{Cookie: c, LocalAddr: w[1], RemoteAddr: w[2], Add: w[3], NocarryMask: w[4], Flags: Flags(w[5]), UserToken: 3}
	case TypeMaskedAtomicCSWP:
		return MaskedAtomicCSWP{Cookie: c, LocalAddr: w[1], RemoteAddr: w[2], Compare: w[3], Swap: w[4], CompareMask: w[5], SwapMask: ^w[5], Flags: Flags(w[1]), UserToken: w[2]}
	case TypeRxPathLatency:
		return RxTrace{Count: n % (MaxTracePoints + 1), Points: [3]TracePoint{TracePoint(w[0]), TracePoint(w[1]), TracePoint(w[2])}, Latency: [3]time.Duration{time.Duration(w[3]), time.Duration(w[4]), time.Duration(w[5])}}
	case TypeZeroCopyCookie:
		return uint32(w[3])
	case TypeZeroCopyCompletion:
		z := ZeroCopyCookies{N: int(n % (MaxZeroCopyCookies + 1))}
		for j := range z.Cookies {
			z.Cookies[j] = uint32(w[j%6] >> (j % 3 * 8))
		}
		return z
	case TypeTimestampNew:
		return Timeval{Sec: int64(w[1]), Usec: int64(w[2])}
	default: // TypeTimestamp
		return Timeval{Sec: longValue(w[1]), Usec: longValue(w[2])}
	}
}

// longValue derives from w a value that fits a C long, the fields of the
// _OLD timestamp forms (32 bits on 32-bit ABIs).
func longValue(w uint64) int64 {
	if wordSize == 4 {
		return int64(int32(w))
	}
	return int64(w)
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6), int32(-1), uint8(3), []byte{0xaa, 0xbb})
	f.Add([]byte{9, 11}, ^uint64(0), uint64(0), uint64(1<<63), uint64(7), uint64(0), uint64(0), int32(4), uint8(255), []byte(nil))
	f.Fuzz(func(t *testing.T, seq []byte, w0, w1, w2, w3, w4, w5 uint64, s int32, n uint8, prefix []byte) {
		w := [6]uint64{w0, w1, w2, w3, w4, w5}
		// Build into a reused, dirty buffer after some existing bytes.
		buf := bytes.Repeat([]byte{0x5a}, 64*len(seq)+len(prefix)+8)
		copy(buf, prefix)
		b := NewBuilder(buf[:len(prefix)])
		want := make([]any, len(seq))
		for i, k := range seq {
			ki := int(k) % len(kinds)
			want[i] = valueFor(ki, w, s, n)
			kinds[ki].encode(&b, want[i])
			n = n*31 + 7 // vary counts between messages
		}
		out, err := b.Finish()
		if err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatalf("prefix overwritten")
		}
		p := NewParser(out[len(prefix):])
		for i, k := range seq {
			kd := kinds[int(k)%len(kinds)]
			m, err := p.Next()
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if !m.Is(kd.level, kd.typ) {
				t.Fatalf("message %d: level %d type %d, want %d %d", i, m.Level, m.Type, kd.level, kd.typ)
			}
			got, err := kd.decode(m)
			if err != nil {
				t.Fatalf("message %d: decode: %v", i, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("message %d: got %+v, want %+v", i, got, want[i])
			}
		}
		if _, err := p.Next(); err != io.EOF {
			t.Fatalf("after %d messages: %v, want io.EOF", len(seq), err)
		}
	})
}
