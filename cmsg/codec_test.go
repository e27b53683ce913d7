// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
)

// codecCase pairs a message with its byte image, written out by hand from
// the kernel header: little-endian, 16-byte header (cmsg_len u64, level
// s32, type s32), data, zero padding to a multiple of 8.
type codecCase struct {
	name   string
	build  func(*Builder)
	decode func(Message) (any, error)
	value  any
	image  []byte
}

var codecCases = []codecCase{
	{
		name:   "RDMAArgs",
		build:  func(b *Builder) { b.RDMAArgs(testRDMAArgs) },
		decode: func(m Message) (any, error) { return m.RDMAArgs() },
		value:  testRDMAArgs,
		image: []byte{
			0x48, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 56 = 72
			0x14, 0x01, 0, 0, // level SOL_RDS = 276
			0x01, 0, 0, 0, // type RDS_CMSG_RDMA_ARGS
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // cookie
			0x00, 0x10, 0, 0, 0, 0, 0, 0, // remote_vec.addr = 0x1000
			0x00, 0x02, 0, 0, 0, 0, 0, 0, // remote_vec.bytes = 512
			0xf0, 0xde, 0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, // local_vec_addr
			0x02, 0, 0, 0, 0, 0, 0, 0, // nr_local = 2
			0x21, 0, 0, 0, 0, 0, 0, 0, // flags = READWRITE|NOTIFY_ME
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // user_token
		},
	},
	{
		name:   "RDMADest",
		build:  func(b *Builder) { b.RDMADest(MakeCookie(0xaabbccdd, 0x123)) },
		decode: func(m Message) (any, error) { return m.RDMADest() },
		value:  MakeCookie(0xaabbccdd, 0x123),
		image: []byte{
			0x18, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 24
			0x14, 0x01, 0, 0, // SOL_RDS
			0x02, 0, 0, 0, // RDS_CMSG_RDMA_DEST
			0xdd, 0xcc, 0xbb, 0xaa, // r_key (low half)
			0x23, 0x01, 0, 0, // offset (high half)
		},
	},
	{
		name:   "RDMAMap",
		build:  func(b *Builder) { b.RDMAMap(testMapArgs) },
		decode: func(m Message) (any, error) { return m.RDMAMap() },
		value:  testMapArgs,
		image: []byte{
			0x30, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 32 = 48
			0x14, 0x01, 0, 0, // SOL_RDS
			0x03, 0, 0, 0, // RDS_CMSG_RDMA_MAP
			0x00, 0x00, 0x40, 0x00, 0x00, 0x7f, 0, 0, // vec.addr = 0x7f0000400000
			0x00, 0x00, 0x01, 0, 0, 0, 0, 0, // vec.bytes = 65536
			0x08, 0x00, 0x40, 0x00, 0x00, 0x7f, 0, 0, // cookie_addr
			0x0d, 0, 0, 0, 0, 0, 0, 0, // flags = READWRITE|INVALIDATE|USE_ONCE
		},
	},
	{
		name:   "RDMAStatus",
		build:  func(b *Builder) { b.RDMAStatus(Notify{UserToken: 0x0102030405060708, Status: StatusDropped}) },
		decode: func(m Message) (any, error) { return m.RDMAStatus() },
		value:  Notify{UserToken: 0x0102030405060708, Status: StatusDropped},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 16 = 32
			0x14, 0x01, 0, 0, // SOL_RDS
			0x04, 0, 0, 0, // RDS_CMSG_RDMA_STATUS
			0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // user_token
			0x03, 0, 0, 0, // status = RDS_RDMA_DROPPED
			0, 0, 0, 0, // struct tail padding
		},
	},
	{
		name:   "RDMAStatusNegative",
		build:  func(b *Builder) { b.RDMAStatus(Notify{UserToken: 1, Status: -5}) },
		decode: func(m Message) (any, error) { return m.RDMAStatus() },
		value:  Notify{UserToken: 1, Status: -5},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0,
			0x14, 0x01, 0, 0,
			0x04, 0, 0, 0,
			0x01, 0, 0, 0, 0, 0, 0, 0,
			0xfb, 0xff, 0xff, 0xff, // status = -5 (s32)
			0, 0, 0, 0,
		},
	},
	{
		name:   "CongUpdate",
		build:  func(b *Builder) { b.CongUpdate(1<<63 | 1<<10 | 1) },
		decode: func(m Message) (any, error) { return m.CongUpdate() },
		value:  uint64(1<<63 | 1<<10 | 1),
		image: []byte{
			0x18, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 24
			0x14, 0x01, 0, 0, // SOL_RDS
			0x05, 0, 0, 0, // RDS_CMSG_CONG_UPDATE
			0x01, 0x04, 0, 0, 0, 0, 0, 0x80, // mask: bits 0, 10, 63
		},
	},
	{
		name: "AtomicFADD",
		build: func(b *Builder) {
			b.AtomicFADD(AtomicFADD{Cookie: 0x0807060504030201, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, Flags: FlagNotifyMe, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.AtomicFADD() },
		value:  AtomicFADD{Cookie: 0x0807060504030201, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, Flags: FlagNotifyMe, UserToken: 0x99},
		image: []byte{
			0x58, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 72 = 88
			0x14, 0x01, 0, 0, // SOL_RDS
			0x06, 0, 0, 0, // RDS_CMSG_ATOMIC_FADD
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // cookie
			0x22, 0, 0, 0, 0, 0, 0, 0, // local_addr
			0x33, 0, 0, 0, 0, 0, 0, 0, // remote_addr
			0x44, 0, 0, 0, 0, 0, 0, 0, // fadd.add
			0, 0, 0, 0, 0, 0, 0, 0, // unused union word
			0, 0, 0, 0, 0, 0, 0, 0, // unused union word
			0, 0, 0, 0, 0, 0, 0, 0, // unused union word
			0x20, 0, 0, 0, 0, 0, 0, 0, // flags = NOTIFY_ME
			0x99, 0, 0, 0, 0, 0, 0, 0, // user_token
		},
	},
	{
		name: "AtomicCSWP",
		build: func(b *Builder) {
			b.AtomicCSWP(AtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, Flags: FlagNotifyMe, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.AtomicCSWP() },
		value:  AtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, Flags: FlagNotifyMe, UserToken: 0x99},
		image: []byte{
			0x58, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 88
			0x14, 0x01, 0, 0, // SOL_RDS
			0x07, 0, 0, 0, // RDS_CMSG_ATOMIC_CSWP
			0x11, 0, 0, 0, 0, 0, 0, 0, // cookie
			0x22, 0, 0, 0, 0, 0, 0, 0, // local_addr
			0x33, 0, 0, 0, 0, 0, 0, 0, // remote_addr
			0x44, 0, 0, 0, 0, 0, 0, 0, // cswp.compare
			0x55, 0, 0, 0, 0, 0, 0, 0, // cswp.swap
			0, 0, 0, 0, 0, 0, 0, 0, // unused
			0, 0, 0, 0, 0, 0, 0, 0, // unused
			0x20, 0, 0, 0, 0, 0, 0, 0, // flags
			0x99, 0, 0, 0, 0, 0, 0, 0, // user_token
		},
	},
	{
		name: "MaskedAtomicFADD",
		build: func(b *Builder) {
			b.MaskedAtomicFADD(MaskedAtomicFADD{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, NocarryMask: 0x55, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.MaskedAtomicFADD() },
		value:  MaskedAtomicFADD{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, NocarryMask: 0x55, UserToken: 0x99},
		image: []byte{
			0x58, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 88
			0x14, 0x01, 0, 0, // SOL_RDS
			0x08, 0, 0, 0, // RDS_CMSG_MASKED_ATOMIC_FADD
			0x11, 0, 0, 0, 0, 0, 0, 0, // cookie
			0x22, 0, 0, 0, 0, 0, 0, 0, // local_addr
			0x33, 0, 0, 0, 0, 0, 0, 0, // remote_addr
			0x44, 0, 0, 0, 0, 0, 0, 0, // m_fadd.add
			0x55, 0, 0, 0, 0, 0, 0, 0, // m_fadd.nocarry_mask
			0, 0, 0, 0, 0, 0, 0, 0, // unused
			0, 0, 0, 0, 0, 0, 0, 0, // unused
			0, 0, 0, 0, 0, 0, 0, 0, // flags = 0
			0x99, 0, 0, 0, 0, 0, 0, 0, // user_token
		},
	},
	{
		name: "MaskedAtomicCSWP",
		build: func(b *Builder) {
			b.MaskedAtomicCSWP(MaskedAtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, CompareMask: 0x66, SwapMask: 0x77, Flags: FlagFence, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.MaskedAtomicCSWP() },
		value:  MaskedAtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, CompareMask: 0x66, SwapMask: 0x77, Flags: FlagFence, UserToken: 0x99},
		image: []byte{
			0x58, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 88
			0x14, 0x01, 0, 0, // SOL_RDS
			0x09, 0, 0, 0, // RDS_CMSG_MASKED_ATOMIC_CSWP
			0x11, 0, 0, 0, 0, 0, 0, 0, // cookie
			0x22, 0, 0, 0, 0, 0, 0, 0, // local_addr
			0x33, 0, 0, 0, 0, 0, 0, 0, // remote_addr
			0x44, 0, 0, 0, 0, 0, 0, 0, // m_cswp.compare
			0x55, 0, 0, 0, 0, 0, 0, 0, // m_cswp.swap
			0x66, 0, 0, 0, 0, 0, 0, 0, // m_cswp.compare_mask
			0x77, 0, 0, 0, 0, 0, 0, 0, // m_cswp.swap_mask
			0x02, 0, 0, 0, 0, 0, 0, 0, // flags = FENCE
			0x99, 0, 0, 0, 0, 0, 0, 0, // user_token
		},
	},
	{
		name:   "RxPathLatency",
		build:  func(b *Builder) { b.RxPathLatency(testRxTrace) },
		decode: func(m Message) (any, error) { return m.RxPathLatency() },
		value:  testRxTrace,
		image: []byte{
			0x30, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 32 = 48
			0x14, 0x01, 0, 0, // SOL_RDS
			0x0b, 0, 0, 0, // RDS_CMSG_RXPATH_LATENCY
			0x02,       // rx_traces = 2
			0x02, 0x00, // rx_trace_pos = {DELIVERED, HDR_TO_DGRAM_START,
			0x00,       //  unused}
			0, 0, 0, 0, // padding before the u64 array
			0xe8, 0x03, 0, 0, 0, 0, 0, 0, // rx_trace[0] = 1000 ns
			0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, // rx_trace[1] = 1000000 ns
			0, 0, 0, 0, 0, 0, 0, 0, // rx_trace[2] unused
		},
	},
	{
		name:   "ZeroCopyCookie",
		build:  func(b *Builder) { b.ZeroCopyCookie(0xdeadbeef) },
		decode: func(m Message) (any, error) { return m.ZeroCopyCookie() },
		value:  uint32(0xdeadbeef),
		image: []byte{
			0x14, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 4 = 20
			0x14, 0x01, 0, 0, // SOL_RDS
			0x0c, 0, 0, 0, // RDS_CMSG_ZCOPY_COOKIE
			0xef, 0xbe, 0xad, 0xde, // cookie
			0, 0, 0, 0, // padding to 24
		},
	},
	{
		name:   "ZeroCopyCompletion",
		build:  func(b *Builder) { b.ZeroCopyCompletion(testZcopy) },
		decode: func(m Message) (any, error) { return m.ZeroCopyCompletion() },
		value:  testZcopy,
		image: []byte{
			0x34, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 36 = 52
			0x14, 0x01, 0, 0, // SOL_RDS
			0x0d, 0, 0, 0, // RDS_CMSG_ZCOPY_COMPLETION
			0x03, 0, 0, 0, // num = 3
			0x01, 0, 0, 0, // cookies[0]
			0x02, 0, 0, 0, // cookies[1]
			0x00, 0x01, 0, 0, // cookies[2] = 256
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // cookies[3..7]
			0, 0, 0, 0, // padding to 56
		},
	},
	{
		name: "ZeroCopyCompletionFull",
		build: func(b *Builder) {
			b.ZeroCopyCompletion(ZeroCopyCookies{N: 8, Cookies: [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}})
		},
		decode: func(m Message) (any, error) { return m.ZeroCopyCompletion() },
		value:  ZeroCopyCookies{N: 8, Cookies: [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}},
		image: []byte{
			0x34, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x01, 0, 0, 0x0d, 0, 0, 0,
			0x08, 0, 0, 0, // num = 8
			1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0,
			5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0,
			0, 0, 0, 0, // padding
		},
	},
	{
		name:   "Timestamp",
		build:  func(b *Builder) { b.Timestamp(Timeval{Sec: 1700000000, Usec: 123456}) },
		decode: func(m Message) (any, error) { return m.Timestamp() },
		value:  Timeval{Sec: 1700000000, Usec: 123456},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 32
			0x01, 0, 0, 0, // SOL_SOCKET
			0x1d, 0, 0, 0, // SO_TIMESTAMP_OLD = 29
			0x00, 0xf1, 0x53, 0x65, 0, 0, 0, 0, // tv_sec = 1700000000
			0x40, 0xe2, 0x01, 0, 0, 0, 0, 0, // tv_usec = 123456
		},
	},
	{
		name:   "TimestampNew",
		build:  func(b *Builder) { b.TimestampNew(Timeval{Sec: -1, Usec: 999999}) },
		decode: func(m Message) (any, error) { return m.Timestamp() },
		value:  Timeval{Sec: -1, Usec: 999999},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 32
			0x01, 0, 0, 0, // SOL_SOCKET
			0x3f, 0, 0, 0, // SO_TIMESTAMP_NEW = 63
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // tv_sec = -1
			0x3f, 0x42, 0x0f, 0, 0, 0, 0, 0, // tv_usec = 999999
		},
	},
	{
		name:   "TimestampNS",
		build:  func(b *Builder) { b.TimestampNS(Timespec{Sec: 2, Nsec: 500000000}) },
		decode: func(m Message) (any, error) { return m.TimestampNS() },
		value:  Timespec{Sec: 2, Nsec: 500000000},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 32
			0x01, 0, 0, 0, // SOL_SOCKET
			0x23, 0, 0, 0, // SO_TIMESTAMPNS_OLD = 35
			0x02, 0, 0, 0, 0, 0, 0, 0, // tv_sec
			0x00, 0x65, 0xcd, 0x1d, 0, 0, 0, 0, // tv_nsec = 500000000
		},
	},
	{
		name:   "TimestampNSNew",
		build:  func(b *Builder) { b.TimestampNSNew(Timespec{Sec: 3, Nsec: 1}) },
		decode: func(m Message) (any, error) { return m.TimestampNS() },
		value:  Timespec{Sec: 3, Nsec: 1},
		image: []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 32
			0x01, 0, 0, 0, // SOL_SOCKET
			0x40, 0, 0, 0, // SO_TIMESTAMPNS_NEW = 64
			0x03, 0, 0, 0, 0, 0, 0, 0, // tv_sec
			0x01, 0, 0, 0, 0, 0, 0, 0, // tv_nsec
		},
	},
	{
		name:   "Timestamping",
		build:  func(b *Builder) { b.Timestamping(testTimestamping) },
		decode: func(m Message) (any, error) { return m.Timestamping() },
		value:  testTimestamping,
		image: []byte{
			0x40, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16 + 48 = 64
			0x01, 0, 0, 0, // SOL_SOCKET
			0x25, 0, 0, 0, // SO_TIMESTAMPING_OLD = 37
			0x0a, 0, 0, 0, 0, 0, 0, 0, 0x0b, 0, 0, 0, 0, 0, 0, 0, // ts[0] software
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // ts[1] deprecated
			0x0c, 0, 0, 0, 0, 0, 0, 0, 0x0d, 0, 0, 0, 0, 0, 0, 0, // ts[2] hardware
		},
	},
	{
		name:   "TimestampingNew",
		build:  func(b *Builder) { b.TimestampingNew(testTimestamping) },
		decode: func(m Message) (any, error) { return m.Timestamping() },
		value:  testTimestamping,
		image: []byte{
			0x40, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 64
			0x01, 0, 0, 0, // SOL_SOCKET
			0x41, 0, 0, 0, // SO_TIMESTAMPING_NEW = 65
			0x0a, 0, 0, 0, 0, 0, 0, 0, 0x0b, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			0x0c, 0, 0, 0, 0, 0, 0, 0, 0x0d, 0, 0, 0, 0, 0, 0, 0,
		},
	},
}

