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

// codecCase pairs a message with its byte image, described field by field
// from the kernel header (see image_test.go for the layout rules).
type codecCase struct {
	name   string
	build  func(*Builder)
	decode func(Message) (any, error)
	value  any
	image  []byte
}

const solRDS = 276 // SOL_RDS, written out

var codecCases = []codecCase{
	{
		name:   "RDMAArgs",
		build:  func(b *Builder) { b.RDMAArgs(testRDMAArgs) },
		decode: func(m Message) (any, error) { return m.RDMAArgs() },
		value:  testRDMAArgs,
		image: image(solRDS, 1, // RDS_CMSG_RDMA_ARGS
			u64(0x0807060504030201), // cookie
			u64(0x1000), u64(512),   // remote_vec
			u64(0x123456789abcdef0), // local_vec_addr
			u64(2),                  // nr_local
			u64(0x21),               // flags = READWRITE|NOTIFY_ME
			u64(^uint64(0)),         // user_token
		),
	},
	{
		name:   "RDMADest",
		build:  func(b *Builder) { b.RDMADest(MakeCookie(0xaabbccdd, 0x123)) },
		decode: func(m Message) (any, error) { return m.RDMADest() },
		value:  MakeCookie(0xaabbccdd, 0x123),
		image:  image(solRDS, 2, u64(0x00000123_aabbccdd)), // offset high, r_key low
	},
	{
		name:   "RDMAMap",
		build:  func(b *Builder) { b.RDMAMap(testMapArgs) },
		decode: func(m Message) (any, error) { return m.RDMAMap() },
		value:  testMapArgs,
		image: image(solRDS, 3, // RDS_CMSG_RDMA_MAP
			u64(0x7f0000400000), u64(65536), // vec
			u64(0x7f0000400008), // cookie_addr
			u64(0x0d),           // flags = READWRITE|INVALIDATE|USE_ONCE
		),
	},
	{
		name:   "RDMAStatus",
		build:  func(b *Builder) { b.RDMAStatus(Notify{UserToken: 0x0102030405060708, Status: StatusDropped}) },
		decode: func(m Message) (any, error) { return m.RDMAStatus() },
		value:  Notify{UserToken: 0x0102030405060708, Status: StatusDropped},
		image: image(solRDS, 4, // RDS_CMSG_RDMA_STATUS
			u64(0x0102030405060708), // user_token
			s32(3),                  // status = RDS_RDMA_DROPPED
			u64Gap(12),              // struct tail padding
		),
	},
	{
		name:   "RDMAStatusNegative",
		build:  func(b *Builder) { b.RDMAStatus(Notify{UserToken: 1, Status: -5}) },
		decode: func(m Message) (any, error) { return m.RDMAStatus() },
		value:  Notify{UserToken: 1, Status: -5},
		image:  image(solRDS, 4, u64(1), s32(-5), u64Gap(12)),
	},
	{
		name:   "CongUpdate",
		build:  func(b *Builder) { b.CongUpdate(1<<63 | 1<<10 | 1) },
		decode: func(m Message) (any, error) { return m.CongUpdate() },
		value:  uint64(1<<63 | 1<<10 | 1),
		image:  image(solRDS, 5, u64(1<<63|1<<10|1)),
	},
	{
		name: "AtomicFADD",
		build: func(b *Builder) {
			b.AtomicFADD(AtomicFADD{Cookie: 0x0807060504030201, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, Flags: FlagNotifyMe, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.AtomicFADD() },
		value:  AtomicFADD{Cookie: 0x0807060504030201, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, Flags: FlagNotifyMe, UserToken: 0x99},
		image: image(solRDS, 6, // RDS_CMSG_ATOMIC_FADD
			u64(0x0807060504030201), u64(0x22), u64(0x33), // cookie, local_addr, remote_addr
			u64(0x44), u64(0), u64(0), u64(0), // fadd.add, unused union words
			u64(0x20), u64(0x99), // flags = NOTIFY_ME, user_token
		),
	},
	{
		name: "AtomicCSWP",
		build: func(b *Builder) {
			b.AtomicCSWP(AtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, Flags: FlagNotifyMe, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.AtomicCSWP() },
		value:  AtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, Flags: FlagNotifyMe, UserToken: 0x99},
		image: image(solRDS, 7, // RDS_CMSG_ATOMIC_CSWP
			u64(0x11), u64(0x22), u64(0x33),
			u64(0x44), u64(0x55), u64(0), u64(0), // cswp.compare, cswp.swap, unused
			u64(0x20), u64(0x99),
		),
	},
	{
		name: "MaskedAtomicFADD",
		build: func(b *Builder) {
			b.MaskedAtomicFADD(MaskedAtomicFADD{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, NocarryMask: 0x55, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.MaskedAtomicFADD() },
		value:  MaskedAtomicFADD{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Add: 0x44, NocarryMask: 0x55, UserToken: 0x99},
		image: image(solRDS, 8, // RDS_CMSG_MASKED_ATOMIC_FADD
			u64(0x11), u64(0x22), u64(0x33),
			u64(0x44), u64(0x55), u64(0), u64(0), // m_fadd.add, m_fadd.nocarry_mask, unused
			u64(0), u64(0x99),
		),
	},
	{
		name: "MaskedAtomicCSWP",
		build: func(b *Builder) {
			b.MaskedAtomicCSWP(MaskedAtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, CompareMask: 0x66, SwapMask: 0x77, Flags: FlagFence, UserToken: 0x99})
		},
		decode: func(m Message) (any, error) { return m.MaskedAtomicCSWP() },
		value:  MaskedAtomicCSWP{Cookie: 0x11, LocalAddr: 0x22, RemoteAddr: 0x33, Compare: 0x44, Swap: 0x55, CompareMask: 0x66, SwapMask: 0x77, Flags: FlagFence, UserToken: 0x99},
		image: image(solRDS, 9, // RDS_CMSG_MASKED_ATOMIC_CSWP
			u64(0x11), u64(0x22), u64(0x33),
			u64(0x44), u64(0x55), u64(0x66), u64(0x77), // compare, swap, compare_mask, swap_mask
			u64(0x02), u64(0x99), // flags = FENCE
		),
	},
	{
		name:   "RxPathLatency",
		build:  func(b *Builder) { b.RxPathLatency(testRxTrace) },
		decode: func(m Message) (any, error) { return m.RxPathLatency() },
		value:  testRxTrace,
		image: image(solRDS, 11, // RDS_CMSG_RXPATH_LATENCY
			u8(2),               // rx_traces
			u8(2), u8(0), u8(0), // rx_trace_pos = {DELIVERED, HDR_TO_DGRAM_START, unused}
			u64Gap(4),                       // padding before the u64 array
			u64(1000), u64(1000000), u64(0), // rx_trace in ns
		),
	},
	{
		name:   "ZeroCopyCookie",
		build:  func(b *Builder) { b.ZeroCopyCookie(0xdeadbeef) },
		decode: func(m Message) (any, error) { return m.ZeroCopyCookie() },
		value:  uint32(0xdeadbeef),
		image:  image(solRDS, 12, u32(0xdeadbeef)),
	},
	{
		name:   "ZeroCopyCompletion",
		build:  func(b *Builder) { b.ZeroCopyCompletion(testZcopy) },
		decode: func(m Message) (any, error) { return m.ZeroCopyCompletion() },
		value:  testZcopy,
		image: image(solRDS, 13, // RDS_CMSG_ZCOPY_COMPLETION
			u32(3), u32(1), u32(2), u32(256), // num, cookies[0..2]
			u32(0), u32(0), u32(0), u32(0), u32(0), // cookies[3..7]
		),
	},
	{
		name: "ZeroCopyCompletionFull",
		build: func(b *Builder) {
			b.ZeroCopyCompletion(ZeroCopyCookies{N: 8, Cookies: [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}})
		},
		decode: func(m Message) (any, error) { return m.ZeroCopyCompletion() },
		value:  ZeroCopyCookies{N: 8, Cookies: [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}},
		image:  image(solRDS, 13, u32(8), u32(1), u32(2), u32(3), u32(4), u32(5), u32(6), u32(7), u32(8)),
	},
	{
		name:   "Timestamp",
		build:  func(b *Builder) { b.Timestamp(Timeval{Sec: 1700000000, Usec: 123456}) },
		decode: func(m Message) (any, error) { return m.Timestamp() },
		value:  Timeval{Sec: 1700000000, Usec: 123456},
		image:  image(LevelSocket, 29, clong(1700000000), clong(123456)), // SO_TIMESTAMP_OLD
	},
	{
		name:   "TimestampNew",
		build:  func(b *Builder) { b.TimestampNew(Timeval{Sec: -1, Usec: 999999}) },
		decode: func(m Message) (any, error) { return m.Timestamp() },
		value:  Timeval{Sec: -1, Usec: 999999},
		image:  image(LevelSocket, 63, i64(-1), i64(999999)), // SO_TIMESTAMP_NEW
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
		Latency: [3]time.Duration{time.Microsecond, time.Millisecond},
	}
	testZcopy = ZeroCopyCookies{N: 3, Cookies: [8]uint32{1, 2, 256}}
)

// wantImage returns c.image.
func (c *codecCase) wantImage() []byte { return bytes.Clone(c.image) }

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
			if got := HeaderLen + len(m.Data); uint64(got) != cmsgLen(img) {
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
		n := int(cmsgLen(img))
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
		off := p.off
		m, err := p.Next()
		if err != nil {
			t.Fatalf("%s: Next at %d: %v", c.name, off, err)
		}
		if !bytes.Equal(buf[off:p.off], c.wantImage()) {
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

// TestSpaceConstants checks the sizes against the C rules of this ABI
// (image_test.go); the literals in comments are those of 64-bit ABIs.
func TestSpaceConstants(t *testing.T) {
	hl := wordSize + 8 // sizeof(struct cmsghdr): 16
	sp := func(n int) int { return hl + (n+wordSize-1)/wordSize*wordSize }
	statusLen := 12 + (u64Align-12%u64Align)%u64Align // rds_rdma_notify: 16 (12 on 386)
	traceLen := 4 + (u64Align-4)%u64Align + 24        // rds_cmsg_rx_trace: 32 (28 on 386)
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"HeaderLen", HeaderLen, hl},
		{"Alignment", Alignment, wordSize},
		{"Space(0)", Space(0), hl},
		{"Space(1)", Space(1), hl + wordSize},
		{"Space(8)", Space(8), hl + 8},
		{"rdmaStatusLen", rdmaStatusLen, statusLen},
		{"rxPathLatencyLen", rxPathLatencyLen, traceLen},
		{"RDMAArgsSpace", RDMAArgsSpace, sp(56)},                                     // 72
		{"RDMADestSpace", RDMADestSpace, sp(8)},                                      // 24
		{"RDMAMapSpace", RDMAMapSpace, sp(32)},                                       // 48
		{"RDMAStatusSpace", RDMAStatusSpace, sp(statusLen)},                          // 32
		{"CongUpdateSpace", CongUpdateSpace, sp(8)},                                  // 24
		{"AtomicSpace", AtomicSpace, sp(72)},                                         // 88
		{"RxPathLatencySpace", RxPathLatencySpace, sp(traceLen)},                     // 48
		{"ZeroCopyCookieSpace", ZeroCopyCookieSpace, sp(4)},                          // 24
		{"ZeroCopyCompletionSpace", ZeroCopyCompletionSpace, sp(36)},                 // 56
		{"TimevalSpace", TimevalSpace, sp(16)},                                       // 32
		{"MaxReceiveSpace", MaxReceiveSpace, sp(8) + sp(16) + sp(traceLen) + sp(36)}, // 160
		{"Space(rdmaArgsLen)", Space(rdmaArgsLen), RDMAArgsSpace},
		{"Space(zeroCopyCompletionLen)", Space(zeroCopyCompletionLen), ZeroCopyCompletionSpace},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if wordSize == 8 && u64Align == 8 {
		// 64-bit ABIs: the numbers written out.
		if RDMAArgsSpace != 72 || RDMAStatusSpace != 32 || RxPathLatencySpace != 48 || MaxReceiveSpace != 160 {
			t.Errorf("64-bit spaces %d %d %d %d, want 72 32 48 160", RDMAArgsSpace, RDMAStatusSpace, RxPathLatencySpace, MaxReceiveSpace)
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
		{NotifyStatus(-22).String(), "status(-22)"},
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
	if got := tv.Time().UnixNano(); got != 1700000000000250000 {
		t.Errorf("Timeval.Time = %d ns", got)
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
	want := append(image(solRDS, 99, u8(1), u8(2), u8(3)), // padded to a word
		hdr(uint64(wordSize+8), 7, 8)...) // no data
	if !bytes.Equal(got, want) {
		t.Errorf("got  %x\nwant %x", got, want)
	}
}

// TestBuilderReusesDirtyBuffer checks that padding and unused fields are
// zeroed when the buffer's spare capacity holds old bytes.
func TestBuilderReusesDirtyBuffer(t *testing.T) {
	dirty := make([]byte, 256)
	for _, c := range codecCases {
		for i := range dirty {
			dirty[i] = 0xaa // again for each case: the last one wrote zeros
		}
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
	if len(got) != 1+CongUpdateSpace || got[0] != 0xee || !bytes.Equal(got[1:], image(solRDS, 5, u64(1))) {
		t.Errorf("got %x", got)
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
			if _, err2 := b.Finish(); err2 != err {
				t.Errorf("second Finish error = %v, want %v", err2, err)
			}
			if len(buf) != CongUpdateSpace {
				t.Errorf("buffer has %d bytes after the error, want %d", len(buf), CongUpdateSpace)
			}
			b.Reset(buf[:0])
			if _, err := b.Finish(); err != nil {
				t.Errorf("Reset kept the error")
			}
		})
	}
}

// TestOldTimestampRange checks that SCM_TIMESTAMP, whose fields are C
// longs, refuses values a 32-bit long cannot hold, and that
// SO_TIMESTAMP_NEW and 64-bit ABIs take them.
func TestOldTimestampRange(t *testing.T) {
	const big = 1 << 40
	for _, c := range []struct {
		name  string
		build func(*Builder)
		old   bool
	}{
		{"Timestamp", func(b *Builder) { b.Timestamp(Timeval{Sec: big}) }, true},
		{"Timestamp negative", func(b *Builder) { b.Timestamp(Timeval{Usec: -big}) }, true},
		{"TimestampNew", func(b *Builder) { b.TimestampNew(Timeval{Sec: big}) }, false},
		{"TimestampNew negative", func(b *Builder) { b.TimestampNew(Timeval{Usec: -big}) }, false},
	} {
		var b Builder
		b.CongUpdate(1)
		c.build(&b)
		buf, err := b.Finish()
		if c.old && wordSize == 4 {
			if !errors.Is(err, ErrInvalid) || len(buf) != CongUpdateSpace {
				t.Errorf("%s: %d bytes, error %v; want ErrInvalid and the first message only", c.name, len(buf), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
