//go:build linux && (amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le)

package rdmaops

import "net/netip"

var netipZero netip.AddrPort
