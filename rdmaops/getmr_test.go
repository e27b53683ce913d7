//go:build linux

package rdmaops

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"unsafe"

	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

func TestPutSockaddr(t *testing.T) {
	var b [128]uint8
	if err := putSockaddr(&b, netip.MustParseAddrPort("10.22.0.2:4000")); err != nil {
		t.Fatal(err)
	}
	in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b))
	if in4.Family != unix.AF_INET || in4.Addr != [4]byte{10, 22, 0, 2} || b[2] != 0x0f || b[3] != 0xa0 {
		t.Fatalf("sockaddr_in % x", b[:16])
	}
	if err := putSockaddr(&b, netip.MustParseAddrPort("[::ffff:10.22.0.2]:4000")); err != nil || in4.Family != unix.AF_INET {
		t.Fatalf("v4-mapped: %v, family %d", err, in4.Family)
	}
	if err := putSockaddr(&b, netip.MustParseAddrPort("[fd11::2%7]:1")); err != nil {
		t.Fatal(err)
	}
	in6 := (*unix.RawSockaddrInet6)(unsafe.Pointer(&b))
	if in6.Family != unix.AF_INET6 || in6.Addr != netip.MustParseAddr("fd11::2").As16() || in6.Scope_id != 7 || b[3] != 1 {
		t.Fatalf("sockaddr_in6 % x", b[:28])
	}
	for _, bad := range []netip.AddrPort{{}, netip.MustParseAddrPort("[fe80::1%no-such-interface-x]:1")} {
		if err := putSockaddr(&b, bad); err == nil {
			t.Errorf("putSockaddr(%v) succeeded", bad)
		}
	}
}

// A refused registration matches the errno and, for EOPNOTSUPP, rdssock's
// sentinel, and says what to do.
func TestOptErrno(t *testing.T) {
	err := error(optErrno{errno: unix.EOPNOTSUPP})
	if !errors.Is(err, syscall.EOPNOTSUPP) || !errors.Is(err, rdssock.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("%v does not match EOPNOTSUPP and ErrNotSupported", err)
	}
	if err := error(optErrno{errno: unix.ENODEV}); !errors.Is(err, syscall.ENODEV) || errors.Is(err, rdssock.ErrNotSupported) || len(err.Error()) < 40 {
		t.Fatalf("ENODEV: %v", err)
	}
}