var (
	testRDMAArgs = RDMAArgs{
		Cookie:       0x0807060504030201,
		Remote:       IOVec{Addr: 0x1000, Bytes: 512},
		LocalVecAddr: 0x123456789abcdef0,
		NumLocal:     2,
		Flags:        FlagReadWrite | FlagNotifyMe,
		UserToken:    ^uint64(0),
	}
	testMapArgs = MapArgs{
		Vec:        IOVec{Addr: 0x7f0000400000, Bytes: 65536},
		CookieAddr: 0x7f0000400008,
		Flags:      FlagReadWrite | FlagInvalidate | FlagUseOnce,
	}
	testRxTrace = RxTrace{
		Count:   2,
		Points:  [3]TracePoint{TraceDgramDelivered, TraceHdrToDgramStart},
		Latency: [3]uint64{1000, 1000000},
	}
	testZcopy        = ZeroCopyCookies{N: 3, Cookies: [8]uint32{1, 2, 256}}
	testTimestamping = Timestamping{
		Software: Timespec{Sec: 10, Nsec: 11},
		Hardware: Timespec{Sec: 12, Nsec: 13},
	}
)

// image returns c.image adjusted for this architecture: the images are
// written with SOL_SOCKET = 1, which mips64le numbers 0xffff.
func (c *codecCase) wantImage() []byte {
	img := bytes.Clone(c.image)
	if int32(binary.LittleEndian.Uint32(img[8:])) == 1 && LevelSocket != 1 {
		binary.LittleEndian.PutUint32(img[8:], uint32(LevelSocket))
	}
	return img
}

