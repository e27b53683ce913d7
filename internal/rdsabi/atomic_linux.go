// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package rdsabi

// AtomicArgs is struct rds_atomic_args, the data of the CmsgAtomicFADD,
// CmsgAtomicCSWP, CmsgMaskedAtomicFADD and CmsgMaskedAtomicCSWP control
// messages (72 bytes). It is written by hand because godefs cannot name the
// header's anonymous union; tests check its size and offsets.
//
// LocalAddr is the user-space address of the 8 bytes that receive the
// remote word's previous value; keep that memory alive across sendmsg and
// until the RDMA status arrives. RemoteAddr is an offset into the region
// named by Cookie.
type AtomicArgs struct {
	Cookie     uint64
	LocalAddr  uint64
	RemoteAddr uint64
	// Union holds the anonymous union, whose meaning depends on the
	// control message type:
	//
	//	type                  Union[0]  Union[1]      Union[2]      Union[3]
	//	CmsgAtomicCSWP        compare   swap          -             -
	//	CmsgAtomicFADD        add       -             -             -
	//	CmsgMaskedAtomicCSWP  compare   swap          compare_mask  swap_mask
	//	CmsgMaskedAtomicFADD  add       nocarry_mask  -             -
	//
	// Unused words should be zero.
	Union     [4]uint64
	Flags     uint64
	UserToken uint64
}

// Indexes into AtomicArgs.Union.
const (
	AtomicCompare     = 0 // cswp.compare, m_cswp.compare
	AtomicSwap        = 1 // cswp.swap, m_cswp.swap
	AtomicCompareMask = 2 // m_cswp.compare_mask
	AtomicSwapMask    = 3 // m_cswp.swap_mask
	AtomicAdd         = 0 // fadd.add, m_fadd.add
	AtomicNocarryMask = 1 // m_fadd.nocarry_mask
)
