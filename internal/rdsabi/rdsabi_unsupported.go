// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build !(linux && (amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le))

package rdsabi

// On this platform the package provides the constants only. The struct
// types (InfoCounter, Iovec, RDMAArgs, AtomicArgs and the rest) and their
// Sizeof constants are intentionally not defined: the generated layouts
// were verified for 64-bit little-endian Linux only, and 32-bit ABIs lay
// several of them out differently (i386 aligns __u64 to 4 bytes). Code that
// uses them fails to compile here rather than pass wrong layouts to a
// kernel. To add a platform, run "go tool cgo -godefs defs_linux.go" there,
// compare with zrdsabi_linux.go, and extend the build constraints.

// LayoutsSupported reports whether this build has the kernel struct layouts.
const LayoutsSupported = false
