//go:build integration

package netlinkcfg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// These tests need root. The veth, namespace, address, neighbour and
// sysctl tests run on any Linux host that allows network namespaces; the
// netem test needs sch_netem; the Rxe and RDS tests need the modules the
// VM harness loads (veth, rdma_rxe, crc32_generic, rds, rds_tcp, rds_rdma)
// and fail when they are missing.

var nameSeq atomic.Int32

// uniqueName returns a short name (usable as an interface name) that is
// unique across concurrent test processes.
func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	n := fmt.Sprintf("%s%d%c", prefix, os.Getpid()%100000, 'a'+rune(nameSeq.Add(1)-1)%26)
	if len(n) >= unix.IFNAMSIZ {
		t.Fatalf("test name %q too long", n)
	}
	return n
}

// nsInode returns the inode identifying the network namespace behind fd.
func nsInode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatalf("fstat namespace fd: %v", err)
	}
	return st.Ino
}

// threadNSInode returns the namespace inode of the calling thread.
func threadNSInode() (uint64, error) {
	var st unix.Stat_t
	err := unix.Stat("/proc/thread-self/ns/net", &st)
	return st.Ino, err
}

func newTestNamespace(t *testing.T) *Namespace {
	t.Helper()
	ns, err := CreateNamespace(uniqueName(t, "nlcns"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("delete namespace %s: %v", ns.Name(), err)
		}
	})
	return ns
}

