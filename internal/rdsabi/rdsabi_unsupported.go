// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build !linux

package rdsabi

// RDS exists only on Linux: elsewhere the package provides the constants
// only. The struct types (InfoCounter, Iovec, RDMAArgs, AtomicArgs and the
// rest) and their Sizeof constants are intentionally not defined, so code
// that would pass them to a kernel fails to compile rather than run.

// LayoutsSupported reports whether this build has the kernel struct layouts.
const LayoutsSupported = false
