package netlinkcfg

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// rdmaHandle returns the NETLINK_RDMA handle, opening it in the handle's
// namespace on first use.
func (h *Handle) rdmaHandle() (*netlink.Handle, error) {
	h.rdmaMu.Lock()
	defer h.rdmaMu.Unlock()
	if err := h.errIfClosed(); err != nil {
		return nil, err
	}
	if h.rdma != nil {
		return h.rdma, nil
	}
	nh, err := h.own.newNetlinkHandle(unix.NETLINK_RDMA)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, newError([]error{ErrModuleNotLoaded, err}, "open RDMA netlink socket: ib_core is not loaded (modprobe rdma_rxe, which pulls it in; also crc32_generic)")
		}
		return nil, newError([]error{err}, "open RDMA netlink socket in network namespace %s: %v", h.ns, err)
	}
	h.rdma = nh
	return nh, nil
}

// rdmaDevDir is the sysfs directory of an RDMA device.
func (h *Handle) rdmaDevDir(name string) string {
	return filepath.Join(h.sysRoot, "class", "infiniband", name)
}

// AddRxe creates a Soft-RoCE device called name on the network device
// netdev, the equivalent of `rdma link add NAME type rxe netdev NETDEV`.
// The port becomes ACTIVE only once netdev has carrier; see
// WaitPortActive and SetupRxe.
//
// Namespaces: the RDMA netlink socket, and so the netdev lookup, belong to
// the handle's namespace, and on Debian's 6.1 kernel an rxe device added on
// a veth inside a second namespace was created and its port went ACTIVE.
// But the rdma_rxe of 6.1 and 6.12 opens its RoCEv2 UDP socket and routes
// its packets in the initial namespace only (rxe_net.c uses init_net), and
// RDS/IB works only in the initial namespace, so for traffic use a Handle
// of the initial namespace and a netdev that lives there. RDMA devices are
// visible from every namespace while the RDMA subsystem is in its default
// "shared" netns mode.
func (h *Handle) AddRxe(name, netdev string) error {
	if err := validRDMAName(name); err != nil {
		return err
	}
	if _, err := h.link(netdev); err != nil {
		return fmt.Errorf("add rxe link %s on %s: %w", name, netdev, err)
	}
	rh, err := h.rdmaHandle()
	if err != nil {
		return h.rxeAddError(name, netdev, err)
	}
	if err := rh.RdmaLinkAdd(name, "rxe", netdev); err != nil {
		return h.rxeAddError(name, netdev, err)
	}
	return nil
}

// rxeAddError explains a failed AddRxe using the module status.
func (h *Handle) rxeAddError(name, netdev string, err error) error {
	st, stErr := rdsModulesAt(h.procRoot, h.sysRoot, "/lib/modules", "/usr/lib/modules")
	return explainRxeAdd(name, netdev, err, st, stErr == nil)
}

// explainRxeAdd turns the error of an rxe link add into an actionable one.
// known says whether st reflects the running kernel.
func explainRxeAdd(name, netdev string, err error, st ModuleStatus, known bool) error {
	prefix := "add rxe link " + name + " on " + netdev
	switch {
	case errors.Is(err, ErrModuleNotLoaded):
		return newError([]error{err}, "%s: %v", prefix, err)
	case known && !st.RdmaRxe:
		return newError([]error{ErrModuleNotLoaded, err}, "%s: rdma_rxe not loaded (modprobe rdma_rxe; also crc32_generic)", prefix)
	case known && !st.CRC32, errors.Is(err, unix.ENOENT):
		return newError([]error{ErrModuleNotLoaded, err}, "%s: the crc32 algorithm rxe needs is missing (modprobe crc32_generic), kernel said: %v", prefix, err)
	case errors.Is(err, unix.EEXIST):
		return newError([]error{ErrExists, err}, "%s: %s already has an rxe device (list them with RxeLinks; one per netdev)", prefix, netdev)
	case errors.Is(err, unix.ENFILE):
		return newError([]error{ErrExists, err}, "%s: an RDMA device named %s already exists (DeleteRxe it or pick another name)", prefix, name)
	case errors.Is(err, unix.ENODEV):
		return newError([]error{ErrNotFound, err}, "%s: the RDMA subsystem cannot find netdev %s in the namespace of the netlink socket", prefix, netdev)
	case errors.Is(err, unix.EINVAL):
		return newError([]error{err}, "%s: kernel rejected the request (EINVAL): is rdma_rxe loaded (modprobe rdma_rxe; also crc32_generic)?", prefix)
	case errors.Is(err, unix.EPERM):
		return newError([]error{err}, "%s: operation not permitted (needs CAP_NET_ADMIN; rxe also refuses VLAN devices)", prefix)
	}
	return newError([]error{err}, "%s: %v", prefix, err)
}

