//go:build linux

package rdmaops

import "net/netip"

var netipZero netip.AddrPort
