//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// addAddr puts p on link in ns (nil: this namespace) and returns the
// link's index (vmtest.AddAddr); it fails the test if it cannot.
func addAddr(t *testing.T, ns *netlinkcfg.Namespace, link string, p netip.Prefix) int {
	t.Helper()
	idx, err := vmtest.AddAddr(ns, link, p)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestIntegrationRowsLinkLocal binds and sends with IPv6 link-local
// addresses and zones over the veth pair between the namespaces (RDS/TCP).
// The sender address a message reports carries the zone of the interface it
// arrived on: its name when the socket lives in the process's namespace,
// its index when it lives in another one (names there cannot be looked up).
func TestIntegrationRowsLinkLocal(t *testing.T) {
	vmtest.Require(t)
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	local, peer := netip.MustParseAddr("fe80::11:1"), netip.MustParseAddr("fe80::11:2")
	localIdx := addAddr(t, nil, vmtest.TCPLink, netip.PrefixFrom(local, 64))
	peerIdx := addAddr(t, ns, vmtest.TCPPeerLink, netip.PrefixFrom(peer, 64))
	t.Logf("%s index %d, %s (peer namespace) index %d", vmtest.TCPLink, localIdx, vmtest.TCPPeerLink, peerIdx)

	// Without a zone the kernel refuses the bind with EINVAL, and the
	// library says why.
	s, err := rdssock.Socket(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Bind(netip.AddrPortFrom(local, port()))
	if !errors.Is(err, unix.EINVAL) || !bytes.Contains([]byte(err.Error()), []byte("link-local address needs a zone")) {
		t.Fatalf("bind %v without a zone: %v; want EINVAL saying a zone is needed", local, err)
	}
	t.Logf("bind without zone: %v", err)

	aAddr := netip.AddrPortFrom(local.WithZone(vmtest.TCPLink), port())
	a := listen(t, aAddr, nil)
	if got := a.LocalAddrPort(); got != aAddr {
		t.Fatalf("LocalAddrPort %v, want %v", got, aAddr)
	}
	// In the peer namespace the zone is given by index: the name rdstcp1
	// does not exist in this process's namespace.
	bAddr := netip.AddrPortFrom(peer.WithZone(strconv.Itoa(peerIdx)), port())
	b := listenPeer(t, bAddr, nil)
	wantConnTransport(t, a, rdssock.TransportTCP)
	wantConnTransport(t, b, rdssock.TransportTCP)

	msg := []byte("link-local a to b")
	if _, err := a.WriteMsg(msg, nil, netip.AddrPortFrom(peer.WithZone(vmtest.TCPLink), bAddr.Port())); err != nil {
		t.Fatal(err)
	}
	got, from := readMsg(t, b)
	wantFrom := netip.AddrPortFrom(local.WithZone(strconv.Itoa(peerIdx)), aAddr.Port())
	if !bytes.Equal(got, msg) || from != wantFrom {
		t.Fatalf("peer received %q from %v; want %q from %v", got, from, msg, wantFrom)
	}
	t.Logf("peer namespace socket: message from %v", from)

	msg = []byte("link-local b to a")
	if _, err := b.WriteMsg(msg, nil, netip.AddrPortFrom(local.WithZone(strconv.Itoa(peerIdx)), aAddr.Port())); err != nil {
		t.Fatal(err)
	}
	got, from = readMsg(t, a)
	wantFrom = netip.AddrPortFrom(peer.WithZone(vmtest.TCPLink), bAddr.Port())
	if !bytes.Equal(got, msg) || from != wantFrom {
		t.Fatalf("received %q from %v; want %q from %v", got, from, msg, wantFrom)
	}
	t.Logf("initial namespace socket: message from %v", from)
}

// TestIntegrationRowsTCP6 runs RDS/TCP over IPv6 ULA addresses between the
// namespaces both ways and finds the connection in the IPv6 info tables.
func TestIntegrationRowsTCP6(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal6, port()), nil)
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer6, port()), nil)
	wantConnTransport(t, a, rdssock.TransportTCP)
	wantConnTransport(t, b, rdssock.TransportTCP)
	exchangeConns(t, a, b)

	conns, err := a.Connections()
	if err != nil {
		t.Fatal(err)
	}
	var found *rdssock.Connection
	for i, c := range conns {
		if c.Local == vmtest.TCPLocal6 && c.Remote == vmtest.TCPPeer6 {
			found = &conns[i]
		}
	}
	if found == nil || found.Transport != "tcp" || !found.Connected || found.NextTxSeq < 2 || found.NextRxSeq < 2 {
		t.Fatalf("RDS6_INFO_CONNECTIONS: %v -> %v is %+v in %+v", vmtest.TCPLocal6, vmtest.TCPPeer6, found, conns)
	}
	t.Logf("connection %+v", *found)

	socks, err := a.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	var sock *rdssock.SocketInfo
	for i, s := range socks {
		if s.Bound == a.LocalAddrPort() {
			sock = &socks[i]
		}
	}
	if sock == nil {
		t.Fatalf("RDS6_INFO_SOCKETS has no socket bound to %v: %+v", a.LocalAddrPort(), socks)
	}

	tcps, err := a.TCPSockets()
	if err != nil {
		t.Fatal(err)
	}
	var tcp *rdssock.TCPSocket
	for i, s := range tcps {
		if s.Local.Addr() == vmtest.TCPLocal6 && s.Peer.Addr() == vmtest.TCPPeer6 {
			tcp = &tcps[i]
		}
	}
	if tcp == nil || (tcp.Local.Port() != 16385 && tcp.Peer.Port() != 16385) {
		t.Fatalf("RDS6_INFO_TCP_SOCKETS: no TCP socket %v <-> %v on port 16385: %+v", vmtest.TCPLocal6, vmtest.TCPPeer6, tcps)
	}
	t.Logf("TCP socket %+v", *tcp)
}

