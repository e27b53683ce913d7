package vmtest

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records what Require does with a testing.TB.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Fatal(args ...any) { f.fatal = fmt.Sprint(args...) }

func TestRequireFailsOutsideGuest(t *testing.T) {
	t.Setenv("RDSVM_GUEST", "")
	f := &fakeTB{TB: t}
	Require(f)
	if !strings.Contains(f.fatal, "rdstest") || !strings.Contains(f.fatal, "-exec") {
		t.Fatalf("Require outside the guest: Fatal(%q), want a message on how to run through rdsvm", f.fatal)
	}
	if InGuest() {
		t.Fatal("InGuest() = true with RDSVM_GUEST unset")
	}
}

func TestRequireInGuest(t *testing.T) {
	t.Setenv("RDSVM_GUEST", "1")
	f := &fakeTB{TB: t}
	Require(f)
	if f.fatal != "" {
		t.Fatalf("Require inside the guest failed: %s", f.fatal)
	}
}

func TestRoleAddrs(t *testing.T) {
	for _, tc := range []struct {
		role          string
		local, remote string
	}{
		{RoleMain, "10.33.0.1", "10.33.0.2"},
		{RolePeer, "10.33.0.2", "10.33.0.1"},
	} {
		local6, remote6 := "fd33::1", "fd33::2"
		if tc.role == RolePeer {
			local6, remote6 = remote6, local6
		}
		t.Setenv("RDSVM_ROLE", tc.role)
		if Role() != tc.role {
			t.Fatalf("Role() = %q, want %q", Role(), tc.role)
		}
		if got := LocalAddr4().String(); got != tc.local {
			t.Errorf("%s: LocalAddr4() = %s, want %s", tc.role, got, tc.local)
		}
		if got := RemoteAddr4().String(); got != tc.remote {
			t.Errorf("%s: RemoteAddr4() = %s, want %s", tc.role, got, tc.remote)
		}
		if got := LocalAddr6().String(); got != local6 {
			t.Errorf("%s: LocalAddr6() = %s, want %s", tc.role, got, local6)
		}
		if got := RemoteAddr6().String(); got != remote6 {
			t.Errorf("%s: RemoteAddr6() = %s, want %s", tc.role, got, remote6)
		}
	}
}

func TestTopologyAddresses(t *testing.T) {
	// The addresses the guest configures must be distinct and in the
	// documented subnets.
	seen := map[string]bool{}
	for _, a := range []fmt.Stringer{TCPLocal4, TCPPeer4, TCPLocal6, TCPPeer6, IBAddr1, IBAddr2, MainAddr4, PeerAddr4, MainAddr6, PeerAddr6} {
		if seen[a.String()] {
			t.Fatalf("address %s used twice", a)
		}
		seen[a.String()] = true
	}
	if !TCPLocal4.Is4() || !TCPLocal6.Is6() || TCPLocal4.As4()[1] != 11 || IBAddr1.As4()[1] != 22 || MainAddr4.As4()[1] != 33 {
		t.Fatal("topology addresses left their subnets")
	}
}

func TestKernelRelease(t *testing.T) {
	if KernelRelease() == "" {
		t.Fatal("KernelRelease() is empty")
	}
}

func TestModuleListed(t *testing.T) {
	const procModules = `rds_tcp 32768 0 - Live 0x0000000000000000
rds 217088 1 rds_tcp, Live 0x0000000000000000
rdma_rxe 172032 0 - Live 0x0000000000000000
`
	for name, want := range map[string]bool{"rds_tcp": true, "rds-tcp": true, "rds": true, "rdma_rxe": true, "rds_rdma": false, "rd": false} {
		if got := moduleListed(procModules, name); got != want {
			t.Errorf("moduleListed(%q) = %v, want %v", name, got, want)
		}
	}
}
