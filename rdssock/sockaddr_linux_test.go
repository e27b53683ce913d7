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

// inet4, the receive path's call-free decoder, agrees with getZone on a
// sockaddr_in and leaves everything else to it.
func TestSockaddrInet4(t *testing.T) {
	for _, s := range []string{"10.1.2.3:4000", "127.0.0.1:0", "255.255.255.255:65535", "[fd00::1]:18634", "[fe80::1%1]:7"} {
		ap := netip.MustParseAddrPort(s)
		var sa sockaddrBuf
		n, err := sa.put(ap)
		if err != nil {
			t.Fatalf("put(%v): %v", ap, err)
		}
		got, ok := sa.inet4(n)
		if ok != ap.Addr().Is4() {
			t.Errorf("inet4 of %v: ok %v", ap, ok)
		}
		if ok && got != ap {
			t.Errorf("inet4 of %v = %v", ap, got)
		}
		if ok {
			if _, short := sa.inet4(n - 1); short {
				t.Errorf("inet4 of %v accepted a short length", ap)
			}
		}
	}
}

// A send op encodes its destination once while it stays the same; a new
// destination, a zoned one and a receive (which overwrites sa) are encoded
// again.
func TestMsgOpDestCache(t *testing.T) {
	op := newMsgOp()
	a, b := netip.MustParseAddrPort("10.0.0.1:4000"), netip.MustParseAddrPort("[fd00::2]:4001")
	check := func(to netip.AddrPort) {
		t.Helper()
		if !op.sameDest(to) {
			if err := op.setDest(to); err != nil {
				t.Fatalf("setDest(%v): %v", to, err)
			}
		}
		if op.hdr.Name != (*byte)(unsafe.Pointer(&op.sa.raw)) {
			t.Errorf("header does not point at sa for %v", to)
		}
		if got := op.sa.get(op.hdr.Namelen); got != to {
			t.Errorf("destination %v encoded as %v", to, got)
		}
	}
	check(a)
	if !op.sameDest(a) {
		t.Errorf("a second send to %v encodes it again", a)
	}
	check(b)
	check(a)
	zoned := netip.MustParseAddrPort("[fe80::1%1]:7")
	if err := op.setDest(zoned); err != nil {
		t.Fatal(err)
	}
	if op.sameDest(zoned) {
		t.Errorf("a zoned destination is reused without looking its zone up")
	}
	check(a)
	// What readMsg does before a receive.
	op.saTo = netip.AddrPort{}
	op.sa.raw = unix.RawSockaddrInet6{}
	check(a)
}
