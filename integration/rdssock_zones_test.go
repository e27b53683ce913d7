//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// wantZone fails the test unless ap carries zone z.
func wantZone(t *testing.T, what string, ap netip.AddrPort, z string) {
	t.Helper()
	if got := ap.Addr().Zone(); got != z {
		t.Fatalf("%s %v has zone %q, want %q", what, ap, got, z)
	}
}

// TestIntegrationRowsLinkLocalIB binds two IPv6 link-local addresses of the
// rxe device's netdev and exchanges messages over RDS/IB; each side sees
// the other's address with the zone of that netdev.
func TestIntegrationRowsLinkLocalIB(t *testing.T) {
	vmtest.Require(t)
	x, y := netip.MustParseAddr("fe80::22:1"), netip.MustParseAddr("fe80::22:2")
	idx := addAddr(t, nil, vmtest.IBLink, netip.PrefixFrom(x, 64))
	addAddr(t, nil, vmtest.IBLink, netip.PrefixFrom(y, 64))
	zx, zy := x.WithZone(vmtest.IBLink), y.WithZone(vmtest.IBLink)
	for _, a := range []netip.Addr{zx, zy} {
		waitIBAddr(t, a, 10*time.Second)
	}
	a := listen(t, netip.AddrPortFrom(zx, port()), nil)
	// A numeric zone binds too; the bound address names the interface.
	b := listen(t, netip.AddrPortFrom(y.WithZone(strconv.Itoa(idx)), port()), nil)
	wantZone(t, "bound address", a.LocalAddrPort(), vmtest.IBLink)
	wantZone(t, "bound address", b.LocalAddrPort(), vmtest.IBLink)
	if b.LocalAddrPort().Addr() != zy {
		t.Fatalf("bound to %v, want %v", b.LocalAddrPort(), zy)
	}
	wantConnTransport(t, a, rdssock.TransportIB)
	wantConnTransport(t, b, rdssock.TransportIB)
	exchangeConns(t, a, b)

	// Addressed with the numeric zone, the message still comes from the
	// named one.
	msg := []byte("to a numeric zone")
	if _, err := a.WriteMsg(msg, nil, netip.AddrPortFrom(y.WithZone(strconv.Itoa(idx)), b.LocalAddrPort().Port())); err != nil {
		t.Fatal(err)
	}
	got, from := readMsg(t, b)
	if !bytes.Equal(got, msg) {
		t.Fatalf("received %q, want %q", got, msg)
	}
	wantZone(t, "sender", from, vmtest.IBLink)
	if from != a.LocalAddrPort() {
		t.Fatalf("sender %v, want %v", from, a.LocalAddrPort())
	}

	ibs, err := a.IBConnections()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range ibs {
		if c.Source.WithZone("") == x && c.Dest.WithZone("") == y || c.Source.WithZone("") == y && c.Dest.WithZone("") == x {
			n++
			t.Logf("IB connection row %+v", c)
		}
	}
	if n == 0 {
		t.Fatalf("RDS6_INFO_IB_CONNECTIONS has no %v <-> %v row: %+v", x, y, ibs)
	}
}