func TestBuild(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			var b Builder
			c.build(&b)
			got, err := b.Finish()
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if want := c.wantImage(); !bytes.Equal(got, want) {
				t.Errorf("bytes:\n got %x\nwant %x", got, want)
			}
			if len(got)%Alignment != 0 {
				t.Errorf("length %d not a multiple of %d", len(got), Alignment)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			img := c.wantImage()
			p := NewParser(img)
			m, err := p.Next()
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if got := Len(len(m.Data)); got != int(binary.LittleEndian.Uint64(img)) {
				t.Errorf("data length %d does not match cmsg_len", len(m.Data))
			}
			v, err := c.decode(m)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(v, c.value) {
				t.Errorf("decoded %+v, want %+v", v, c.value)
			}
			if _, err := p.Next(); err != io.EOF {
				t.Errorf("second Next: %v, want io.EOF", err)
			}
		})
	}
}

// TestParseMissingPadding parses images whose last message lacks its
// trailing padding, as put_cmsg leaves them when the buffer ends there.
func TestParseMissingPadding(t *testing.T) {
	for _, c := range codecCases {
		img := c.wantImage()
		n := int(binary.LittleEndian.Uint64(img))
		if n == len(img) {
			continue
		}
		p := NewParser(img[:n])
		m, err := p.Next()
		if err != nil {
			t.Errorf("%s: Next: %v", c.name, err)
			continue
		}
		if _, err := c.decode(m); err != nil {
			t.Errorf("%s: decode: %v", c.name, err)
		}
		if _, err := p.Next(); err != io.EOF {
			t.Errorf("%s: second Next: %v, want io.EOF", c.name, err)
		}
	}
}

