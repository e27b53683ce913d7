// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"
)

// The byte images the codec tests expect are described field by field,
// as in <linux/rds.h> and <linux/socket.h>, and laid out here by the C
// rules of the ABI under test, restated independently of the package:
//
//   - struct cmsghdr is {size_t cmsg_len; int cmsg_level; int cmsg_type},
//     and CMSG_ALIGN rounds to sizeof(long); size_t and long are as wide
//     as a pointer on every Linux ABI Go supports;
//   - integers are in host byte order;
//   - __u64 is aligned to 8 bytes, except on i386 (4), which changes the
//     gap in rds_cmsg_rx_trace and the tail of rds_rdma_notify.
//
// TestImageHelper pins the helper itself to literal bytes.

var (
	hostOrder = binary.NativeEndian
	wordSize  = int(unsafe.Sizeof(uintptr(0))) // sizeof(size_t), sizeof(long)
	u64Align  = func() int {                   // alignof(__u64)
		if runtime.GOARCH == "386" {
			return 4
		}
		return 8
	}()
)

// A field of an image: n bytes holding v in host order, or n zero bytes
// when pad is set.
type field struct {
	n   int
	v   uint64
	pad bool
}

func u8(v uint8) field   { return field{n: 1, v: uint64(v)} }
func u32(v uint32) field { return field{n: 4, v: uint64(v)} }
func s32(v int32) field  { return field{n: 4, v: uint64(uint32(v))} }
func u64(v uint64) field { return field{n: 8, v: v} }
func i64(v int64) field  { return field{n: 8, v: uint64(v)} }
func pad(n int) field    { return field{n: n, pad: true} }

// clong is a C long (the fields of the _OLD timestamp forms).
func clong(v int64) field { return field{n: wordSize, v: uint64(v)} }

// u64Gap is the padding C puts before a __u64 at offset off.
func u64Gap(off int) field { return pad((u64Align - off%u64Align) % u64Align) }

func putN(b []byte, n int, v uint64) {
	switch n {
	case 1:
		b[0] = byte(v)
	case 2:
		hostOrder.PutUint16(b, uint16(v))
	case 4:
		hostOrder.PutUint32(b, uint32(v))
	case 8:
		hostOrder.PutUint64(b, v)
	default:
		panic("bad field width")
	}
}

// hdr returns a cmsghdr with the given cmsg_len.
func hdr(cmsgLen uint64, level, typ int32) []byte {
	b := make([]byte, wordSize+8)
	putN(b, wordSize, cmsgLen)
	putN(b[wordSize:], 4, uint64(uint32(level)))
	putN(b[wordSize+4:], 4, uint64(uint32(typ)))
	return b
}

// data returns the bytes of fields.
func data(fs ...field) []byte {
	var b []byte
	for _, f := range fs {
		w := make([]byte, f.n)
		if !f.pad {
			putN(w, f.n, f.v)
		}
		b = append(b, w...)
	}
	return b
}

// image returns one control message: header, data, zero padding to a
// multiple of sizeof(long).
func image(level, typ int32, fs ...field) []byte {
	d := data(fs...)
	h := hdr(uint64(wordSize+8+len(d)), level, typ)
	b := append(h, d...)
	for len(b)%wordSize != 0 {
		b = append(b, 0)
	}
	return b
}

// TestImageHelper checks the image helper against bytes written out by
// hand for each family of ABIs.
func TestImageHelper(t *testing.T) {
	status := image(276, 4, u64(0x0102030405060708), s32(-5), pad(u64Align-4))
	trace := image(276, 11, u8(2), u8(2), u8(0), u8(0), u64Gap(4), u64(1000), u64(1e6), u64(0))
	var wantStatus, wantTrace []byte
	switch {
	case wordSize == 8 && hostOrder.Uint16([]byte{1, 0}) == 1: // amd64, arm64, ppc64le, ...
		wantStatus = []byte{
			0x20, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x01, 0, 0, 0x04, 0, 0, 0,
			0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xfb, 0xff, 0xff, 0xff, 0, 0, 0, 0,
		}
		wantTrace = []byte{
			0x30, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x01, 0, 0, 0x0b, 0, 0, 0,
			2, 2, 0, 0, 0, 0, 0, 0,
			0xe8, 0x03, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		}
	case wordSize == 8: // s390x, ppc64, mips64
		wantStatus = []byte{
			0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0x01, 0x14, 0, 0, 0, 0x04,
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 0,
		}
		wantTrace = []byte{
			0, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 0x01, 0x14, 0, 0, 0, 0x0b,
			2, 2, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0, 0, 0, 0, 0,
		}
	case runtime.GOARCH == "386":
		wantStatus = []byte{
			0x18, 0, 0, 0, 0x14, 0x01, 0, 0, 0x04, 0, 0, 0,
			0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xfb, 0xff, 0xff, 0xff,
		}
		wantTrace = []byte{
			0x28, 0, 0, 0, 0x14, 0x01, 0, 0, 0x0b, 0, 0, 0,
			2, 2, 0, 0,
			0xe8, 0x03, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		}
	case hostOrder.Uint16([]byte{1, 0}) == 1: // arm, mipsle
		wantStatus = []byte{
			0x1c, 0, 0, 0, 0x14, 0x01, 0, 0, 0x04, 0, 0, 0,
			0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xfb, 0xff, 0xff, 0xff, 0, 0, 0, 0,
		}
		wantTrace = []byte{
			0x2c, 0, 0, 0, 0x14, 0x01, 0, 0, 0x0b, 0, 0, 0,
			2, 2, 0, 0, 0, 0, 0, 0,
			0xe8, 0x03, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		}
	default: // mips
		wantStatus = []byte{
			0, 0, 0, 0x1c, 0, 0, 0x01, 0x14, 0, 0, 0, 0x04,
			0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 0,
		}
		wantTrace = []byte{
			0, 0, 0, 0x2c, 0, 0, 0x01, 0x14, 0, 0, 0, 0x0b,
			2, 2, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0, 0, 0, 0, 0,
		}
	}
	if !bytes.Equal(status, wantStatus) {
		t.Errorf("RDMA_STATUS image on %s:\n got %x\nwant %x", runtime.GOARCH, status, wantStatus)
	}
	if !bytes.Equal(trace, wantTrace) {
		t.Errorf("RXPATH_LATENCY image on %s:\n got %x\nwant %x", runtime.GOARCH, trace, wantTrace)
	}
}

// cmsgLen reads the cmsg_len of the message at the start of b.
func cmsgLen(b []byte) uint64 {
	if wordSize == 8 {
		return hostOrder.Uint64(b)
	}
	return uint64(hostOrder.Uint32(b))
}