func currentNamespace(t *testing.T) *Namespace {
	t.Helper()
	ns, err := CurrentNamespace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

func handle(t *testing.T, ns *Namespace) *Handle {
	t.Helper()
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func TestIntegrationNamespaceLifecycle(t *testing.T) {
	cur := currentNamespace(t)
	name := uniqueName(t, "nlcns")
	ns, err := CreateNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(netnsRunDir, name)
	if ns.Name() != name || ns.String() != name {
		t.Errorf("Name() = %q, String() = %q; want %q", ns.Name(), ns.String(), name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("namespace not persisted: %v", err)
	}
	if nsInode(t, ns.FD()) == nsInode(t, cur.FD()) {
		t.Fatal("new namespace has the inode of the current one")
	}

	// The calling thread did not move.
	before, err := threadNSInode()
	if err != nil {
		t.Fatal(err)
	}
	if before != nsInode(t, cur.FD()) {
		t.Fatalf("test thread is not in the current namespace before the test")
	}

	// Do runs in the namespace.
	var inside uint64
	if err := ns.Do(func() error {
		var err error
		inside, err = threadNSInode()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside != nsInode(t, ns.FD()) {
		t.Errorf("Do ran in namespace inode %d, want %d", inside, nsInode(t, ns.FD()))
	}
	wantErr := errors.New("from fn")
	if err := ns.Do(func() error { return wantErr }); err != wantErr {
		t.Errorf("Do returned %v, want fn's error", err)
	}

	// Creating the same name again fails; opening it works and is the
	// same namespace.
	if _, err := CreateNamespace(name); !errors.Is(err, ErrExists) {
		t.Errorf("second CreateNamespace(%s) = %v, want ErrExists", name, err)
	}
	again, err := OpenNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	if nsInode(t, again.FD()) != nsInode(t, ns.FD()) {
		t.Error("OpenNamespace opened a different namespace")
	}
	if err := again.Close(); err != nil {
		t.Error(err)
	}
	if again.FD() != -1 {
		t.Errorf("FD after Close = %d, want -1", again.FD())
	}
	if err := again.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do on closed namespace = %v, want ErrClosed", err)
	}

	// A new namespace has only lo, down.
	h := handle(t, ns)
	links, err := h.Links()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(links, []string{"lo"}) {
		t.Errorf("links of a new namespace: %v, want [lo]", links)
	}

	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Delete (stat: %v)", path, err)
	}
	if _, err := OpenNamespace(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenNamespace after Delete = %v, want ErrNotFound", err)
	}
	if err := cur.Delete(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Delete of the current namespace = %v, want ErrInvalid", err)
	}
}

func TestIntegrationNamespaceHandleLifetime(t *testing.T) {
	ns := newTestNamespace(t)
	other, err := OpenNamespace(ns.Name())
	if err != nil {
		t.Fatal(err)
	}
	h, err := other.Handle()
	if err != nil {
		t.Fatal(err)
	}
	// The handle holds its own reference: closing the Namespace it came
	// from does not affect it.
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.SetUp("lo"); err != nil {
		t.Errorf("handle after its Namespace was closed: %v", err)
	}
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	if h.Namespace() != other {
		t.Error("Namespace() is not the namespace the handle was made from")
	}
	h.Close()
	h.Close() // idempotent
	for name, f := range map[string]func() error{
		"SetUp":       func() error { return h.SetUp("lo") },
		"Links":       func() error { _, err := h.Links(); return err },
		"AddVethPair": func() error { return h.AddVethPair(uniqueName(t, "nlcv"), uniqueName(t, "nlcv"), nil) },
		"AddAddr":     func() error { return h.AddAddr(a, netip.MustParsePrefix("10.231.11.1/24")) },
		"ClearQdisc":  func() error { return h.ClearQdisc(a) },
		"RxeLinks":    func() error { _, err := h.RxeLinks(); return err },
	} {
		if err := f(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	// Nothing leaked into the current namespace through a closed handle.
	ch := handle(t, currentNamespace(t))
	if _, err := ch.LinkIndex(a); !errors.Is(err, ErrNotFound) {
		t.Errorf("link %s visible in the current namespace: %v", a, err)
	}
	if h2, err := ns.Handle(); err != nil {
		t.Errorf("new handle from the still-open namespace: %v", err)
	} else {
		h2.Close()
	}
}

// TestIntegrationNamespaceThreadsNotLeaked checks that no thread of the
// process stays in a namespace after Do and Handle return.
func TestIntegrationNamespaceThreadsNotLeaked(t *testing.T) {
	ns := newTestNamespace(t)
	target := nsInode(t, ns.FD())
	for i := 0; i < 20; i++ {
		if err := ns.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		h, err := ns.Handle()
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	// Locked threads end right after their goroutine; allow a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := threadsIn(t, target)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads of this process are still in namespace %s", n, ns.Name())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func threadsIn(t *testing.T, inode uint64) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join("/proc/self/task", task.Name(), "ns/net"), &st); err != nil {
			continue // thread exited meanwhile
		}
		if st.Ino == inode {
			n++
		}
	}
	return n
}

func TestIntegrationVethPairSetup(t *testing.T) {
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	nsName := uniqueName(t, "nlcns")
	v4a, v4b := netip.MustParsePrefix("10.231.7.1/24"), netip.MustParsePrefix("10.231.7.2/24")
	v6a, v6b := netip.MustParsePrefix("fd00:231:7::1/64"), netip.MustParsePrefix("fd00:231:7::2/64")
	p, err := SetupVethPair(VethPairConfig{
		Name: a, Peer: b, PeerNamespaceName: nsName,
		Addrs:     []netip.Prefix{v4a, v6a},
		PeerAddrs: []netip.Prefix{v4b, v6b},
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	if p.PeerNS.Name() != nsName {
		t.Errorf("peer namespace %q, want %q", p.PeerNS.Name(), nsName)
	}

	checkAddrs(t, p.Handle, a, v4a, v6a)
	checkAddrs(t, p.PeerHandle, b, v4b, v6b)
	if _, err := p.Handle.LinkIndex(b); !errors.Is(err, ErrNotFound) {
		t.Errorf("peer %s visible in the current namespace: %v", b, err)
	}
	for _, c := range []struct {
		h    *Handle
		link string
	}{{p.Handle, a}, {p.PeerHandle, b}, {p.PeerHandle, "lo"}} {
		l, err := c.h.link(c.link)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("link %s in %s is not up", c.link, c.h.Namespace())
		}
	}

	// Traffic flows both ways over IPv4 and IPv6 (IPv6 at once, thanks
	// to IFA_F_NODAD).
	udpRoundTrip(t, p.PeerNS, v4a.Addr())
	udpRoundTrip(t, p.PeerNS, v6a.Addr())

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	h := handle(t, currentNamespace(t))
	if _, err := h.LinkIndex(a); !errors.Is(err, ErrNotFound) {
		t.Errorf("link %s survives Close: %v", a, err)
	}
	if _, err := OpenNamespace(nsName); !errors.Is(err, ErrNotFound) {
		t.Errorf("namespace %s survives Close: %v", nsName, err)
	}
}

// TestIntegrationVethPairSetupCleanup checks that a failing SetupVethPair
// removes what it had made.
func TestIntegrationVethPairSetupCleanup(t *testing.T) {
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	nsName := uniqueName(t, "nlcns")
	_, err := SetupVethPair(VethPairConfig{
		Name: a, Peer: b, PeerNamespaceName: nsName,
		Addrs:     []netip.Prefix{netip.MustParsePrefix("10.231.12.1/24")},
		PeerAddrs: []netip.Prefix{netip.MustParsePrefix("224.0.0.9/32")}, // refused
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetupVethPair with a multicast address: %v, want ErrInvalid", err)
	}
	h := handle(t, currentNamespace(t))
	if _, err := h.LinkIndex(a); !errors.Is(err, ErrNotFound) {
		t.Errorf("link %s left behind: %v", a, err)
	}
	if _, err := OpenNamespace(nsName); !errors.Is(err, ErrNotFound) {
		t.Errorf("namespace %s left behind: %v", nsName, err)
	}

	// A name clash must not delete the existing link.
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.DeleteLink(a) })
	if _, err := SetupVethPair(VethPairConfig{Name: a, Peer: uniqueName(t, "nlcv")}); !errors.Is(err, ErrExists) {
		t.Errorf("SetupVethPair over an existing link: %v, want ErrExists", err)
	}
	if _, err := h.LinkIndex(a); err != nil {
		t.Errorf("existing link %s was removed by the failed setup: %v", a, err)
	}
}

func checkAddrs(t *testing.T, h *Handle, link string, want ...netip.Prefix) {
	t.Helper()
	got, err := h.Addrs(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("addresses of %s: %v, missing %v", link, got, w)
		}
	}
}

// udpRoundTrip listens on addr in the current namespace, sends a datagram
// from peer and checks the echo comes back.
func udpRoundTrip(t *testing.T, peer *Namespace, addr netip.Addr) {
	t.Helper()
	srv, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		n, from, err := srv.ReadFromUDPAddrPort(buf)
		if err == nil {
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	dst := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	err = peer.Do(func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("rds")); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != "rds" {
			return fmt.Errorf("echo %q", buf[:n])
		}
		return nil
	})
	if err != nil {
		t.Errorf("UDP round trip from %s to %v: %v", peer, dst, err)
	}
}

func TestIntegrationVethSameNamespaceAndMove(t *testing.T) {
	cur := currentNamespace(t)
	h := handle(t, cur)
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.DeleteLink(a) })
	if err := h.AddVethPair(a, uniqueName(t, "nlcv"), nil); !errors.Is(err, ErrExists) {
		t.Errorf("second AddVethPair(%s) = %v, want ErrExists", a, err)
	}
	idx, err := h.LinkIndex(b)
	if err != nil || idx <= 0 {
		t.Fatalf("LinkIndex(%s) = %d, %v", b, idx, err)
	}

	ns := newTestNamespace(t)
	if err := h.MoveToNamespace(b, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LinkIndex(b); !errors.Is(err, ErrNotFound) {
		t.Errorf("%s still in the current namespace after the move: %v", b, err)
	}
	nh := handle(t, ns)
	if _, err := nh.LinkIndex(b); err != nil {
		t.Errorf("%s not in %s after the move: %v", b, ns, err)
	}
	if err := nh.SetUp(b); err != nil {
		t.Error(err)
	}
	if err := nh.SetDown(b); err != nil {
		t.Error(err)
	}
	l, err := nh.link(b)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("%s still up after SetDown", b)
	}
}

