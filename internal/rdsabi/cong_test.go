// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

package rdsabi

import (
	"fmt"
	"testing"
)

func TestCongMonitor(t *testing.T) {
	for _, c := range []struct {
		port uint16
		bit  uint
		mask uint64
	}{
		{0, 0, 1},
		{1, 1, 2},
		{63, 63, 1 << 63},
		{64, 0, 1},
		{4000, 32, 1 << 32}, // 4000 = 62*64 + 32
		{65535, 63, 1 << 63},
	} {
		if got := CongMonitorBit(c.port); got != c.bit {
			t.Errorf("CongMonitorBit(%d) = %d, want %d", c.port, got, c.bit)
		}
		if got := CongMonitorMask(c.port); got != c.mask {
			t.Errorf("CongMonitorMask(%d) = %#x, want %#x", c.port, got, c.mask)
		}
	}
}

func ExampleCongMonitorMask() {
	// Watch ports 4000 and 4001 for congestion updates.
	mask := CongMonitorMask(4000) | CongMonitorMask(4001)
	fmt.Printf("%#x\n", mask)
	// Output: 0x300000000
}

func ExampleCongMonitorBit() {
	fmt.Println(CongMonitorBit(18634))
	// Output: 10
}
