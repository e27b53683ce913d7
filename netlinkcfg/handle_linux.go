package netlinkcfg

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Handle performs netlink operations in one network namespace. It owns a
// github.com/vishvananda/netlink Handle whose sockets were opened inside
// that namespace, so its calls never depend on the calling thread's
// namespace; the package-level functions of vishvananda/netlink are never
// used. A Handle is safe for concurrent use; Close it when done.
type Handle struct {
	ns     *Namespace      // the namespace given to Namespace.Handle, for naming
	own    *Namespace      // a private copy of ns (duplicated descriptor) for opening more sockets
	route  *netlink.Handle // NETLINK_ROUTE
	closed atomic.Bool

	rdmaMu sync.Mutex
	rdma   *netlink.Handle // NETLINK_RDMA, opened on first use

	procRoot string // "/proc"; overridden by tests
	sysRoot  string // "/sys"; overridden by tests
}

// Handle opens a netlink handle whose sockets live in ns. The handle keeps
// its own reference to the namespace, so it stays usable after ns is
// closed.
func (ns *Namespace) Handle() (*Handle, error) {
	own, err := ns.dup()
	if err != nil {
		return nil, err
	}
	nh, err := own.newNetlinkHandle(unix.NETLINK_ROUTE)
	if err != nil {
		own.Close()
		return nil, newError([]error{err}, "open rtnetlink socket in network namespace %s: %v", ns, err)
	}
	return &Handle{ns: ns, own: own, route: nh, procRoot: "/proc", sysRoot: "/sys"}, nil
}

// newNetlinkHandle opens a netlink.Handle for one family with its socket
// created inside ns (by Do), so vishvananda/netlink never switches the
// namespace of a thread that returns to the scheduler.
func (ns *Namespace) newNetlinkHandle(family int) (*netlink.Handle, error) {
	var nh *netlink.Handle
	err := ns.Do(func() error {
		var err error
		// netns.None(): the socket is made in this thread's namespace,
		// which Do has already set to ns.
		nh, err = netlink.NewHandleAt(netns.None(), family)
		return err
	})
	return nh, err
}

// Namespace returns the namespace the handle operates in.
func (h *Handle) Namespace() *Namespace { return h.ns }

// Close releases the handle's netlink sockets and its reference to the
// namespace (the Namespace itself stays open). Methods called after Close
// fail with ErrClosed.
func (h *Handle) Close() {
	if h.closed.Swap(true) {
		return
	}
	h.route.Close()
	h.rdmaMu.Lock()
	if h.rdma != nil {
		h.rdma.Close()
		h.rdma = nil
	}
	h.rdmaMu.Unlock()
	h.own.Close()
}

// errIfClosed guards every operation: a closed vishvananda/netlink Handle
// would silently fall back to sockets in the calling thread's namespace.
func (h *Handle) errIfClosed() error {
	if h.closed.Load() {
		return newError([]error{ErrClosed}, "netlink handle for network namespace %s is closed", h.ns)
	}
	return nil
}

// link looks a link up by name in the handle's namespace.
func (h *Handle) link(name string) (netlink.Link, error) {
	if err := h.errIfClosed(); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, invalidf("link name is empty")
	}
	l, err := h.route.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, newError([]error{ErrNotFound, unix.ENODEV}, "link %s not found in network namespace %s", name, h.ns)
		}
		return nil, newError([]error{err}, "look up link %s in network namespace %s: %v", name, h.ns, err)
	}
	return l, nil
}

// LinkIndex returns the interface index of the named link.
func (h *Handle) LinkIndex(name string) (int, error) {
	l, err := h.link(name)
	if err != nil {
		return 0, err
	}
	return l.Attrs().Index, nil
}

// HardwareAddr returns the MAC address of the named link.
func (h *Handle) HardwareAddr(name string) (net.HardwareAddr, error) {
	l, err := h.link(name)
	if err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

// Links returns the names of all links in the handle's namespace.
func (h *Handle) Links() ([]string, error) {
	if err := h.errIfClosed(); err != nil {
		return nil, err
	}
	ls, err := h.route.LinkList()
	if err != nil {
		return nil, newError([]error{err}, "list links in network namespace %s: %v", h.ns, err)
	}
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	return names, nil
}

// AddVethPair creates a veth pair: name in the handle's namespace and peer
// directly in peerNS, or next to name when peerNS is nil. Both ends start
// down.
func (h *Handle) AddVethPair(name, peer string, peerNS *Namespace) error {
	if name == "" || peer == "" {
		return invalidf("add veth pair %q/%q: both names are needed", name, peer)
	}
	if len(name) >= unix.IFNAMSIZ || len(peer) >= unix.IFNAMSIZ {
		return invalidf("add veth pair %s/%s: interface names are limited to %d bytes", name, peer, unix.IFNAMSIZ-1)
	}
	if err := h.errIfClosed(); err != nil {
		return err
	}
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}
	where := h.ns.String()
	if peerNS != nil {
		fd := peerNS.FD()
		if fd < 0 {
			return newError([]error{ErrClosed}, "add veth pair %s/%s: peer namespace %s is closed", name, peer, peerNS)
		}
		v.PeerNamespace = netlink.NsFd(fd)
		where = peerNS.String()
	}
	if err := h.route.LinkAdd(v); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST):
			return newError([]error{ErrExists, err}, "add veth pair %s (in %s) / %s (in %s): a link with one of these names already exists (delete it or pick other names)", name, h.ns, peer, where)
		case errors.Is(err, unix.EOPNOTSUPP):
			return newError([]error{ErrModuleNotLoaded, err}, "add veth pair %s/%s: the kernel has no veth support (modprobe veth)", name, peer)
		}
		return newError([]error{err}, "add veth pair %s (in %s) / %s (in %s): %v", name, h.ns, peer, where, err)
	}
	return nil
}