// TestBuildAll builds every message into one buffer and parses them back
// in order, checking that Space accounts for each.
func TestBuildAll(t *testing.T) {
	b := NewBuilder(make([]byte, 0, 1024))
	want := 0
	for _, c := range codecCases {
		c.build(&b)
		want += len(c.image)
	}
	buf, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if len(buf) != want {
		t.Fatalf("built %d bytes, want %d", len(buf), want)
	}
	p := NewParser(buf)
	for _, c := range codecCases {
		off := p.Offset()
		m, err := p.Next()
		if err != nil {
			t.Fatalf("%s: Next at %d: %v", c.name, off, err)
		}
		if !bytes.Equal(buf[off:p.Offset()], c.wantImage()) {
			t.Errorf("%s: bytes at %d differ", c.name, off)
		}
		v, err := c.decode(m)
		if err != nil || !reflect.DeepEqual(v, c.value) {
			t.Errorf("%s: decoded %+v, %v; want %+v", c.name, v, err, c.value)
		}
	}
	if _, err := p.Next(); err != io.EOF {
		t.Errorf("after last: %v, want io.EOF", err)
	}
}

func TestSpaceConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"HeaderLen", HeaderLen, 16},
		{"Space(0)", Space(0), 16},
		{"Space(1)", Space(1), 24},
		{"Space(8)", Space(8), 24},
		{"Len(4)", Len(4), 20},
		{"RDMAArgsSpace", RDMAArgsSpace, 72},
		{"RDMADestSpace", RDMADestSpace, 24},
		{"RDMAMapSpace", RDMAMapSpace, 48},
		{"RDMAStatusSpace", RDMAStatusSpace, 32},
		{"CongUpdateSpace", CongUpdateSpace, 24},
		{"AtomicSpace", AtomicSpace, 88},
		{"RxPathLatencySpace", RxPathLatencySpace, 48},
		{"ZeroCopyCookieSpace", ZeroCopyCookieSpace, 24},
		{"ZeroCopyCompletionSpace", ZeroCopyCompletionSpace, 56},
		{"TimevalSpace", TimevalSpace, 32},
		{"TimespecSpace", TimespecSpace, 32},
		{"TimestampingSpace", TimestampingSpace, 64},
		{"MaxReceiveSpace", MaxReceiveSpace, 24 + 32 + 48 + 56},
		{"Space(RDMAArgsLen)", Space(RDMAArgsLen), RDMAArgsSpace},
		{"Space(ZeroCopyCompletionLen)", Space(ZeroCopyCompletionLen), ZeroCopyCompletionSpace},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestCookie(t *testing.T) {
	c := MakeCookie(0x12345678, 0x9abc)
	if c != 0x00009abc12345678 {
		t.Errorf("MakeCookie = %#x", uint64(c))
	}
	if c.RKey() != 0x12345678 || c.Offset() != 0x9abc {
		t.Errorf("RKey, Offset = %#x, %#x", c.RKey(), c.Offset())
	}
	if s := c.String(); s != "rkey=0x12345678 offset=0x9abc" {
		t.Errorf("String = %q", s)
	}
}

