//go:build linux

package rdssock

import (
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"10.1.2.3:4000", "127.0.0.1:0", "[fd00::1]:18634", "[fe80::1%1]:7", "[::1]:65535"} {
		ap := netip.MustParseAddrPort(s)
		var sa sockaddrBuf
		n, err := sa.put(ap)
		if err != nil {
			t.Fatalf("put(%v): %v", ap, err)
		}
		wantLen := uint32(unix.SizeofSockaddrInet6)
		if ap.Addr().Is4() {
			wantLen = unix.SizeofSockaddrInet4
		}
		if n != wantLen {
			t.Errorf("put(%v) length %d, want %d", ap, n, wantLen)
		}
		if got := sa.get(n); got.Addr().WithZone("") != ap.Addr().WithZone("") || got.Port() != ap.Port() {
			t.Errorf("round trip %v -> %v", ap, got)
		}
	}
}

// The kernel reads the port in network byte order right after the family.
func TestSockaddrBytes(t *testing.T) {
	var sa sockaddrBuf
	n, err := sa.put(netip.MustParseAddrPort("10.0.0.2:4660"))
	if err != nil {
		t.Fatal(err)
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&sa.raw)), n)
	want := []byte{unix.AF_INET, 0, 0x12, 0x34, 10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}
	if string(raw) != string(want) {
		t.Fatalf("sockaddr_in bytes %x, want %x", raw, want)
	}
}

func TestSockaddrInvalid(t *testing.T) {
	var sa sockaddrBuf
	if _, err := sa.put(netip.AddrPort{}); err != errInvalidAddr {
		t.Errorf("put(zero) = %v, want errInvalidAddr", err)
	}
	if _, err := sa.put(netip.MustParseAddrPort("[fe80::1%no-such-if0]:1")); err == nil {
		t.Error("put with an unknown zone succeeded")
	}
	if got := sa.get(3); got.IsValid() {
		t.Errorf("get(short length) = %v, want invalid", got)
	}
}

func TestSockaddrAllocs(t *testing.T) {
	var sa sockaddrBuf
	v4 := netip.MustParseAddrPort("10.1.2.3:4000")
	v6 := netip.MustParseAddrPort("[fd00::1]:4000")
	if a := testing.AllocsPerRun(100, func() {
		n, _ := sa.put(v4)
		_ = sa.get(n)
		n, _ = sa.put(v6)
		_ = sa.get(n)
	}); a != 0 {
		t.Fatalf("sockaddr put+get allocated %v times, want 0", a)
	}
}
