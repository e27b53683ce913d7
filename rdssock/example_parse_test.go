package rdssock_test

import (
	"fmt"
	"net/netip"

	"github.com/go-rds/rds/rdssock"
)

// These examples need no RDS kernel; their output is checked by go test on
// any host.

// An RDS address is a literal IP and a port; IPv6 link-local addresses
// carry a zone. RDS has no name resolution: netip.ParseAddrPort refuses a
// host name.
func ExampleAddr() {
	a := &rdssock.Addr{AddrPort: netip.MustParseAddrPort("[fe80::1%eth0]:4000")}
	fmt.Println(a.Network(), a, a.AddrPort.Addr().Zone(), a.AddrPort.Port())

	_, err := netip.ParseAddrPort("rds.example.com:4000")
	fmt.Println("host name accepted:", err == nil)
	// Output:
	// rds [fe80::1%eth0]:4000 eth0 4000
	// host name accepted: false
}

// A transport's name, the module that provides it, and the value of
// SO_RDS_TRANSPORT that requests it (auto and loopback cannot be
// requested).
func ExampleTransport() {
	for _, t := range []rdssock.Transport{rdssock.TransportAuto, rdssock.TransportTCP, rdssock.TransportIB, rdssock.TransportLoop} {
		v, ok := t.Kernel()
		fmt.Printf("%-10s module %-8s SO_RDS_TRANSPORT %d %v\n", t, t.Module(), v, ok)
	}
	// Output:
	// auto       module rds      SO_RDS_TRANSPORT 0 false
	// tcp        module rds_tcp  SO_RDS_TRANSPORT 2 true
	// infiniband module rds_rdma SO_RDS_TRANSPORT 0 true
	// loopback   module rds      SO_RDS_TRANSPORT 0 false
}