func TestStringers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{StatusSuccess.String(), "success"},
		{StatusRemoteError.String(), "remote error"},
		{StatusCanceled.String(), "canceled"},
		{StatusDropped.String(), "dropped"},
		{StatusOtherError.String(), "other error"},
		{Status(-22).String(), "status(-22)"},
		{TraceHdrToDgramStart.String(), "hdr-to-dgram-start"},
		{TraceDgramReassemble.String(), "dgram-reassemble"},
		{TraceDgramDelivered.String(), "dgram-delivered"},
		{TracePoint(7).String(), "tracepoint(7)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestTimeConversions(t *testing.T) {
	tv := Timeval{Sec: 1700000000, Usec: 250}
	if got := tv.UnixNano(); got != 1700000000000250000 {
		t.Errorf("Timeval.UnixNano = %d", got)
	}
	if got := tv.Time().UnixNano(); got != tv.UnixNano() {
		t.Errorf("Timeval.Time = %d ns", got)
	}
	ts := Timespec{Sec: 5, Nsec: 7}
	if got := ts.UnixNano(); got != 5000000007 {
		t.Errorf("Timespec.UnixNano = %d", got)
	}
	if got := ts.Time().UnixNano(); got != 5000000007 {
		t.Errorf("Timespec.Time = %d ns", got)
	}
	tr := testRxTrace
	if d := tr.Duration(1); d.Milliseconds() != 1 {
		t.Errorf("RxTrace.Duration(1) = %v", d)
	}
	z := testZcopy
	if l := z.List(); !reflect.DeepEqual(l, []uint32{1, 2, 256}) {
		t.Errorf("List = %v", l)
	}
	z.N = 99
	if l := z.List(); len(l) != MaxZeroCopyCookies {
		t.Errorf("List with N=99 has %d cookies", len(l))
	}
}