func TestIntegrationAddrErrors(t *testing.T) {
	h := handle(t, currentNamespace(t))
	missing := uniqueName(t, "nlcx")
	err := h.AddAddr(missing, netip.MustParsePrefix("10.231.8.1/24"))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "link "+missing+" not found") {
		t.Errorf("AddAddr on a missing link: %v", err)
	}
	for _, f := range []func() error{
		func() error { return h.SetUp(missing) },
		func() error { _, err := h.Addrs(missing); return err },
		func() error { return h.DeleteLink(missing) },
	} {
		if err := f(); !errors.Is(err, ErrNotFound) {
			t.Errorf("operation on missing link: %v, want ErrNotFound", err)
		}
	}

	ns := newTestNamespace(t)
	nh := handle(t, ns)
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := nh.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix("10.231.8.1/24")
	if err := nh.AddAddr(a, p); err != nil {
		t.Fatal(err)
	}
	if err := nh.AddAddr(a, p); !errors.Is(err, ErrExists) {
		t.Errorf("adding %v twice: %v, want ErrExists", p, err)
	}
	mapped := netip.MustParsePrefix("::ffff:10.231.9.1/120")
	if err := nh.AddAddr(a, mapped); err != nil {
		t.Fatal(err)
	}
	checkAddrs(t, nh, a, p, netip.MustParsePrefix("10.231.9.1/24"))
}

