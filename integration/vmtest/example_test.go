package vmtest_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	"github.com/go-rds/rds/integration/vmtest"
)

// A real-kernel test starts with Require, which fails outside the VM.
func ExampleRequire() {
	_ = func(t *testing.T) {
		vmtest.Require(t)
		t.Logf("kernel %s", vmtest.KernelRelease())
	}
}

// Run code, such as creating a socket, inside the peer namespace.
func ExampleInPeerNamespace() {
	err := vmtest.InPeerNamespace(func() error {
		// sockets made here belong to the rdspeer namespace
		return nil
	})
	fmt.Println(err)
}

// Open the peer namespace for rdssock.Config.NetNS.
func ExamplePeerNamespace() {
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	fmt.Println(ns.FD() >= 0)
}

// Two-VM tests address the other side through the role.
func ExampleRole() {
	remote := netip.AddrPortFrom(vmtest.RemoteAddr4(), 4000)
	fmt.Println(vmtest.Role(), remote)
}

func ExampleInGuest() {
	if vmtest.InGuest() {
		fmt.Println("inside the rdsvm VM, kernel", vmtest.KernelRelease())
	}
}

func ExampleModuleLoaded() {
	ok, err := vmtest.ModuleLoaded("rds_tcp")
	fmt.Println(ok, err)
}

func ExampleTwoVMs() {
	fmt.Println(vmtest.TwoVMs())
}

func ExampleLocalAddr4() {
	fmt.Println(vmtest.LocalAddr4())
}

func ExampleRemoteAddr4() {
	fmt.Println(vmtest.RemoteAddr4())
}

func ExampleKernelRelease() {
	fmt.Println(vmtest.KernelRelease() != "")
}

func ExampleLocalAddr6() {
	fmt.Println(vmtest.LocalAddr6())
}

func ExampleRemoteAddr6() {
	fmt.Println(vmtest.RemoteAddr6())
}

func ExampleKernelLog() {
	for _, l := range vmtest.KernelLog("RDS/IB") {
		fmt.Println(l)
	}
}

func ExampleDumpBlocked() {
	// A test that finds an RDS call stuck logs where the kernel waits.
	for _, l := range vmtest.DumpBlocked(40, "task:", "rds") {
		fmt.Println(l)
	}
}

func ExampleAddAddr() {
	zone, err := vmtest.AddAddr(nil, vmtest.TCPLink, netip.MustParsePrefix("fe80::11:1/64"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(netip.MustParseAddr("fe80::11:1").WithZone(strconv.Itoa(zone)))
}
