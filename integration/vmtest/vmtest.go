// Package vmtest is the test-side view of the rdsvm harness: whether a test
// runs inside the harness VM, which role the VM plays, and the fixed network
// topology every VM is booted with.
//
// # Topology of a one-VM run
//
// All of these exist at once when the test starts:
//
//   - loopback: 127.0.0.1 and ::1 (RDS uses its loop transport there);
//   - RDS/TCP across namespaces: veth pair [TCPLink] (initial namespace,
//     [TCPLocal4], [TCPLocal6]) to [TCPPeerLink] in the named namespace
//     [PeerNamespaceName] ([TCPPeer4], [TCPPeer6]). No rxe device is on this
//     pair, so RDS binds there use TCP;
//   - RDS/IB over Soft-RoCE: rxe device [RxeDevice] on [IBLink], whose peer
//     [IBPeerLink] is up for carrier, with [IBAddr1] and [IBAddr2] both on
//     [IBLink]. The rxe port is ACTIVE before the test starts.
//
// # Topology of a two-VM run
//
// A package whose directory has an rdsvm.json with {"vms": 2} runs in two
// VMs joined by a virtual Ethernet segment: [TwoVMLink] carries [MainAddr4]
// and [MainAddr6] in the "main" VM, [PeerAddr4] and [PeerAddr6] in the
// "peer" VM, and [RxeDevice] sits on [TwoVMLink] in both. Both VMs run the
// same test binary; [Role] tells them apart.
//
// Tests that need the VM call [Require], which fails (never skips) outside it.
//
// # Tests of your own programs
//
// The package is public on purpose: rdsvm is a plain go test -exec wrapper
// that fetches its own kernel, so the tests of a program built on this
// module can run in the same VM with the same topology (examples/rdmawrite's
// test does). Build rdsvm static, tag the test files "integration", start
// each test with [Require] and take addresses and names from this package:
//
//	CGO_ENABLED=0 go build -o /tmp/rdsvm github.com/go-rds/rds/integration/cmd/rdsvm
//	go test -tags integration -exec /tmp/rdsvm ./yourpkg
//
// The names, addresses and roles above are what rdsvm's guest sets up, and
// part of this module's API. See TESTING.md (repository root) for rdsvm's
// settings.
package vmtest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/go-rds/rds/netlinkcfg"
)

// Roles returned by [Role].
const (
	RoleMain = "main" // the only VM of a one-VM run, or the first of two
	RolePeer = "peer" // the second VM of a two-VM run
)

// Names of links, namespaces and RDMA devices set up by the guest init.
const (
	PeerNamespaceName = "rdspeer" // named network namespace holding TCPPeerLink
	TCPLink           = "rdstcp0" // veth end in the initial namespace
	TCPPeerLink       = "rdstcp1" // veth end inside PeerNamespaceName
	IBLink            = "rdsib0"  // veth end carrying the rxe device and both IB addresses
	IBPeerLink        = "rdsib1"  // other end of IBLink, up only to give carrier
	RxeDevice         = "rxe0"    // the Soft-RoCE device (one-VM: on IBLink; two-VM: on TwoVMLink)
	TwoVMLink         = "eth0"    // virtio-net link between the two VMs
)

// Addresses of the one-VM topology.
var (
	TCPLocal4 = netip.MustParseAddr("10.11.0.1") // on TCPLink, initial namespace
	TCPPeer4  = netip.MustParseAddr("10.11.0.2") // on TCPPeerLink, PeerNamespaceName
	TCPLocal6 = netip.MustParseAddr("fd11::1")   // on TCPLink, initial namespace
	TCPPeer6  = netip.MustParseAddr("fd11::2")   // on TCPPeerLink, PeerNamespaceName
	IBAddr1   = netip.MustParseAddr("10.22.0.1") // on IBLink (rxe)
	IBAddr2   = netip.MustParseAddr("10.22.0.2") // on IBLink (rxe)
	Loopback4 = netip.MustParseAddr("127.0.0.1")
	Loopback6 = netip.IPv6Loopback()
)

// Prefix lengths of the addresses above.
const (
	PrefixLen4 = 24
	PrefixLen6 = 64
)

