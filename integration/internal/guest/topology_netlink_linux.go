package guest

// The topology is built with github.com/vishvananda/netlink directly. The
// project's own netlinkcfg package can replace this file once it offers the
// same operations.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/integration/vmtest"
)

// setupTopology builds the one-VM or two-VM topology in vmtest's package doc.
func setupTopology(vms int, role string) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE, unix.NETLINK_RDMA)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	if err := linkUp(h, "lo"); err != nil {
		return err
	}
	if vms == 2 {
		return setupTwoVM(h, role)
	}
	return setupOneVM(h)
}

func setupOneVM(h *netlink.Handle) error {
	// RDS/TCP: rdstcp0 here, rdstcp1 in the named namespace rdspeer.
	nsFile, err := createNamedNetns(vmtest.PeerNamespaceName)
	if err != nil {
		return err
	}
	defer nsFile.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: vmtest.TCPLink},
		PeerName:      vmtest.TCPPeerLink,
		PeerNamespace: netlink.NsFd(int(nsFile.Fd())),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", vmtest.TCPLink, vmtest.TCPPeerLink, err)
	}
	if err := addAddrs(h, vmtest.TCPLink, vmtest.TCPLocal4, vmtest.TCPLocal6); err != nil {
		return err
	}
	if err := linkUp(h, vmtest.TCPLink); err != nil {
		return err
	}
	ph, err := netlink.NewHandleAt(netns.NsHandle(int(nsFile.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink handle in %s: %w", vmtest.PeerNamespaceName, err)
	}
	defer ph.Close()
	if err := linkUp(ph, "lo"); err != nil {
		return err
	}
	if err := addAddrs(ph, vmtest.TCPPeerLink, vmtest.TCPPeer4, vmtest.TCPPeer6); err != nil {
		return err
	}
	if err := linkUp(ph, vmtest.TCPPeerLink); err != nil {
		return err
	}

	// RDS/IB: one rxe device on rdsib0 carrying both IB addresses; rdsib1 is
	// up only so that rdsib0 has carrier.
	ib := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: vmtest.IBLink}, PeerName: vmtest.IBPeerLink}
	if err := h.LinkAdd(ib); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", vmtest.IBLink, vmtest.IBPeerLink, err)
	}
	if err := addAddrs(h, vmtest.IBLink, vmtest.IBAddr1, vmtest.IBAddr2); err != nil {
		return err
	}
	for _, l := range []string{vmtest.IBPeerLink, vmtest.IBLink} {
		if err := linkUp(h, l); err != nil {
			return err
		}
	}
	return addRxe(h, vmtest.RxeDevice, vmtest.IBLink)
}

func setupTwoVM(h *netlink.Handle, role string) error {
	local4, local6 := vmtest.MainAddr4, vmtest.MainAddr6
	if role == vmtest.RolePeer {
		local4, local6 = vmtest.PeerAddr4, vmtest.PeerAddr6
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := h.LinkByName(vmtest.TwoVMLink); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s did not appear (virtio-net missing?)", vmtest.TwoVMLink)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := addAddrs(h, vmtest.TwoVMLink, local4, local6); err != nil {
		return err
	}
	if err := linkUp(h, vmtest.TwoVMLink); err != nil {
		return err
	}
	return addRxe(h, vmtest.RxeDevice, vmtest.TwoVMLink)
}

func linkUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// addAddrs adds addresses with the vmtest prefix lengths. IPv6 addresses skip
// duplicate address detection so they are usable at once.
func addAddrs(h *netlink.Handle, name string, addrs ...netip.Addr) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	for _, a := range addrs {
		bits, flags := vmtest.PrefixLen4, 0
		if a.Is6() {
			bits, flags = vmtest.PrefixLen6, unix.IFA_F_NODAD
		}
		ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipn, Flags: flags}); err != nil {
			return fmt.Errorf("add %s/%d to %s: %w", a, bits, name, err)
		}
	}
	return nil
}

// addRxe creates a Soft-RoCE device on netdev and waits for port 1 to be
// ACTIVE.
func addRxe(h *netlink.Handle, name, netdev string) error {
	if err := h.RdmaLinkAdd(name, "rxe", netdev); err != nil {
		return fmt.Errorf("add rxe device %s on %s: %w (is crc32_generic loaded?)", name, netdev, err)
	}
	state := filepath.Join("/sys/class/infiniband", name, "ports", "1", "state")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(state)
		if err == nil && strings.Contains(string(b), "ACTIVE") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rxe device %s port 1 not ACTIVE after 30s (state %q, err %v)",
				name, strings.TrimSpace(string(b)), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createNamedNetns creates a network namespace bind-mounted at
// /run/netns/<name>, the place `ip netns` uses, and returns it opened.
func createNamedNetns(name string) (*os.File, error) {
	dir := "/run/netns"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked, so it exits with this goroutine and its
		// namespace change never leaks to other goroutines.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mount %s on %s: %w", src, p, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return nil, errors.Join(fmt.Errorf("create namespace %s", name), err)
	}
	return os.Open(p)
}
