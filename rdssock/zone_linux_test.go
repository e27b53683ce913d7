//go:build linux

package rdssock

import (
	"net/netip"
	"testing"
)

// A socket in another network namespace reports sender zones by index:
// the index names an interface there, not here.
func TestGetZoneNumeric(t *testing.T) {
	var sa sockaddrBuf
	n, err := sa.put(netip.MustParseAddrPort("[fe80::1%1]:7"))
	if err != nil {
		t.Fatal(err)
	}
	sa.raw.Scope_id = 4242 // no such interface here
	if got, want := sa.getZone(n, true), netip.MustParseAddrPort("[fe80::1%4242]:7"); got != want {
		t.Errorf("numeric zone: %v, want %v", got, want)
	}
	sa.raw.Scope_id = 1 // lo
	if got, want := sa.getZone(n, true), netip.MustParseAddrPort("[fe80::1%1]:7"); got != want {
		t.Errorf("numeric zone of index 1: %v, want %v", got, want)
	}
	if got := sa.getZone(n, false); got.Addr().Zone() != "lo" {
		t.Errorf("named zone of index 1: %v, want zone lo", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = sa.getZone(n, true) }); allocs != 0 {
		t.Errorf("getZone allocates %v times per call", allocs)
	}
}
