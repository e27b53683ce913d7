//go:build integration

package integration

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// TestIntegrationGetMRErrors: every way RDS_GET_MR and RDS_GET_MR_FOR_DEST
// are refused short of the FRWR refusal (TestIntegrationGetMRRefused) gives
// the errno with a text that says what to do, and leaves the region
// without users.
func TestIntegrationGetMRErrors(t *testing.T) {
	vmtest.Require(t)
	region, err := rdmaops.NewRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { region.Close() })
	span := region.Span(0, 4096)
	// An IB peer that exists, for GetMRForDest.
	peer := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), nil)

	try := func(t *testing.T, s *rdssock.Conn, want syscall.Errno, says string) {
		t.Helper()
		c := rdmaops.New(s, barrier.New(nil), nil)
		t.Cleanup(func() { c.Tracker().Close() })
		for _, forDest := range []bool{false, true} {
			var mr *rdmaops.MR
			var err error
			name := "GetMR"
			if forDest {
				name = "GetMRForDest"
				mr, err = c.GetMRForDest(peer.LocalAddrPort(), span, cmsg.FlagReadWrite)
			} else {
				mr, err = c.GetMR(span, cmsg.FlagReadWrite)
			}
			t.Logf("%s: %v", name, err)
			if mr != nil || !errors.Is(err, want) {
				t.Fatalf("%s = %v, %v; want %v", name, mr, err, want)
			}
			if !strings.Contains(err.Error(), says) {
				t.Errorf("%s error %q does not say %q", name, err, says)
			}
			if region.Users() != 0 {
				t.Fatalf("refused %s left %d users on the region", name, region.Users())
			}
		}
	}

	t.Run("unbound", func(t *testing.T) {
		s, err := rdssock.Socket(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		try(t, s, syscall.ENOTCONN, "not bound")
	})
	t.Run("tcp", func(t *testing.T) {
		s := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
		wantConnTransport(t, s, rdssock.TransportTCP)
		try(t, s, syscall.EOPNOTSUPP, "InfiniBand")
	})
	// An address of the rxe netdev from which no RDS/IB connection was
	// ever made: the kernel finds the device through such connections
	// only, and RDS_GET_MR_FOR_DEST ignores its destination
	// (net/rds/rdma.c), so both fail with ENODEV.
	t.Run("no-connection", func(t *testing.T) {
		fresh := netip.MustParseAddr("10.22.0.77")
		addAddr(t, nil, vmtest.IBLink, netip.PrefixFrom(fresh, vmtest.PrefixLen4))
		waitIBAddr(t, fresh, 10*time.Second)
		s := listen(t, netip.AddrPortFrom(fresh, port()), nil)
		wantConnTransport(t, s, rdssock.TransportIB)
		try(t, s, syscall.ENODEV, "no RDS/IB connection")
	})
}