func TestIntegrationNamespaceNeighbor(t *testing.T) {
	ns := newTestNamespace(t)
	h := handle(t, ns)
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.AddAddr(a, netip.MustParsePrefix("10.231.10.1/24")); err != nil {
		t.Fatal(err)
	}
	if err := h.SetUp(a); err != nil {
		t.Fatal(err)
	}
	mac, err := h.HardwareAddr(b)
	if err != nil || len(mac) != 6 {
		t.Fatalf("HardwareAddr(%s) = %v, %v", b, mac, err)
	}
	for _, ip := range []netip.Addr{netip.MustParseAddr("10.231.10.2"), netip.MustParseAddr("fd00:231:10::2")} {
		if err := h.AddNeighbor(a, ip, mac); err != nil {
			t.Fatal(err)
		}
		// Replacing is allowed.
		if err := h.AddNeighbor(a, ip, mac); err != nil {
			t.Errorf("second AddNeighbor(%v): %v", ip, err)
		}
	}
	idx, err := h.LinkIndex(a)
	if err != nil {
		t.Fatal(err)
	}
	neighs, err := h.route.NeighList(idx, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, n := range neighs {
		if n.IP.Equal(net.ParseIP("10.231.10.2")) || n.IP.Equal(net.ParseIP("fd00:231:10::2")) {
			found++
			if n.State != netlink.NUD_PERMANENT || n.HardwareAddr.String() != mac.String() {
				t.Errorf("neighbour %v: state %#x lladdr %v, want permanent %v", n.IP, n.State, n.HardwareAddr, mac)
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d of 2 neighbour entries in %v", found, neighs)
	}
	if err := h.AddNeighbor(a, netip.Addr{}, mac); !errors.Is(err, ErrInvalid) {
		t.Errorf("AddNeighbor(invalid addr) = %v, want ErrInvalid", err)
	}
}

func TestIntegrationNamespaceSysctl(t *testing.T) {
	ns := newTestNamespace(t)
	const key = "net.ipv4.conf.all.accept_local"
	host, err := Sysctl(key)
	if err != nil {
		t.Fatal(err)
	}
	want := "1"
	if host == "1" {
		want = "0"
	}
	var got string
	err = ns.Do(func() error {
		if err := SetSysctl(key, want); err != nil {
			return err
		}
		var err error
		got, err = Sysctl(key)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s in %s = %q after setting %q", key, ns, got, want)
	}
	// The Namespace methods do the same.
	if err := ns.SetSysctl(key, host); err != nil {
		t.Fatal(err)
	}
	if got, err := ns.Sysctl(key); err != nil || got != host {
		t.Errorf("ns.Sysctl(%s) = %q, %v after ns.SetSysctl(%q)", key, got, err, host)
	}
	if after, err := Sysctl(key); err != nil || after != host {
		t.Errorf("%s in the current namespace changed: %q -> %q (%v)", key, host, after, err)
	}
	if _, err := Sysctl("net.ipv4.conf.nlcnothere.rp_filter"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing sysctl: %v, want ErrNotFound", err)
	}
}

func TestIntegrationNetem(t *testing.T) {
	ns := newTestNamespace(t)
	h := handle(t, ns)
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	want := Netem{Loss: 10, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Duplicate: 1, Corrupt: 2, Reorder: 25, Limit: 500}
	if err := h.SetNetem(a, want); err != nil {
		t.Fatal(err)
	}
	if typ, err := h.Qdisc(a); err != nil || typ != "netem" {
		t.Fatalf("root qdisc of %s = %q, %v; want netem", a, typ, err)
	}
	got, err := h.NetemOf(a)
	if err != nil {
		t.Fatal(err)
	}
	close := func(x, y float64) bool { return x-y < 1e-3 && y-x < 1e-3 }
	if !close(got.Loss, want.Loss) || !close(got.Duplicate, want.Duplicate) || !close(got.Corrupt, want.Corrupt) ||
		!close(got.Reorder, want.Reorder) || got.Delay != want.Delay || got.Jitter != want.Jitter || got.Limit != want.Limit {
		t.Errorf("netem read back as %+v, want %+v", got, want)
	}
	// Replace with other parameters.
	if err := h.SetNetem(a, Netem{Loss: 50}); err != nil {
		t.Fatal(err)
	}
	if got, err := h.NetemOf(a); err != nil || !close(got.Loss, 50) || got.Delay != 0 {
		t.Errorf("after replace: %+v, %v", got, err)
	}
	if err := h.SetNetem(a, Netem{Loss: 101}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid netem: %v, want ErrInvalid", err)
	}
	if err := h.ClearQdisc(a); err != nil {
		t.Fatal(err)
	}
	if typ, err := h.Qdisc(a); err != nil || typ == "netem" {
		t.Errorf("root qdisc after ClearQdisc = %q, %v", typ, err)
	}
	if _, err := h.NetemOf(a); !errors.Is(err, ErrNotFound) {
		t.Errorf("NetemOf after ClearQdisc: %v, want ErrNotFound", err)
	}
	// Clearing again is a no-op.
	if err := h.ClearQdisc(a); err != nil {
		t.Errorf("second ClearQdisc: %v", err)
	}
}

// TestIntegrationNetemClearQdisc checks ClearQdisc on a qdisc every kernel
// has (pfifo), so it also runs where sch_netem is missing.
func TestIntegrationNetemClearQdisc(t *testing.T) {
	ns := newTestNamespace(t)
	h := handle(t, ns)
	a, b := uniqueName(t, "nlcv"), uniqueName(t, "nlcv")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	idx, err := h.LinkIndex(a)
	if err != nil {
		t.Fatal(err)
	}
	q := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)},
		QdiscType:  "pfifo",
	}
	if err := h.route.QdiscAdd(q); err != nil {
		t.Fatal(err)
	}
	if typ, err := h.Qdisc(a); err != nil || typ != "pfifo" {
		t.Fatalf("root qdisc = %q, %v; want pfifo", typ, err)
	}
	if _, err := h.NetemOf(a); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "it has pfifo") {
		t.Errorf("NetemOf on pfifo: %v", err)
	}
	if err := h.ClearQdisc(a); err != nil {
		t.Fatal(err)
	}
	if typ, err := h.Qdisc(a); err != nil || typ == "pfifo" {
		t.Errorf("root qdisc after ClearQdisc = %q, %v", typ, err)
	}
	if err := h.ClearQdisc(a); err != nil {
		t.Errorf("ClearQdisc with only the default qdisc: %v", err)
	}
	if err := h.ClearQdisc(uniqueName(t, "nlcq")); !errors.Is(err, ErrNotFound) {
		t.Errorf("ClearQdisc on a missing link: %v, want ErrNotFound", err)
	}
}