func TestAppendRaw(t *testing.T) {
	var b Builder
	b.Append(LevelRDS, 99, []byte{1, 2, 3})
	b.Append(7, 8, nil)
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x13, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 19
		0x14, 0x01, 0, 0, // SOL_RDS
		0x63, 0, 0, 0, // type 99
		1, 2, 3, 0, 0, 0, 0, 0, // data, padding to 24
		0x10, 0, 0, 0, 0, 0, 0, 0, // cmsg_len = 16, no data
		0x07, 0, 0, 0, // level 7
		0x08, 0, 0, 0, // type 8
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got  %x\nwant %x", got, want)
	}
}

// TestBuilderReusesDirtyBuffer checks that padding and unused fields are
// zeroed when the buffer's spare capacity holds old bytes.
func TestBuilderReusesDirtyBuffer(t *testing.T) {
	dirty := bytes.Repeat([]byte{0xaa}, 256)
	for _, c := range codecCases {
		b := NewBuilder(dirty[:0])
		c.build(&b)
		got, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.wantImage()) {
			t.Errorf("%s: dirty buffer gave %x", c.name, got)
		}
		if &got[0] != &dirty[0] {
			t.Errorf("%s: builder did not use the buffer's capacity", c.name)
		}
	}
}

func TestBuilderAppendsAfterContents(t *testing.T) {
	b := NewBuilder([]byte{0xee})
	b.CongUpdate(1)
	got, _ := b.Finish()
	if len(got) != 1+CongUpdateSpace || got[0] != 0xee || got[1] != 0x18 {
		t.Errorf("got %x", got)
	}
	if b.Len() != len(got) {
		t.Errorf("Len = %d, want %d", b.Len(), len(got))
	}
}

func TestBuilderStickyError(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(*Builder)
		n     int
	}{
		{"ZeroCopyCompletion N=9", func(b *Builder) { b.ZeroCopyCompletion(ZeroCopyCookies{N: 9}) }, 9},
		{"ZeroCopyCompletion N=-1", func(b *Builder) { b.ZeroCopyCompletion(ZeroCopyCookies{N: -1}) }, -1},
		{"RxPathLatency Count=4", func(b *Builder) { b.RxPathLatency(RxTrace{Count: 4}) }, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b Builder
			b.CongUpdate(1)
			c.build(&b)
			b.CongUpdate(2) // ignored after the error
			buf, err := b.Finish()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Finish error = %v, want ErrInvalid", err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Len != c.n || e.Offset != CongUpdateSpace {
				t.Errorf("error details = %+v", e)
			}
			if b.Err() != err {
				t.Errorf("Err() = %v, want %v", b.Err(), err)
			}
			if len(buf) != CongUpdateSpace {
				t.Errorf("buffer has %d bytes after the error, want %d", len(buf), CongUpdateSpace)
			}
			b.Reset(buf[:0])
			if b.Err() != nil {
				t.Errorf("Reset kept the error")
			}
		})
	}
}
