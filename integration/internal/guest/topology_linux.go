package guest

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
)

// rxeTimeout bounds the wait for a new rxe port to become ACTIVE.
const rxeTimeout = 30 * time.Second

// topology builds the one-VM or two-VM topology in vmtest's package doc,
// in two steps: links (veth pairs, the peer namespace, addresses, links
// up), which needs only the veth module, and finish (the rxe device, and
// the wait for the links' operational state). The kernel's linkwatch sets
// that state up to a second after a link gets carrier, so init takes the
// first step as soon as veth is loaded and loads the other modules
// meanwhile.
type topology struct {
	vms    int
	role   string
	cur    *netlinkcfg.Namespace
	h      *netlinkcfg.Handle
	linked bool
}

func newTopology(vms int, role string) (*topology, error) {
	cur, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		return nil, err
	}
	h, err := cur.Handle()
	if err != nil {
		cur.Close()
		return nil, err
	}
	return &topology{vms: vms, role: role, cur: cur, h: h}, nil
}

func (t *topology) close() {
	t.h.Close()
	t.cur.Close()
}

// links takes the first step. Two VMs have nothing to do here: their link
// is the virtio NIC, there once its driver is loaded.
func (t *topology) links() error {
	t.linked = true
	if err := t.h.SetUp("lo"); err != nil {
		return err
	}
	if t.vms == 2 {
		return nil
	}
	return oneVMLinks(t.h)
}

// finish takes the second step (and the first, if it was not taken).
func (t *topology) finish() error {
	if !t.linked {
		if err := t.links(); err != nil {
			return err
		}
	}
	if t.vms == 2 {
		if err := setupTwoVM(t.h, t.role); err != nil {
			return err
		}
		return waitOperUp([]string{vmtest.TwoVMLink}, 10*time.Second)
	}
	if err := netlinkcfg.SetupRxe(t.h, vmtest.RxeDevice, vmtest.IBLink, rxeTimeout); err != nil {
		return err
	}
	return waitOperUp([]string{vmtest.TCPLink, vmtest.IBLink, vmtest.IBPeerLink}, 10*time.Second)
}

// waitOperUp waits until the links of the initial namespace report
// operstate "up": the kernel updates it a little after a link gets carrier,
// and tests should not start in between.
func waitOperUp(links []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, l := range links {
		for {
			b, err := os.ReadFile("/sys/class/net/" + l + "/operstate")
			state := strings.TrimSpace(string(b))
			if err == nil && state == "up" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("link %s operstate is %q (%v), not up, after %v", l, state, err, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func prefix(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return netip.PrefixFrom(a, vmtest.PrefixLen4)
	}
	return netip.PrefixFrom(a, vmtest.PrefixLen6)
}

func addAddrs(h *netlinkcfg.Handle, link string, addrs ...netip.Addr) error {
	for _, a := range addrs {
		if err := h.AddAddr(link, prefix(a)); err != nil {
			return err
		}
	}
	return nil
}

// oneVMLinks makes the one-VM links; finish adds the rxe device.
func oneVMLinks(h *netlinkcfg.Handle) error {
	// RDS/TCP: rdstcp0 here, rdstcp1 in the named namespace rdspeer.
	ns, err := netlinkcfg.CreateNamespace(vmtest.PeerNamespaceName)
	if err != nil {
		return err
	}
	defer ns.Close()
	ph, err := ns.Handle()
	if err != nil {
		return err
	}
	defer ph.Close()
	if err := h.AddVethPair(vmtest.TCPLink, vmtest.TCPPeerLink, ns); err != nil {
		return err
	}
	if err := addAddrs(h, vmtest.TCPLink, vmtest.TCPLocal4, vmtest.TCPLocal6); err != nil {
		return err
	}
	if err := addAddrs(ph, vmtest.TCPPeerLink, vmtest.TCPPeer4, vmtest.TCPPeer6); err != nil {
		return err
	}
	for _, s := range []struct {
		h    *netlinkcfg.Handle
		link string
	}{{ph, "lo"}, {ph, vmtest.TCPPeerLink}, {h, vmtest.TCPLink}} {
		if err := s.h.SetUp(s.link); err != nil {
			return err
		}
	}

	// RDS/IB: one rxe device on rdsib0 carrying both IB addresses; rdsib1 is
	// up only so that rdsib0 has carrier (two rxe devices in one VM do not
	// connect).
	if err := h.AddVethPair(vmtest.IBLink, vmtest.IBPeerLink, nil); err != nil {
		return err
	}
	if err := addAddrs(h, vmtest.IBLink, vmtest.IBAddr1, vmtest.IBAddr2); err != nil {
		return err
	}
	for _, l := range []string{vmtest.IBPeerLink, vmtest.IBLink} {
		if err := h.SetUp(l); err != nil {
			return err
		}
	}
	return nil
}

func setupTwoVM(h *netlinkcfg.Handle, role string) error {
	local4, local6 := vmtest.MainAddr4, vmtest.MainAddr6
	if role == vmtest.RolePeer {
		local4, local6 = vmtest.PeerAddr4, vmtest.PeerAddr6
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := h.LinkIndex(vmtest.TwoVMLink); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s did not appear within 20s (virtio-net driver not loaded?)", vmtest.TwoVMLink)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := addAddrs(h, vmtest.TwoVMLink, local4, local6); err != nil {
		return err
	}
	if err := h.SetUp(vmtest.TwoVMLink); err != nil {
		return err
	}
	return netlinkcfg.SetupRxe(h, vmtest.RxeDevice, vmtest.TwoVMLink, rxeTimeout)
}