// DeleteRxe removes the Soft-RoCE device name, the equivalent of
// `rdma link delete NAME`.
func (h *Handle) DeleteRxe(name string) error {
	if err := validRDMAName(name); err != nil {
		return err
	}
	rh, err := h.rdmaHandle()
	if err != nil {
		return fmt.Errorf("delete rxe link %s: %w", name, err)
	}
	links, err := rh.RdmaLinkList()
	if err != nil {
		return newError([]error{err}, "delete rxe link %s: list RDMA devices: %v", name, err)
	}
	found := false
	for _, l := range links {
		if l.Attrs.Name == name {
			found = true
			break
		}
	}
	if !found {
		return newError([]error{ErrNotFound}, "delete rxe link %s: rdma device %s not found", name, name)
	}
	if err := rh.RdmaLinkDel(name); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return newError([]error{err}, "delete rxe link %s: the device is not a soft (rxe/siw) device and cannot be deleted this way", name)
		}
		return newError([]error{err}, "delete rxe link %s: %v", name, err)
	}
	return nil
}

// RDMALinks lists all RDMA devices, Soft-RoCE or not.
func (h *Handle) RDMALinks() ([]RDMALink, error) {
	rh, err := h.rdmaHandle()
	if err != nil {
		return nil, fmt.Errorf("list rdma devices: %w", err)
	}
	links, err := rh.RdmaLinkList()
	if err != nil {
		return nil, newError([]error{err}, "list rdma devices: %v", err)
	}
	out := make([]RDMALink, 0, len(links))
	for _, l := range links {
		out = append(out, h.describeRDMALink(l))
	}
	return out, nil
}

// RxeLinks lists the Soft-RoCE devices: the RDMA devices that have rxe's
// "parent" sysfs attribute, which names their netdev.
func (h *Handle) RxeLinks() ([]RDMALink, error) {
	all, err := h.RDMALinks()
	if err != nil {
		return nil, err
	}
	var out []RDMALink
	for _, l := range all {
		if l.Rxe {
			out = append(out, l)
		}
	}
	return out, nil
}

func (h *Handle) describeRDMALink(l *netlink.RdmaLink) RDMALink {
	r := RDMALink{Name: l.Attrs.Name, Index: l.Attrs.Index, NodeGUID: l.Attrs.NodeGuid}
	r.Netdev, r.Rxe = rxeParent(h.rdmaDevDir(l.Attrs.Name))
	if r.Netdev == "" {
		r.Netdev = firstGIDNetdev(h.rdmaDevDir(l.Attrs.Name))
	}
	return r
}

// RDMAPortState returns the state of port (counting from 1) of the RDMA
// device name, read from /sys/class/infiniband/NAME/ports/PORT/state,
// because RDMA netlink in vishvananda/netlink v1.3.1 does not report it.
func (h *Handle) RDMAPortState(name string, port int) (PortState, error) {
	return readPortState(filepath.Join(h.sysRoot, "class", "infiniband"), name, port)
}

// portPollInterval is how often WaitPortActive looks at the port state.
const portPollInterval = 20 * time.Millisecond

// WaitPortActive polls the state of port of the RDMA device name until it
// is ACTIVE or ctx ends. On timeout the error (matching ErrNotActive) gives
// the last state, the netdev and its operational state, and what to do.
func (h *Handle) WaitPortActive(ctx context.Context, name string, port int) error {
	t := time.NewTicker(portPollInterval)
	defer t.Stop()
	for {
		st, err := h.RDMAPortState(name, port)
		if err != nil {
			return err
		}
		if st == PortActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return h.notActiveError(name, port, st, ctx.Err())
		case <-t.C:
		}
	}
}

func (h *Handle) notActiveError(name string, port int, st PortState, cause error) error {
	netdev, _ := rxeParent(h.rdmaDevDir(name))
	if netdev == "" {
		netdev = firstGIDNetdev(h.rdmaDevDir(name))
	}
	if netdev == "" {
		return newError([]error{ErrNotActive, cause}, "rdma device %s port %d is %s, not ACTIVE: bring the netdev and its veth peer up: rxe needs carrier", name, port, st)
	}
	oper := "unknown"
	if l, err := h.route.LinkByName(netdev); err == nil {
		oper = l.Attrs().OperState.String()
	}
	return newError([]error{ErrNotActive, cause}, "rdma device %s port %d is %s, not ACTIVE (netdev %s is operationally %s): bring the netdev and its veth peer up: rxe needs carrier", name, port, st, netdev, oper)
}

// SetupRxe adds the Soft-RoCE device rxeName on netdev and waits up to
// timeout for its port 1 to become ACTIVE. netdev (and, for a veth, its
// peer) must be up for that to happen. The device is removed again when
// it does not become active.
func SetupRxe(h *Handle, rxeName, netdev string, timeout time.Duration) error {
	if err := h.AddRxe(rxeName, netdev); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := h.WaitPortActive(ctx, rxeName, 1); err != nil {
		h.DeleteRxe(rxeName)
		return err
	}
	return nil
}
