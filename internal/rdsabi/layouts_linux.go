// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux && (amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le)

package rdsabi

// LayoutsSupported reports whether this build has the kernel struct layouts.
const LayoutsSupported = true