// DeleteLink deletes the named link. Deleting one end of a veth pair
// deletes both.
func (h *Handle) DeleteLink(name string) error {
	l, err := h.link(name)
	if err != nil {
		return err
	}
	if err := h.route.LinkDel(l); err != nil {
		return newError([]error{err}, "delete link %s in network namespace %s: %v", name, h.ns, err)
	}
	return nil
}

// SetUp sets the named link administratively up.
func (h *Handle) SetUp(name string) error {
	l, err := h.link(name)
	if err != nil {
		return err
	}
	if err := h.route.LinkSetUp(l); err != nil {
		return newError([]error{err}, "set link %s up in network namespace %s: %v", name, h.ns, err)
	}
	return nil
}

// SetDown sets the named link administratively down.
func (h *Handle) SetDown(name string) error {
	l, err := h.link(name)
	if err != nil {
		return err
	}
	if err := h.route.LinkSetDown(l); err != nil {
		return newError([]error{err}, "set link %s down in network namespace %s: %v", name, h.ns, err)
	}
	return nil
}

// MoveToNamespace moves the named link into ns. The kernel drops the
// link's addresses and sets it down on the way; configure it afterwards
// with a Handle of ns.
func (h *Handle) MoveToNamespace(name string, ns *Namespace) error {
	if ns == nil {
		return invalidf("move link %s: target namespace is nil", name)
	}
	l, err := h.link(name)
	if err != nil {
		return err
	}
	fd := ns.FD()
	if fd < 0 {
		return newError([]error{ErrClosed}, "move link %s: target namespace %s is closed", name, ns)
	}
	if err := h.route.LinkSetNsFd(l, fd); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return newError([]error{ErrExists, err}, "move link %s to network namespace %s: a link of that name already exists there", name, ns)
		}
		return newError([]error{err}, "move link %s from network namespace %s to %s: %v", name, h.ns, ns, err)
	}
	return nil
}

// checkPrefix validates an address prefix for AddAddr and returns it with
// an IPv4-mapped IPv6 address turned into plain IPv4.
func checkPrefix(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return p, invalidf("address prefix %v is not valid (want e.g. 192.0.2.1/24 or fd00::1/64)", p)
	}
	a := p.Addr()
	if a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return p, invalidf("address prefix %v: an IPv4-mapped address needs at least /96", p)
		}
		p = netip.PrefixFrom(a.Unmap(), bits)
		a = p.Addr()
	}
	if a.IsUnspecified() || a.IsMulticast() {
		return p, invalidf("address prefix %v: %v cannot be assigned to an interface", p, a)
	}
	return p, nil
}

// prefixToAddr converts a prefix into a netlink.Addr, keeping the host
// part of the address (192.0.2.1/24, not 192.0.2.0/24).
func prefixToAddr(p netip.Prefix) *netlink.Addr {
	a := p.Addr()
	ipn := &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
	addr := &netlink.Addr{IPNet: ipn}
	if a.Is6() {
		// Usable at once: no duplicate address detection, no tentative
		// period during which bind fails with EADDRNOTAVAIL.
		addr.Flags = unix.IFA_F_NODAD
	}
	return addr
}

// AddAddr adds an IPv4 or IPv6 address with its prefix length to the named
// link. IPv6 addresses get IFA_F_NODAD so they are usable immediately
// instead of staying tentative during duplicate address detection.
func (h *Handle) AddAddr(name string, p netip.Prefix) error {
	p, err := checkPrefix(p)
	if err != nil {
		return err
	}
	l, err := h.link(name)
	if err != nil {
		return err
	}
	if err := h.route.AddrAdd(l, prefixToAddr(p)); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return newError([]error{ErrExists, err}, "add address %v to link %s: it is already there", p, name)
		}
		return newError([]error{err}, "add address %v to link %s in network namespace %s: %v", p, name, h.ns, err)
	}
	return nil
}

// Addrs returns the IPv4 and IPv6 addresses of the named link, including
// link-local ones (whose zone is dropped: it is the link itself).
func (h *Handle) Addrs(name string) ([]netip.Prefix, error) {
	l, err := h.link(name)
	if err != nil {
		return nil, err
	}
	as, err := h.route.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, newError([]error{err}, "list addresses of link %s in network namespace %s: %v", name, h.ns, err)
	}
	out := make([]netip.Prefix, 0, len(as))
	for _, a := range as {
		if a.IPNet == nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out, nil
}

// AddNeighbor installs (or replaces) a permanent neighbour entry, the
// equivalent of `ip neigh replace IP lladdr MAC dev NAME nud permanent`.
func (h *Handle) AddNeighbor(name string, ip netip.Addr, mac net.HardwareAddr) error {
	if !ip.IsValid() || ip.IsUnspecified() {
		return invalidf("add neighbour on %s: address %v is not usable", name, ip)
	}
	if len(mac) == 0 {
		return invalidf("add neighbour %v on %s: hardware address is empty", ip, name)
	}
	ip = ip.Unmap()
	idx, err := h.LinkIndex(name)
	if err != nil {
		return err
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	n := &netlink.Neigh{
		LinkIndex:    idx,
		Family:       fam,
		State:        netlink.NUD_PERMANENT,
		IP:           net.IP(ip.AsSlice()),
		HardwareAddr: mac,
	}
	if err := h.route.NeighSet(n); err != nil {
		return newError([]error{err}, "add neighbour %v lladdr %v on link %s in network namespace %s: %v", ip, mac, name, h.ns, err)
	}
	return nil
}
