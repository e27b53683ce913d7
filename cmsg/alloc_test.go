// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"io"
	"testing"
)

// buildEvery appends one message of every type.
func buildEvery(b *Builder) {
	b.RDMAArgs(testRDMAArgs)
	b.RDMADest(0x1122)
	b.RDMAMap(testMapArgs)
	b.RDMAStatus(Notify{UserToken: 1, Status: StatusRemoteError})
	b.CongUpdate(0xff)
	b.AtomicFADD(AtomicFADD{Cookie: 1, Add: 2})
	b.AtomicCSWP(AtomicCSWP{Cookie: 1, Compare: 2, Swap: 3})
	b.MaskedAtomicFADD(MaskedAtomicFADD{Cookie: 1, Add: 2, NocarryMask: 3})
	b.MaskedAtomicCSWP(MaskedAtomicCSWP{Cookie: 1, Compare: 2, Swap: 3, CompareMask: 4, SwapMask: 5})
	b.RxPathLatency(testRxTrace)
	b.ZeroCopyCookie(7)
	b.ZeroCopyCompletion(testZcopy)
	b.Timestamp(Timeval{Sec: 1, Usec: 2})
	b.TimestampNew(Timeval{Sec: 1, Usec: 2})
	b.Append(LevelRDS, 100, []byte{1, 2, 3})
}

// parseEvery decodes every message in buf with its typed decoder and
// returns the number decoded, or -1 on any error.
func parseEvery(buf []byte) int {
	p := NewParser(buf)
	n := 0
	for {
		m, err := p.Next()
		if err != nil {
			if err == io.EOF {
				return n
			}
			return -1
		}
		if m.Level == LevelSocket {
			_, err = m.Timestamp()
		} else {
			switch m.Type {
			case TypeRDMAArgs:
				_, err = m.RDMAArgs()
			case TypeRDMADest:
				_, err = m.RDMADest()
			case TypeRDMAMap:
				_, err = m.RDMAMap()
			case TypeRDMAStatus:
				_, err = m.RDMAStatus()
			case TypeCongUpdate:
				_, err = m.CongUpdate()
			case TypeAtomicFADD:
				_, err = m.AtomicFADD()
			case TypeAtomicCSWP:
				_, err = m.AtomicCSWP()
			case TypeMaskedAtomicFADD:
				_, err = m.MaskedAtomicFADD()
			case TypeMaskedAtomicCSWP:
				_, err = m.MaskedAtomicCSWP()
			case TypeRxPathLatency:
				_, err = m.RxPathLatency()
			case TypeZeroCopyCookie:
				_, err = m.ZeroCopyCookie()
			case TypeZeroCopyCompletion:
				_, err = m.ZeroCopyCompletion()
			}
		}
		if err != nil {
			return -1
		}
		n++
	}
}

const everyCount = 15 // messages appended by buildEvery

func TestAllocBuild(t *testing.T) {
	buf := make([]byte, 0, 2048)
	var b Builder
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset(buf[:0])
		buildEvery(&b)
		if _, err := b.Finish(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("building every message allocated %v times per run, want 0", allocs)
	}
}

func TestAllocParse(t *testing.T) {
	b := NewBuilder(make([]byte, 0, 2048))
	buildEvery(&b)
	buf, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if n := parseEvery(buf); n != everyCount {
		t.Fatalf("parsed %d messages, want %d", n, everyCount)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if parseEvery(buf) != everyCount {
			t.Fatal("parse failed")
		}
	})
	if allocs > 0 {
		t.Errorf("parsing every message allocated %v times per run, want 0", allocs)
	}
}

func TestAllocBuildGrows(t *testing.T) {
	// Without capacity the builder grows the buffer: documented, and
	// checked here so the zero-allocation tests above mean something.
	allocs := testing.AllocsPerRun(10, func() {
		var b Builder
		b.CongUpdate(1)
	})
	if allocs == 0 {
		t.Errorf("building into a nil buffer did not allocate")
	}
}

func BenchmarkBuild(b *testing.B) {
	buf := make([]byte, 0, 2048)
	var bl Builder
	b.ReportAllocs()
	for b.Loop() {
		bl.Reset(buf[:0])
		buildEvery(&bl)
	}
}

func BenchmarkBuildRDMAArgs(b *testing.B) {
	buf := make([]byte, 0, RDMAArgsSpace)
	var bl Builder
	b.ReportAllocs()
	for b.Loop() {
		bl.Reset(buf[:0])
		bl.RDMAArgs(testRDMAArgs)
	}
}

func BenchmarkParse(b *testing.B) {
	bl := NewBuilder(make([]byte, 0, 2048))
	buildEvery(&bl)
	buf, _ := bl.Finish()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if parseEvery(buf) != everyCount {
			b.Fatal("parse failed")
		}
	}
}

func BenchmarkParseRDMAStatus(b *testing.B) {
	// A notice batch as the kernel returns it into a MaxReceiveSpace buffer.
	bl := NewBuilder(make([]byte, 0, MaxReceiveSpace))
	for i := range MaxReceiveSpace / RDMAStatusSpace {
		bl.RDMAStatus(Notify{UserToken: uint64(i)})
	}
	buf, _ := bl.Finish()
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(buf)
		for {
			m, err := p.Next()
			if err != nil {
				break
			}
			if _, err := m.RDMAStatus(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
