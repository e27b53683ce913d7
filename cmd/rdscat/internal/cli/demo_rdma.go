//go:build linux

package cli

import (
	"net/netip"
	"regexp"
)

// rdmaDemo shows an RDMA WRITE with immediate data between the two IB
// addresses, when the topology has them.
func rdmaDemo(tr *tour, t topology) {
	if !t.ib1.IsValid() {
		return
	}
	tr.section("RDMA WRITE with immediate data over RDS/IB")
	tr.run([]string{"rdma", netip.AddrPortFrom(t.ib1, 4100).String(), netip.AddrPortFrom(t.ib2, 4100).String()},
		regexp.MustCompile(`its buffer holds the server's 4096 bytes \(verified\)`))
}