// TestIntegrationRowsConnectLinkLocal sets a link-local default destination
// with a zone: RemoteAddr keeps it, Write reaches it, the receiver sees the
// sender's zone, and the socket still receives from other peers.
func TestIntegrationRowsConnectLinkLocal(t *testing.T) {
	vmtest.Require(t)
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	local, peer := netip.MustParseAddr("fe80::11:1"), netip.MustParseAddr("fe80::11:2")
	localIdx := addAddr(t, nil, vmtest.TCPLink, netip.PrefixFrom(local, 64))
	peerIdx := addAddr(t, ns, vmtest.TCPPeerLink, netip.PrefixFrom(peer, 64))

	a := listen(t, netip.AddrPortFrom(local.WithZone(vmtest.TCPLink), port()), nil)
	b := listenPeer(t, netip.AddrPortFrom(peer.WithZone(strconv.Itoa(peerIdx)), port()), nil)
	other := listenPeer(t, netip.AddrPortFrom(peer.WithZone(strconv.Itoa(peerIdx)), port()), nil)

	for _, dst := range []netip.AddrPort{
		netip.AddrPortFrom(peer.WithZone(vmtest.TCPLink), b.LocalAddrPort().Port()),
		netip.AddrPortFrom(peer.WithZone(strconv.Itoa(localIdx)), b.LocalAddrPort().Port()),
	} {
		if err := a.Connect(dst); err != nil {
			t.Fatalf("Connect(%v): %v", dst, err)
		}
		ra, ok := a.RemoteAddr().(*rdssock.Addr)
		if !ok || ra.AddrPort != dst {
			t.Fatalf("RemoteAddr after Connect(%v) = %v", dst, a.RemoteAddr())
		}
		msg := []byte("connected to " + dst.String())
		if n, err := a.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("Write to %v = %d, %v", dst, n, err)
		}
		got, from := readMsg(t, b)
		want := netip.AddrPortFrom(local.WithZone(strconv.Itoa(peerIdx)), a.LocalAddrPort().Port())
		if !bytes.Equal(got, msg) || from != want {
			t.Fatalf("peer received %q from %v; want %q from %v", got, from, msg, want)
		}
		wantZone(t, "sender seen in the peer namespace", from, strconv.Itoa(peerIdx))
		// The automatic warm-up before the first send to dst must have
		// recognised the peer's ping answer, whichever way the zone of
		// dst is spelt, instead of waiting it out.
		if n := a.WarmUpTimeouts(); n != 0 {
			t.Fatalf("after the first Write to %v: %d warm-up timeouts", dst, n)
		}
	}

	// Connect filters nothing: a message from another peer arrives too.
	msg := []byte("from another peer")
	if _, err := other.WriteMsg(msg, nil, netip.AddrPortFrom(local.WithZone(strconv.Itoa(peerIdx)), a.LocalAddrPort().Port())); err != nil {
		t.Fatal(err)
	}
	got, from := readMsg(t, a)
	want := netip.AddrPortFrom(peer.WithZone(vmtest.TCPLink), other.LocalAddrPort().Port())
	if !bytes.Equal(got, msg) || from != want {
		t.Fatalf("received %q from %v; want %q from %v", got, from, msg, want)
	}
	wantZone(t, "sender", from, vmtest.TCPLink)
}

// TestIntegrationRowsConnectIB6 runs the default-destination path over
// RDS/IB with IPv6 ULA addresses on the rxe device's netdev.
func TestIntegrationRowsConnectIB6(t *testing.T) {
	vmtest.Require(t)
	a, b := ib6Pair(t)
	if err := a.Connect(b.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	if ra := a.RemoteAddr(); ra == nil || ra.String() != b.LocalAddrPort().String() {
		t.Fatalf("RemoteAddr = %v, want %v", ra, b.LocalAddrPort())
	}
	for i := range 3 {
		msg := []byte(fmt.Sprintf("IPv6 over rxe, write %d", i))
		if n, err := a.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		got, from := readMsg(t, b)
		if !bytes.Equal(got, msg) || from != a.LocalAddrPort() {
			t.Fatalf("received %q from %v; want %q from %v", got, from, msg, a.LocalAddrPort())
		}
	}
}

// TestIntegrationRowsOtherNamespaceZone binds a socket created in another
// network namespace (Config.NetNS) to a link-local address whose interface
// index names a different interface in the process's own namespace. The
// package promises zones by index for such sockets: the bound address must
// carry the index, not the name of the unrelated local interface.
func TestIntegrationRowsOtherNamespaceZone(t *testing.T) {
	vmtest.Require(t)
	clash, err := net.InterfaceByName(vmtest.IBLink)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const name, peerName = "rdsz0", "rdsz1"
	// A pair deleted by an earlier run (-count) may hold the index for a
	// moment: EBUSY.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err = ns.Do(func() error {
			return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, Index: clash.Index}, PeerName: peerName})
		})
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("veth pair %s/%s with index %d in %s: %v", name, peerName, clash.Index, vmtest.PeerNamespaceName, err)
	}
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close) // after the deletion below: cleanups run last first
	t.Cleanup(func() {
		if err := h.DeleteLink(name); err != nil && !errors.Is(err, netlinkcfg.ErrNotFound) {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	for _, l := range []string{name, peerName} {
		if err := h.SetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	addr := netip.MustParseAddr("fe80::44:1")
	if idx := addAddr(t, ns, name, netip.PrefixFrom(addr, 64)); idx != clash.Index {
		t.Fatalf("%s has index %d in %s, want %d", name, idx, vmtest.PeerNamespaceName, clash.Index)
	}
	t.Logf("index %d: %s in %s, %s here", clash.Index, name, vmtest.PeerNamespaceName, clash.Name)
	want := netip.AddrPortFrom(addr.WithZone(strconv.Itoa(clash.Index)), port())
	c := listenPeer(t, want, nil)
	if got := c.LocalAddrPort(); got != want {
		t.Fatalf("LocalAddrPort = %v, want %v (zone by index)", got, want)
	}
	if got := c.LocalAddr().String(); got != want.String() {
		t.Fatalf("LocalAddr = %v, want %v", got, want)
	}
}
