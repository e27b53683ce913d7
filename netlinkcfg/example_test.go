package netlinkcfg_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-rds/rds/netlinkcfg"
)

// Two "hosts" in one kernel: a veth pair between the current namespace and
// a new one, with IPv4 and IPv6 addresses, ready for RDS/TCP.
func ExampleSetupVethPair() {
	p, err := netlinkcfg.SetupVethPair(netlinkcfg.VethPairConfig{
		Name:              "rds0",
		Peer:              "rds1",
		PeerNamespaceName: "rds-peer",
		Addrs:             []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("fd00::1/64")},
		PeerAddrs:         []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("fd00::2/64")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	// Work inside the peer namespace, e.g. open the peer's RDS socket
	// there (or pass p.PeerNS.FD() as rdssock.Config.NetNS).
	err = p.PeerNS.Do(func() error {
		addrs, err := p.PeerHandle.Addrs("rds1")
		fmt.Println(addrs)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Soft-RoCE for RDS/IB: an rxe device on a veth end in the initial
// namespace, with the peer up so the port gets carrier.
func ExampleSetupRxe() {
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	if err := h.AddVethPair("ib0", "ib1", nil); err != nil {
		log.Fatal(err)
	}
	defer h.DeleteLink("ib0")
	for _, l := range []string{"ib0", "ib1"} {
		if err := h.SetUp(l); err != nil {
			log.Fatal(err)
		}
	}
	if err := h.AddAddr("ib0", netip.MustParsePrefix("10.1.0.1/24")); err != nil {
		log.Fatal(err)
	}
	if err := netlinkcfg.SetupRxe(h, "rxe0", "ib0", 10*time.Second); err != nil {
		log.Fatal(err) // e.g. "add rxe link rxe0 on ib0: rdma_rxe not loaded (modprobe rdma_rxe; also crc32_generic)"
	}
	defer h.DeleteRxe("rxe0")
}

func ExampleCurrentNamespace() {
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	fmt.Println(ns) // "current"
}

func ExampleCreateNamespace() {
	ns, err := netlinkcfg.CreateNamespace("rds-test")
	if err != nil {
		log.Fatal(err)
	}
	// Visible to `ip netns exec rds-test ...` until deleted.
	defer ns.Delete()

	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	if err := h.SetUp("lo"); err != nil {
		log.Fatal(err)
	}
}

func ExampleOpenNamespace() {
	ns, err := netlinkcfg.OpenNamespace("rds-test") // made by `ip netns add rds-test`
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	fmt.Println(ns.Name(), ns.FD() >= 0)
}

func ExampleNamespace_Do() {
	ns, err := netlinkcfg.OpenNamespace("rds-peer")
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	// Sysctls are per namespace: set the peer's, not ours.
	err = ns.Do(func() error {
		return netlinkcfg.SetSysctl("net.ipv4.conf.all.rp_filter", "0")
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleHandle_AddVethPair() {
	cur, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer cur.Close()
	peer, err := netlinkcfg.CreateNamespace("rds-peer")
	if err != nil {
		log.Fatal(err)
	}
	defer peer.Delete()
	h, err := cur.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	// veth-a stays here, veth-b is created directly in rds-peer.
	if err := h.AddVethPair("veth-a", "veth-b", peer); err != nil {
		log.Fatal(err)
	}
}

func ExampleHandle_AddAddr() {
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	// IPv6 addresses are added with IFA_F_NODAD: bind works at once.
	for _, p := range []string{"10.0.0.1/24", "fd00::1/64"} {
		if err := h.AddAddr("veth-a", netip.MustParsePrefix(p)); err != nil {
			log.Fatal(err)
		}
	}
}

func ExampleHandle_AddNeighbor() {
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	mac, err := h.HardwareAddr("veth-b")
	if err != nil {
		log.Fatal(err)
	}
	if err := h.AddNeighbor("veth-a", netip.MustParseAddr("10.0.0.2"), mac); err != nil {
		log.Fatal(err)
	}
}

func ExampleHandle_SetNetem() {
	ns, err := netlinkcfg.OpenNamespace("rds-peer")
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	err = h.SetNetem("veth-b", netlinkcfg.Netem{Loss: 5, Duplicate: 1, Delay: 2 * time.Millisecond, Reorder: 10})
	if err != nil {
		log.Fatal(err)
	}
	defer h.ClearQdisc("veth-b")
}

func ExampleHandle_WaitPortActive() {
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.WaitPortActive(ctx, "rxe0", 1); err != nil {
		log.Fatal(err)
	}
	links, err := h.RxeLinks()
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range links {
		fmt.Println(l.Name, l.Netdev, l.NodeGUID)
	}
}

func ExampleRDSModules() {
	st, err := netlinkcfg.RDSModules()
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Missing(netlinkcfg.TransportTCP); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

func ExampleModuleStatus_Missing() {
	st := netlinkcfg.ModuleStatus{RDS: true, RDSRDMA: true}
	fmt.Println(st.Missing(netlinkcfg.TransportRxe))
	fmt.Println(st.Missing(netlinkcfg.TransportIB))
	// Output:
	// RDS transport rxe needs rdma_rxe, crc32_generic, which are not loaded (modprobe -a rdma_rxe crc32_generic)
	// <nil>
}

func ExampleParseProcModules() {
	mods, err := netlinkcfg.ParseProcModules(strings.NewReader(
		"rds_tcp 36864 0 - Live 0x0000000000000000\n" +
			"rds 212992 1 rds_tcp, Live 0x0000000000000000\n"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mods["rds"], mods["rds_tcp"], mods["rds_rdma"])
	// Output: true true false
}

func ExampleParsePortState() {
	st, err := netlinkcfg.ParsePortState("4: ACTIVE\n")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st, st == netlinkcfg.PortActive)
	// Output: ACTIVE true
}

func ExampleNetem_Validate() {
	fmt.Println(netlinkcfg.Netem{Loss: 120, Reorder: 25}.Validate())
	// Output: netem: loss must be a percentage in [0, 100], got 120; reorder needs a delay > 0 (netem reorders by sending some packets without the delay)
}

func ExampleSetRDSSysctl() {
	// The kernel answers RDS pings only while ping_enable allows it.
	if err := netlinkcfg.SetRDSSysctl("ping_enable", "1"); err != nil {
		log.Fatal(err) // e.g. "... rds is not loaded in this kernel (modprobe rds)"
	}
	v, err := netlinkcfg.RDSSysctl("tcp.rds_tcp_rcvbuf")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
}

func ExampleSysctl() {
	// Settings RDS over two rxe devices in one namespace needs.
	for _, kv := range [][2]string{
		{"net.ipv4.conf.all.accept_local", "1"},
		{"net.ipv4.conf.all.rp_filter", "0"},
	} {
		if err := netlinkcfg.SetSysctl(kv[0], kv[1]); err != nil {
			log.Fatal(err)
		}
	}
	v, err := netlinkcfg.Sysctl("net.ipv4.conf.all.rp_filter")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
}

func ExampleLoadedModules() {
	mods, err := netlinkcfg.LoadedModules()
	if err != nil {
		log.Fatal(err) // ErrNotFound on kernels without module support
	}
	fmt.Println(mods["rds"])
}
