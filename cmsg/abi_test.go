// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"testing"
	"unsafe"

	"github.com/go-rds/rds/internal/rdsabi"
)

// The codec writes fields at hand-coded offsets; these tests read the
// encoded data back through the godefs-generated rdsabi structs, tying
// the two independent descriptions of the kernel layout together.

func firstData(t *testing.T, build func(*Builder)) unsafe.Pointer {
	t.Helper()
	b := NewBuilder(make([]byte, 0, 256)) // make's memory is 8-byte aligned
	build(&b)
	buf, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p := NewParser(buf)
	m, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	return unsafe.Pointer(&m.Data[0])
}

func TestABIRDMAArgs(t *testing.T) {
	a := (*rdsabi.RDMAArgs)(firstData(t, func(b *Builder) { b.RDMAArgs(testRDMAArgs) }))
	want := rdsabi.RDMAArgs{
		Cookie:       uint64(testRDMAArgs.Cookie),
		RemoteVec:    rdsabi.Iovec{Addr: testRDMAArgs.Remote.Addr, Bytes: testRDMAArgs.Remote.Bytes},
		LocalVecAddr: testRDMAArgs.LocalVecAddr,
		NrLocal:      testRDMAArgs.NumLocal,
		Flags:        uint64(testRDMAArgs.Flags),
		UserToken:    testRDMAArgs.UserToken,
	}
	if *a != want {
		t.Errorf("kernel view %+v, want %+v", *a, want)
	}
}

func TestABIMapArgs(t *testing.T) {
	a := (*rdsabi.GetMRArgs)(firstData(t, func(b *Builder) { b.RDMAMap(testMapArgs) }))
	want := rdsabi.GetMRArgs{
		Vec:        rdsabi.Iovec{Addr: testMapArgs.Vec.Addr, Bytes: testMapArgs.Vec.Bytes},
		CookieAddr: testMapArgs.CookieAddr,
		Flags:      uint64(testMapArgs.Flags),
	}
	if *a != want {
		t.Errorf("kernel view %+v, want %+v", *a, want)
	}
}

func TestABINotify(t *testing.T) {
	n := (*rdsabi.RDMANotify)(firstData(t, func(b *Builder) { b.RDMAStatus(Notify{UserToken: 77, Status: -3}) }))
	if n.UserToken != 77 || n.Status != -3 {
		t.Errorf("kernel view %+v", *n)
	}
}

func TestABIAtomic(t *testing.T) {
	in := MaskedAtomicCSWP{Cookie: 1, LocalAddr: 2, RemoteAddr: 3, Compare: 4, Swap: 5, CompareMask: 6, SwapMask: 7, Flags: 8, UserToken: 9}
	a := (*rdsabi.AtomicArgs)(firstData(t, func(b *Builder) { b.MaskedAtomicCSWP(in) }))
	want := rdsabi.AtomicArgs{Cookie: 1, LocalAddr: 2, RemoteAddr: 3, Flags: 8, UserToken: 9}
	want.Union[rdsabi.AtomicCompare] = 4
	want.Union[rdsabi.AtomicSwap] = 5
	want.Union[rdsabi.AtomicCompareMask] = 6
	want.Union[rdsabi.AtomicSwapMask] = 7
	if *a != want {
		t.Errorf("kernel view %+v, want %+v", *a, want)
	}

	f := (*rdsabi.AtomicArgs)(firstData(t, func(b *Builder) {
		b.MaskedAtomicFADD(MaskedAtomicFADD{Cookie: 1, Add: 10, NocarryMask: 11})
	}))
	if f.Union[rdsabi.AtomicAdd] != 10 || f.Union[rdsabi.AtomicNocarryMask] != 11 {
		t.Errorf("kernel view of m_fadd %+v", *f)
	}
}

func TestABIRxTrace(t *testing.T) {
	r := (*rdsabi.CmsgRxTrace)(firstData(t, func(b *Builder) { b.RxPathLatency(testRxTrace) }))
	want := rdsabi.CmsgRxTrace{RxTraces: 2, RxTracePos: [3]uint8{2, 0, 0}, RxTrace: [3]uint64{1000, 1000000, 0}}
	if *r != want {
		t.Errorf("kernel view %+v, want %+v", *r, want)
	}
}

func TestABIZeroCopy(t *testing.T) {
	z := (*rdsabi.ZcopyCookies)(firstData(t, func(b *Builder) { b.ZeroCopyCompletion(testZcopy) }))
	want := rdsabi.ZcopyCookies{Num: 3, Cookies: [8]uint32{1, 2, 256}}
	if *z != want {
		t.Errorf("kernel view %+v, want %+v", *z, want)
	}
}
