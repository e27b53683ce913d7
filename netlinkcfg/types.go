package netlinkcfg

import "net/netip"

// VethPairConfig describes a veth pair for SetupVethPair.
type VethPairConfig struct {
	// Name and Peer are the two link names (at most 15 bytes each).
	Name, Peer string
	// Namespace holds Name; nil means the calling process's namespace.
	Namespace *Namespace
	// PeerNamespace holds Peer when non-nil. When nil and
	// PeerNamespaceName is set, a new namespace of that name is created
	// (and deleted by Close); when both are empty, Peer stays in
	// Namespace.
	PeerNamespace     *Namespace
	PeerNamespaceName string
	// Addrs and PeerAddrs are assigned to Name and Peer (IPv4 and/or
	// IPv6; IPv6 without duplicate address detection).
	Addrs, PeerAddrs []netip.Prefix
}

// VethPair is a veth pair made by SetupVethPair, with open handles on both
// sides. Close tears it down.
type VethPair struct {
	Name, Peer       string
	NS, PeerNS       *Namespace // namespaces of Name and Peer (may be the same)
	Handle           *Handle    // netlink handle in NS
	PeerHandle       *Handle    // netlink handle in PeerNS (== Handle when they share one)
	Addrs, PeerAddrs []netip.Prefix

	ownNS, ownPeerNS, deletePeerNS bool
}

// RDMALink describes an RDMA device as reported by RDMA netlink and sysfs.
type RDMALink struct {
	Name     string // device name, e.g. "rxe0"
	Index    uint32 // RDMA device index
	NodeGUID string // node GUID as reported by vishvananda/netlink (colon-separated bytes)
	Netdev   string // attached network device ("parent" in sysfs); "" when unknown
	Rxe      bool   // the device is a Soft-RoCE (rdma_rxe) device
}
