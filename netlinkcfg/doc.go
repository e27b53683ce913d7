// Package netlinkcfg sets up the network plumbing that RDS hosts and tests
// need: network namespaces, veth pairs, addresses, neighbour entries, netem
// fault injection, Soft-RoCE (rdma_rxe) devices, net.* sysctls and a check
// of the RDS kernel modules.
//
// # Namespaces and handles
//
// A Namespace is an open network namespace: the caller's own
// (CurrentNamespace) or a named one persisted at /run/netns/NAME
// (CreateNamespace, OpenNamespace), compatible with `ip netns`. Namespace.Do
// runs a function on a fresh OS thread switched into the namespace; that
// thread is discarded afterwards, so no goroutine of the program ever
// resumes in a namespace it did not expect.
//
// All netlink work goes through a Handle from Namespace.Handle, which wraps
// a github.com/vishvananda/netlink Handle whose sockets were opened inside
// that namespace. The package never uses vishvananda/netlink's package-level
// functions, whose effect depends on the calling thread's namespace.
//
// # Topologies
//
// SetupVethPair builds the usual two-host-in-one-kernel layout: a veth pair
// with one end in the current namespace and the other in a new one, with
// IPv4/IPv6 addresses and every link up. RDS/TCP works across it. SetupRxe
// adds a Soft-RoCE device on a netdev and waits for its port to become
// ACTIVE; RDS/IB works only in the initial namespace, so put rxe devices on
// netdevs there.
//
// # Sysctls and modules
//
// Sysctl/SetSysctl read and write net.* keys (dotted, or slash-separated
// when a component such as an interface name contains dots) of the calling
// thread's namespace; wrap them in Namespace.Do for another namespace.
// RDSSysctl/SetRDSSysctl do the same below net.rds. RDSModules reports
// which of rds, rds_tcp, rds_rdma, rdma_rxe, crc32_generic and veth are
// present, and ModuleStatus.Missing turns that into an error that says what
// to modprobe.
//
// # Errors
//
// Errors say what was being done, what is missing and what to do about it,
// for example "add rxe link rxe0 on veth0: rdma_rxe not loaded (modprobe
// rdma_rxe; also crc32_generic)". They match the sentinels ErrNotFound,
// ErrExists, ErrModuleNotLoaded, ErrInvalid, ErrNotActive and ErrClosed
// with errors.Is where one applies, and keep the kernel's errno reachable.
//
// # Privileges
//
// Creating namespaces and links needs CAP_SYS_ADMIN and CAP_NET_ADMIN
// (root). The parsing helpers (ParseProcModules, ParsePortState,
// Netem.Validate) need nothing.
package netlinkcfg

// BUG(rxe): rdma_rxe in Debian's 6.1 and 6.12 kernels opens its RoCEv2 UDP
// socket and routes its packets in the initial network namespace only
// (init_net in rxe_net.c). AddRxe on a netdev in another namespace still
// succeeds and the port goes ACTIVE (measured on 6.1), but keep rxe
// devices, and RDS/IB, in the initial namespace.

// BUG(rxe): RDS/IB between two rxe devices in one kernel (one per veth end)
// stayed CONNECTING when measured; RDS's own selftests add accept_local=1,
// rp_filter=0 and permanent neighbour entries (Sysctl, AddNeighbor) for
// that layout, untested here.
