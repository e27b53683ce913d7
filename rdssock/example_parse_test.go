package rdssock_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

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

// The names of the kernel's information tables, as rdscat info takes
// them.
func ExampleInfoTables() {
	var names []string
	for _, t := range rdssock.InfoTables() {
		names = append(names, t.String())
	}
	fmt.Println(strings.Join(names, " "))
	t, err := rdssock.ParseInfoTable("connections6")
	fmt.Println(t == rdssock.Info6Connections, err)
	// Output:
	// counters connections send-messages retrans-messages recv-messages sockets tcp-sockets ib-connections connection-stats iwarp-connections connections6 send-messages6 retrans-messages6 recv-messages6 sockets6 tcp-sockets6 ib-connections6
	// true <nil>
}

// Decode RDS_INFO_COUNTERS rows (a 32-byte name and a 64-bit value in the
// host's byte order, here built by hand as the kernel would return them),
// and tell malformed data by ErrInfoFormat.
func ExampleParseCounters() {
	row := make([]byte, 40)
	copy(row, "conn_reset")
	binary.NativeEndian.PutUint64(row[32:], 3)
	counters, err := rdssock.ParseCounters(row, len(row))
	fmt.Println(counters, err)

	_, err = rdssock.ParseCounters(append(row, 0), len(row))
	fmt.Println(errors.Is(err, rdssock.ErrInfoFormat))
	// Output:
	// [{conn_reset 3}] <nil>
	// true
}