// requireModules fails the test when the kernel lacks what transport
// needs: the VM harness promises these modules.
func requireModules(t *testing.T, transport string) {
	t.Helper()
	st, err := RDSModules()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Missing(transport); err != nil {
		t.Fatal(err)
	}
}

// rxeVeth makes a veth pair with both ends in the initial namespace, the
// layout rxe needs, and returns the handle and the two names.
func rxeVeth(t *testing.T, up bool) (*Handle, string, string) {
	t.Helper()
	h := handle(t, currentNamespace(t))
	a, b := uniqueName(t, "nlcr"), uniqueName(t, "nlcr")
	if err := h.AddVethPair(a, b, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.DeleteLink(a) })
	if err := h.AddAddr(a, netip.MustParsePrefix("10.231.20.1/24")); err != nil {
		t.Fatal(err)
	}
	if err := h.SetUp(a); err != nil {
		t.Fatal(err)
	}
	if up {
		if err := h.SetUp(b); err != nil {
			t.Fatal(err)
		}
	}
	return h, a, b
}

func TestIntegrationRxeSetup(t *testing.T) {
	requireModules(t, TransportRxe)
	h, a, _ := rxeVeth(t, true)
	rxe := uniqueName(t, "nlcx")
	if err := SetupRxe(h, rxe, a, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			h.DeleteRxe(rxe)
		}
	})
	st, err := h.RDMAPortState(rxe, 1)
	if err != nil || st != PortActive {
		t.Errorf("port state = %v, %v; want ACTIVE", st, err)
	}
	links, err := h.RxeLinks()
	if err != nil {
		t.Fatal(err)
	}
	var found *RDMALink
	for i := range links {
		if links[i].Name == rxe {
			found = &links[i]
		}
	}
	if found == nil {
		t.Fatalf("RxeLinks() = %+v, missing %s", links, rxe)
	}
	if found.Netdev != a || !found.Rxe || found.NodeGUID == "" {
		t.Errorf("rxe link %+v: want netdev %s, Rxe, a node GUID", *found, a)
	}

	// One rxe per netdev; one device per name.
	if err := h.AddRxe(uniqueName(t, "nlcx"), a); !errors.Is(err, ErrExists) {
		t.Errorf("second rxe on %s: %v, want ErrExists", a, err)
	}
	if err := h.AddRxe(rxe, uniqueName(t, "nlcq")); !errors.Is(err, ErrNotFound) {
		t.Errorf("rxe on a missing netdev: %v, want ErrNotFound", err)
	}

	if err := h.DeleteRxe(rxe); err != nil {
		t.Fatal(err)
	}
	deleted = true
	if _, err := h.RDMAPortState(rxe, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("port state after DeleteRxe: %v, want ErrNotFound", err)
	}
	if err := h.DeleteRxe(rxe); !errors.Is(err, ErrNotFound) {
		t.Errorf("second DeleteRxe: %v, want ErrNotFound", err)
	}
}

