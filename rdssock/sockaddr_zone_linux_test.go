//go:build linux

package rdssock

import (
	"net/netip"
	"testing"
)

// The round trip keeps zones: the scope id goes out as the interface's
// index and comes back as its name, or as the number for sockets in other
// namespaces. Index 1 is the loopback device in every network namespace.
func TestSockaddrRoundTripZone(t *testing.T) {
	for _, tc := range []struct {
		in            string
		named, number string
	}{
		{"[fe80::1%lo]:7", "[fe80::1%lo]:7", "[fe80::1%1]:7"},
		{"[fe80::1%1]:7", "[fe80::1%lo]:7", "[fe80::1%1]:7"},
		{"[fe80::2]:9", "[fe80::2]:9", "[fe80::2]:9"},
		{"[fd00::1]:18634", "[fd00::1]:18634", "[fd00::1]:18634"},
		{"10.1.2.3:4000", "10.1.2.3:4000", "10.1.2.3:4000"},
	} {
		var sa sockaddrBuf
		n, err := sa.put(netip.MustParseAddrPort(tc.in))
		if err != nil {
			t.Fatalf("put(%v): %v", tc.in, err)
		}
		if got, want := sa.getZone(n, false), netip.MustParseAddrPort(tc.named); got != want {
			t.Errorf("%v -> %v, want %v", tc.in, got, want)
		}
		if got, want := sa.getZone(n, true), netip.MustParseAddrPort(tc.number); got != want {
			t.Errorf("%v -> %v with numeric zones, want %v", tc.in, got, want)
		}
		sa2, err := toSockaddr(netip.MustParseAddrPort(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fromSockaddr(sa2, false), netip.MustParseAddrPort(tc.named); got != want {
			t.Errorf("toSockaddr/fromSockaddr %v -> %v, want %v", tc.in, got, want)
		}
		if got, want := fromSockaddr(sa2, true), netip.MustParseAddrPort(tc.number); got != want {
			t.Errorf("toSockaddr/fromSockaddr %v -> %v with numeric zones, want %v", tc.in, got, want)
		}
	}
}