// waitIBAddr waits until a socket bound to addr with the IB transport
// forced binds, or fails the test after limit with the last refusal.
func waitIBAddr(t *testing.T, addr netip.Addr, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		c, err := rdssock.Listen(netip.AddrPortFrom(addr, 0), &rdssock.Config{Transport: rdssock.TransportIB})
		if err == nil {
			c.Close()
			t.Logf("%v takes the IB transport after %v", addr, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > limit {
			t.Fatalf("%v still refused by the IB transport after %v: %v", addr, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIntegrationRowsIB6 uses RDS over IPv6 addresses on the rxe device's
// netdev.
func TestIntegrationRowsIB6(t *testing.T) {
	vmtest.Require(t)
	a, b := ib6Pair(t)
	wantConnTransport(t, b, rdssock.TransportIB)
	x, y := a.LocalAddrPort().Addr(), b.LocalAddrPort().Addr()
	exchangeConns(t, a, b)
	ibs, err := a.IBConnections()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range ibs {
		if c.Source == x && c.Dest == y || c.Source == y && c.Dest == x {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("RDS6_INFO_IB_CONNECTIONS has no %v <-> %v row: %+v", x, y, ibs)
	}
	t.Logf("%d IPv6 IB connection rows for %v <-> %v", n, x, y)
}

// TestIntegrationRowsConnectWrite checks the default-destination path.
func TestIntegrationRowsConnectWrite(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)

	if a.RemoteAddr() != nil {
		t.Fatalf("RemoteAddr before Connect = %v, want nil", a.RemoteAddr())
	}
	if n, err := a.Write([]byte("nowhere")); n != 0 || !errors.Is(err, unix.EDESTADDRREQ) {
		t.Fatalf("Write before Connect = %d, %v; want 0, EDESTADDRREQ", n, err)
	} else {
		t.Logf("Write before Connect: %v", err)
	}
	if err := a.Connect(b.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	if ra := a.RemoteAddr(); ra == nil || ra.String() != b.LocalAddrPort().String() || ra.Network() != "rds" {
		t.Fatalf("RemoteAddr = %v, want rds %v", ra, b.LocalAddrPort())
	}
	const rcvbuf = 96 << 10
	if err := a.SetReadBuffer(rcvbuf); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReadBuffer(); err != nil || got != 2*rcvbuf {
		t.Fatalf("ReadBuffer after SetReadBuffer(%d) = %d, %v; want %d", rcvbuf, got, err, 2*rcvbuf)
	}

	for i := range 3 {
		msg := []byte(fmt.Sprintf("connected write %d", i))
		if n, err := a.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		got, from := readMsg(t, b)
		if !bytes.Equal(got, msg) || from != a.LocalAddrPort() {
			t.Fatalf("peer got %q from %v; want %q from %v", got, from, msg, a.LocalAddrPort())
		}
		reply := []byte(fmt.Sprintf("reply %d", i))
		if _, err := b.WriteMsg(reply, nil, a.LocalAddrPort()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, src, err := a.ReadFrom(buf)
		if err != nil || !bytes.Equal(buf[:n], reply) || src.String() != b.LocalAddrPort().String() {
			t.Fatalf("ReadFrom = %q from %v, %v; want %q from %v", buf[:n], src, err, reply, b.LocalAddrPort())
		}
	}
	// WriteMsg with a zero address also uses the default destination.
	if _, err := a.WriteMsg([]byte("zero address"), nil, netip.AddrPort{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readMsg(t, b); string(got) != "zero address" {
		t.Fatalf("peer got %q", got)
	}
	socks, err := a.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range socks {
		if s.Bound == a.LocalAddrPort() {
			// The table shows half of SO_RCVBUF (rds_sk_rcvbuf): the value set.
			if s.ReceiveBuffer != rcvbuf || s.Connected != b.LocalAddrPort() {
				t.Fatalf("RDS_INFO_SOCKETS row %+v; want receive buffer %d, connected to %v", s, rcvbuf, b.LocalAddrPort())
			}
			t.Logf("socket row %+v", s)
			return
		}
	}
	t.Fatalf("RDS_INFO_SOCKETS has no row for %v", a.LocalAddrPort())
}

// TestIntegrationRowsRxPathLatency reads RDS_CMSG_RXPATH_LATENCY over RDS/IB
// and RDS/TCP, whose receive paths stamp every point (net/rds/ib_recv.c,
// tcp_recv.c and recv.c): point 0 header to start of reassembly, point 1
// reassembly until queued on the socket, point 2 queued until recvmsg.
func TestIntegrationRowsRxPathLatency(t *testing.T) {
	vmtest.Require(t)
	cfg := &rdssock.Config{
		RxPathLatency: []cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered},
	}
	t.Run("ib", func(t *testing.T) {
		a := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), nil)
		b := listen(t, netip.AddrPortFrom(vmtest.IBAddr2, port()), cfg)
		checkRxPathLatency(t, a, b)
	})
	t.Run("tcp", func(t *testing.T) {
		a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
		b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), cfg)
		checkRxPathLatency(t, a, b)
	})
}

func checkRxPathLatency(t *testing.T, a, b *rdssock.Conn) {
	t.Helper()
	const msgs, hold = 5, 200 * time.Millisecond
	buf, oob := make([]byte, 4096), make([]byte, cmsg.MaxReceiveSpace)
	for i := range msgs {
		sent := time.Now()
		if _, err := a.WriteMsg(bytes.Repeat([]byte{byte(i)}, 3000), nil, b.LocalAddrPort()); err != nil {
			t.Fatal(err)
		}
		// Wait until the message is queued, then let it sit there: point 2
		// must include the hold and cannot exceed the time since sending.
		if _, _, _, _, err := b.ReadMsgContext(context.Background(), buf, oob, unix.MSG_PEEK); err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
		n, oobn, _, _, err := b.ReadMsg(buf, oob)
		elapsed := time.Since(sent)
		if err != nil || n != 3000 {
			t.Fatalf("ReadMsg = %d, %v", n, err)
		}
		var tr *cmsg.RxTrace
		p := cmsg.NewParser(oob[:oobn])
		for {
			m, err := p.Next()
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if r, err := m.RxPathLatency(); err == nil {
				tr = &r
			}
		}
		if tr == nil {
			t.Fatalf("message %d: no RDS_CMSG_RXPATH_LATENCY in %d control bytes", i, oobn)
		}
		t.Logf("message %d: %d points %v latencies %v %v %v", i, tr.Count, tr.Points, tr.Latency[0], tr.Latency[1], tr.Latency[2])
		if tr.Count != 3 || tr.Points != [3]cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered} {
			t.Fatalf("trace %+v; want 3 points 0, 1, 2", *tr)
		}
		if d := tr.Latency[0]; d <= 0 || d > time.Second {
			t.Errorf("point 0 (header to reassembly start) = %v; want (0, 1s]", d)
		}
		if d := tr.Latency[1]; d <= 0 || d > 10*time.Second {
			t.Errorf("point 1 (reassembly until queued) = %v; want (0, 10s]", d)
		}
		if d := tr.Latency[2]; d < hold || d > elapsed {
			t.Errorf("point 2 (queued until recvmsg) = %v; want between the %v hold and the %v since sending", d, hold, elapsed)
		}
	}
}

// TestIntegrationRowsZeroCopyCoalesced sends several MSG_ZEROCOPY messages
// before reading any completion; the kernel then packs up to eight cookies
// into one RDS_CMSG_ZCOPY_COMPLETION.
func TestIntegrationRowsZeroCopyCoalesced(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), &rdssock.Config{ZeroCopy: true})
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	// 16 messages of 4 KiB stay below the receiver's congestion threshold.
	const msgs = 16
	payload := bytes.Repeat([]byte{0xa5}, 4096)
	for i := range msgs {
		bld := cmsg.NewBuilder(make([]byte, 0, cmsg.ZeroCopyCookieSpace))
		bld.ZeroCopyCookie(uint32(1000 + i))
		oob, err := bld.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.WriteMsgContext(context.Background(), payload, oob, b.LocalAddrPort(), unix.MSG_ZEROCOPY); err != nil {
			t.Fatalf("MSG_ZEROCOPY send %d: %v", i, err)
		}
	}
	for range msgs {
		if got, _ := readMsg(t, b); !bytes.Equal(got, payload) {
			t.Fatal("payload differs")
		}
	}
	seen := map[uint32]int{}
	var sizes []int
	buf, oob := make([]byte, 64), make([]byte, cmsg.MaxReceiveSpace)
	for total := 0; total < msgs; {
		n, oobn, _, _, err := a.ReadMsg(buf, oob)
		if err != nil {
			t.Fatalf("after %d cookies: %v", total, err)
		}
		if n != 0 {
			t.Fatalf("unexpected %d-byte message", n)
		}
		p := cmsg.NewParser(oob[:oobn])
		m, err := p.Next()
		if err != nil {
			t.Fatal(err)
		}
		z, err := m.ZeroCopyCompletion()
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, z.N)
		for _, c := range z.List() {
			seen[c]++
		}
		total += z.N
	}
	t.Logf("%d completion messages carrying %v cookies", len(sizes), sizes)
	for i := range msgs {
		if seen[uint32(1000+i)] != 1 {
			t.Errorf("cookie %d came back %d times", 1000+i, seen[uint32(1000+i)])
		}
	}
	if len(seen) != msgs {
		t.Errorf("%d distinct cookies, want %d: %v", len(seen), msgs, seen)
	}
	if len(sizes) >= msgs {
		t.Errorf("no completion carried more than one cookie: %v", sizes)
	}
	for _, s := range sizes {
		if s < 1 || s > cmsg.MaxZeroCopyCookies {
			t.Errorf("completion with %d cookies; want 1..%d", s, cmsg.MaxZeroCopyCookies)
		}
	}
}

// ib6Pair puts the IPv6 ULAs fd22::1 and fd22::2 on the rxe device's
// netdev and returns a socket bound to each, the first checked to be
// RDS/IB. A new IPv6 address reaches the rxe device's GID table only after
// duplicate address detection; until then the IB transport refuses it and
// bind picks TCP, so it waits until IB takes both.
func ib6Pair(t *testing.T) (*rdssock.Conn, *rdssock.Conn) {
	t.Helper()
	x, y := netip.MustParseAddr("fd22::1"), netip.MustParseAddr("fd22::2")
	for _, addr := range []netip.Addr{x, y} {
		addAddr(t, nil, vmtest.IBLink, netip.PrefixFrom(addr, 64))
	}
	for _, addr := range []netip.Addr{x, y} {
		waitIBAddr(t, addr, 10*time.Second)
	}
	a := listen(t, netip.AddrPortFrom(x, port()), nil)
	b := listen(t, netip.AddrPortFrom(y, port()), nil)
	wantConnTransport(t, a, rdssock.TransportIB)
	return a, b
}