func TestIntegrationRxeNoCarrier(t *testing.T) {
	requireModules(t, TransportRxe)
	h, a, b := rxeVeth(t, false) // peer b stays down: no carrier on a
	rxe := uniqueName(t, "nlcx")
	if err := h.AddRxe(rxe, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.DeleteRxe(rxe) })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := h.WaitPortActive(ctx, rxe, 1)
	if !errors.Is(err, ErrNotActive) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "bring the netdev and its veth peer up: rxe needs carrier") ||
		!strings.Contains(err.Error(), a) {
		t.Errorf("WaitPortActive without carrier: %v", err)
	}
	// Carrier arrives when the peer comes up.
	if err := h.SetUp(b); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := h.WaitPortActive(ctx2, rxe, 1); err != nil {
		t.Errorf("after bringing %s up: %v", b, err)
	}
}

func TestIntegrationRDSSysctl(t *testing.T) {
	requireModules(t, TransportTCP)
	v, err := RDSSysctl("ping_enable")
	if err != nil {
		t.Fatal(err)
	}
	if v != "0" && v != "1" {
		t.Errorf("net.rds.ping_enable = %q, want 0 or 1", v)
	}
	if err := SetRDSSysctl("ping_enable", v); err != nil {
		t.Error(err)
	}
	if _, err := RDSSysctl("tcp.rds_tcp_rcvbuf"); err != nil {
		t.Error(err)
	}
	if _, err := RDSSysctl("../ipv4/ip_forward"); !errors.Is(err, ErrInvalid) {
		t.Errorf("RDSSysctl(../ipv4/ip_forward) = %v, want ErrInvalid", err)
	}
}
