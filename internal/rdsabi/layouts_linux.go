// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package rdsabi

import "unsafe"

// LayoutsSupported reports whether this build has the kernel struct layouts.
const LayoutsSupported = true

// The generated files hold layouts that were correct for the C compiler
// they were generated with. These assertions fail to compile if the Go
// compiler of this build lays a struct out at another size than the C
// struct recorded next to it, as Go on a 32-bit port would if a uint64
// gap were left implicit. (Offsets are checked by layout_test.go.)
var (
	_ [unsafe.Sizeof(InfoCounter{}) - SizeofInfoCounter]struct{}
	_ [SizeofInfoCounter - unsafe.Sizeof(InfoCounter{})]struct{}
	_ [unsafe.Sizeof(InfoRDMAConnection{}) - SizeofInfoRDMAConnection]struct{}
	_ [SizeofInfoRDMAConnection - unsafe.Sizeof(InfoRDMAConnection{})]struct{}
	_ [unsafe.Sizeof(Info6RDMAConnection{}) - SizeofInfo6RDMAConnection]struct{}
	_ [SizeofInfo6RDMAConnection - unsafe.Sizeof(Info6RDMAConnection{})]struct{}
	_ [unsafe.Sizeof(CmsgRxTrace{}) - SizeofCmsgRxTrace]struct{}
	_ [SizeofCmsgRxTrace - unsafe.Sizeof(CmsgRxTrace{})]struct{}
	_ [unsafe.Sizeof(GetMRArgs{}) - SizeofGetMRArgs]struct{}
	_ [SizeofGetMRArgs - unsafe.Sizeof(GetMRArgs{})]struct{}
	_ [unsafe.Sizeof(GetMRForDestArgs{}) - SizeofGetMRForDestArgs]struct{}
	_ [SizeofGetMRForDestArgs - unsafe.Sizeof(GetMRForDestArgs{})]struct{}
	_ [unsafe.Sizeof(RDMAArgs{}) - SizeofRDMAArgs]struct{}
	_ [SizeofRDMAArgs - unsafe.Sizeof(RDMAArgs{})]struct{}
	_ [unsafe.Sizeof(AtomicArgs{}) - SizeofAtomicArgs]struct{}
	_ [SizeofAtomicArgs - unsafe.Sizeof(AtomicArgs{})]struct{}
	_ [unsafe.Sizeof(RDMANotify{}) - SizeofRDMANotify]struct{}
	_ [SizeofRDMANotify - unsafe.Sizeof(RDMANotify{})]struct{}
	_ [unsafe.Sizeof(ZcopyCookies{}) - SizeofZcopyCookies]struct{}
	_ [SizeofZcopyCookies - unsafe.Sizeof(ZcopyCookies{})]struct{}
)