// Addresses of the two-VM topology.
var (
	MainAddr4 = netip.MustParseAddr("10.33.0.1") // TwoVMLink of the main VM
	PeerAddr4 = netip.MustParseAddr("10.33.0.2") // TwoVMLink of the peer VM
	MainAddr6 = netip.MustParseAddr("fd33::1")
	PeerAddr6 = netip.MustParseAddr("fd33::2")
)

// InGuest reports whether the process runs inside an rdsvm guest.
func InGuest() bool { return os.Getenv("RDSVM_GUEST") == "1" }

// Require fails the test unless it runs inside an rdsvm guest. Tests that
// need a real kernel call it first; it never skips.
func Require(t testing.TB) {
	t.Helper()
	if !InGuest() {
		t.Fatal("this test needs the rdsvm VM harness: run it with `go run ./integration/cmd/rdstest` " +
			"or `go test -tags integration -exec /path/to/rdsvm`, see TESTING.md (repository root)")
	}
}

// Role returns RoleMain or RolePeer inside the guest, and "" outside it.
func Role() string { return os.Getenv("RDSVM_ROLE") }

// TwoVMs reports whether the run has two VMs (see the package doc).
func TwoVMs() bool { return os.Getenv("RDSVM_VMS") == "2" }

// LocalAddr4 and RemoteAddr4 return this VM's and the other VM's IPv4
// address in a two-VM run.
func LocalAddr4() netip.Addr {
	if Role() == RolePeer {
		return PeerAddr4
	}
	return MainAddr4
}

// RemoteAddr4 returns the other VM's IPv4 address in a two-VM run.
func RemoteAddr4() netip.Addr {
	if Role() == RolePeer {
		return MainAddr4
	}
	return PeerAddr4
}

// LocalAddr6 returns this VM's IPv6 address in a two-VM run.
func LocalAddr6() netip.Addr {
	if Role() == RolePeer {
		return PeerAddr6
	}
	return MainAddr6
}

// RemoteAddr6 returns the other VM's IPv6 address in a two-VM run.
func RemoteAddr6() netip.Addr {
	if Role() == RolePeer {
		return MainAddr6
	}
	return PeerAddr6
}

// PeerNamespace opens the peer network namespace. Its FD works as
// rdssock.Config.NetNS; the caller closes it.
func PeerNamespace() (*netlinkcfg.Namespace, error) {
	ns, err := netlinkcfg.OpenNamespace(PeerNamespaceName)
	if err != nil {
		return nil, fmt.Errorf("open the peer namespace (is this the rdsvm guest?): %w", err)
	}
	return ns, nil
}

// InPeerNamespace runs fn on a fresh OS thread that has joined the peer
// network namespace, and returns its error. The thread is discarded
// afterwards, so the rest of the process stays in the initial namespace.
// Sockets created by fn belong to the peer namespace and may be used from
// any goroutine afterwards.
func InPeerNamespace(fn func() error) error {
	ns, err := PeerNamespace()
	if err != nil {
		return err
	}
	defer ns.Close()
	return ns.Do(fn)
}

// ModuleLoaded reports whether the kernel module name is loaded, according to
// /proc/modules.
func ModuleLoaded(name string) (bool, error) {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		return false, err
	}
	return moduleListed(string(b), name), nil
}

// moduleListed reports whether /proc/modules content lists name.
func moduleListed(procModules, name string) bool {
	name = strings.ReplaceAll(name, "-", "_")
	for _, line := range strings.Split(procModules, "\n") {
		if f, _, _ := strings.Cut(line, " "); f == name {
			return true
		}
	}
	return false
}

// AddAddr puts p on link in ns (nil: this process's namespace), accepting
// an address already there from an earlier test, and returns the link's
// interface index (the zone of a link-local address on it).
func AddAddr(ns *netlinkcfg.Namespace, link string, p netip.Prefix) (int, error) {
	if ns == nil {
		cur, err := netlinkcfg.CurrentNamespace()
		if err != nil {
			return 0, err
		}
		defer cur.Close()
		ns = cur
	}
	h, err := ns.Handle()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	if err := h.AddAddr(link, p); err != nil && !errors.Is(err, netlinkcfg.ErrExists) {
		return 0, err
	}
	return h.LinkIndex(link)
}
