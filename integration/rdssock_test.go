//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/internal/rdsinfo"
	"github.com/go-rds/rds/rdssock"
)

// nextPort hands out distinct RDS ports so tests never collide.
var nextPort atomic.Uint32

func port() uint16 { return uint16(20000 + nextPort.Add(1)) }

func listen(t *testing.T, ap netip.AddrPort, cfg *rdssock.Config) *rdssock.Conn {
	t.Helper()
	c, err := rdssock.Listen(ap, cfg)
	if err != nil {
		t.Fatalf("Listen(%v): %v", ap, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(recvWait))
	return c
}

// listenPeer binds a socket inside the peer namespace.
func listenPeer(t *testing.T, ap netip.AddrPort, cfg *rdssock.Config) *rdssock.Conn {
	t.Helper()
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	var c2 rdssock.Config
	if cfg != nil {
		c2 = *cfg
	}
	c2.NetNS = ns.FD()
	return listen(t, ap, &c2)
}

func readMsg(t *testing.T, c *rdssock.Conn) ([]byte, netip.AddrPort) {
	t.Helper()
	buf := make([]byte, 1<<16)
	n, _, _, from, err := c.ReadMsg(buf, nil)
	if err != nil {
		t.Fatalf("ReadMsg on %v: %v", c.LocalAddr(), err)
	}
	return buf[:n], from
}

func wantConnTransport(t *testing.T, c *rdssock.Conn, want rdssock.Transport) {
	t.Helper()
	got, err := c.Transport()
	if err != nil || got != want {
		t.Fatalf("Transport() of %v = %v, %v; want %v", c.LocalAddr(), got, err, want)
	}
}

// exchange sends one message each way between a and b and checks bytes and
// sender addresses.
func exchangeConns(t *testing.T, a, b *rdssock.Conn) {
	t.Helper()
	for i, dir := range []struct{ from, to *rdssock.Conn }{{a, b}, {b, a}} {
		msg := []byte(fmt.Sprintf("message %d from %v", i, dir.from.LocalAddrPort()))
		if n, err := dir.from.WriteMsg(msg, nil, dir.to.LocalAddrPort()); err != nil || n != len(msg) {
			t.Fatalf("WriteMsg %v -> %v = %d, %v", dir.from.LocalAddrPort(), dir.to.LocalAddrPort(), n, err)
		}
		got, from := readMsg(t, dir.to)
		if !bytes.Equal(got, msg) {
			t.Fatalf("received %q, want %q", got, msg)
		}
		if from != dir.from.LocalAddrPort() {
			t.Fatalf("sender %v, want %v", from, dir.from.LocalAddrPort())
		}
	}
}

func TestIntegrationRdssockTCPAcrossNamespaces(t *testing.T) {
	vmtest.Require(t)
	for _, tc := range []struct {
		name        string
		local, peer netip.Addr
	}{
		{"IPv4", vmtest.TCPLocal4, vmtest.TCPPeer4},
		{"IPv6", vmtest.TCPLocal6, vmtest.TCPPeer6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := listen(t, netip.AddrPortFrom(tc.local, port()), nil)
			b := listenPeer(t, netip.AddrPortFrom(tc.peer, port()), nil)
			wantConnTransport(t, a, rdssock.TransportTCP)
			wantConnTransport(t, b, rdssock.TransportTCP)
			exchangeConns(t, a, b)
		})
	}
}

func TestIntegrationRdssockLoopback(t *testing.T) {
	vmtest.Require(t)
	for _, addr := range []netip.Addr{vmtest.Loopback4, vmtest.Loopback6} {
		t.Run(addr.String(), func(t *testing.T) {
			a := listen(t, netip.AddrPortFrom(addr, port()), nil)
			b := listen(t, netip.AddrPortFrom(addr, port()), nil)
			wantConnTransport(t, a, rdssock.TransportLoop)
			exchangeConns(t, a, b)
		})
	}
}

func TestIntegrationRdssockIB(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), nil)
	b := listen(t, netip.AddrPortFrom(vmtest.IBAddr2, port()), nil)
	wantConnTransport(t, a, rdssock.TransportIB)
	exchangeConns(t, a, b)

	// The same rxe address can be forced onto TCP.
	c := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), &rdssock.Config{Transport: rdssock.TransportTCP})
	wantConnTransport(t, c, rdssock.TransportTCP)
}

// A zero-copy completion arrives as a message of 0 data bytes that carries
// only an RDS_CMSG_ZCOPY_COMPLETION: it must be read as a message.
func TestIntegrationRdssockControlOnlyMessage(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), &rdssock.Config{ZeroCopy: true})
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)

	const cookie = 0xC0FFEE
	oob := make([]byte, cmsg.ZeroCopyCookieSpace)
	bld := cmsg.NewBuilder(oob[:0])
	bld.ZeroCopyCookie(cookie)
	oob, err := bld.Finish()
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{0x5a}, 8192)
	if _, err := a.WriteMsgContext(context.Background(), payload, oob, b.LocalAddrPort(), unix.MSG_ZEROCOPY); err != nil {
		t.Fatalf("MSG_ZEROCOPY send: %v", err)
	}
	if got, _ := readMsg(t, b); !bytes.Equal(got, payload) {
		t.Fatalf("peer received %d bytes, want the %d-byte payload", len(got), len(payload))
	}
	// The completion comes back once the TCP layer released the pages.
	buf, roob := make([]byte, 64), make([]byte, cmsg.MaxReceiveSpace)
	n, oobn, _, from, err := a.ReadMsg(buf, roob)
	if err != nil {
		t.Fatalf("ReadMsg for the completion: %v", err)
	}
	if n != 0 || oobn == 0 {
		t.Fatalf("completion read as %d data bytes and %d control bytes; want 0 and >0", n, oobn)
	}
	if from.IsValid() {
		t.Errorf("a notice has no sender, got %v", from)
	}
	p := cmsg.NewParser(roob[:oobn])
	m, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	z, err := m.ZeroCopyCompletion()
	if err != nil {
		t.Fatalf("control message %+v: %v", m, err)
	}
	if z.N != 1 || z.Cookies[0] != cookie {
		t.Fatalf("completion %+v; want cookie %#x", z, cookie)
	}
	if _, err := p.Next(); err != io.EOF {
		t.Fatalf("more control data after the completion: %v", err)
	}
}

func TestIntegrationRdssockPing(t *testing.T) {
	vmtest.Require(t)
	c := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	dst := netip.AddrPortFrom(vmtest.TCPPeer4, 0)
	for i := range 3 {
		if _, err := c.WriteMsg(nil, nil, dst); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		got, from := readMsg(t, c)
		if len(got) != 0 || from != dst {
			t.Fatalf("ping %d reply: %d bytes from %v; want 0 bytes from %v", i, len(got), from, dst)
		}
	}
}

// echo knows only net.PacketConn.
func echo(pc net.PacketConn, n int) error {
	buf := make([]byte, 2048)
	for range n {
		m, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if _, err := pc.WriteTo(bytes.ToUpper(buf[:m]), addr); err != nil {
			return err
		}
	}
	return nil
}

func TestIntegrationRdssockPacketConn(t *testing.T) {
	vmtest.Require(t)
	srv := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	cli := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	done := make(chan error, 1)
	go func() { done <- echo(srv, 3) }()
	var pc net.PacketConn = cli
	to := &rdssock.Addr{AddrPort: srv.LocalAddrPort()}
	for _, w := range []string{"alpha", "beta", "gamma"} {
		if _, err := pc.WriteTo([]byte(w), to); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if string(buf[:n]) != strings.ToUpper(w) || from.String() != to.String() || from.Network() != "rds" {
			t.Fatalf("echo of %q = %q from %v (%s)", w, buf[:n], from, from.Network())
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("echo server: %v", err)
	}
}

func counter(t *testing.T, cs []rdssock.Counter, name string) uint64 {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("no counter %q among %d counters", name, len(cs))
	return 0
}

// TestIntegrationRdssockInfoTables reads every table kind with an IPv4 and
// an IPv6 RDS/TCP connection and an IPv4 IB connection present: each
// method lists both families, IPv4 addresses unmapped, and the kernel's
// RDS6 tables (read raw) list the IPv4 peers as IPv4-mapped addresses.
func TestIntegrationRdssockInfoTables(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	a6 := listen(t, netip.AddrPortFrom(vmtest.TCPLocal6, port()), nil)
	b6 := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer6, port()), nil)
	ib1 := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), nil)
	ib2 := listen(t, netip.AddrPortFrom(vmtest.IBAddr2, port()), nil)

	before, err := a.Counters()
	if err != nil {
		t.Fatal(err)
	}
	const msgs = 10
	for i := range msgs {
		if _, err := a.WriteMsg([]byte{byte(i)}, nil, b.LocalAddrPort()); err != nil {
			t.Fatal(err)
		}
		readMsg(t, b)
	}
	exchangeConns(t, a6, b6)
	exchangeConns(t, ib1, ib2)
	after, err := a.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if d := counter(t, after, "recv_delivered") - counter(t, before, "recv_delivered"); d < msgs {
		t.Errorf("recv_delivered rose by %d after %d messages", d, msgs)
	}

	// Connections: both families, IPv4 ones unmapped.
	find := func(conns []rdssock.Connection, l, r netip.Addr) *rdssock.Connection {
		for i, c := range conns {
			if c.Local == l && c.Remote == r {
				return &conns[i]
			}
		}
		return nil
	}
	conns, err := a.Connections()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if c.Local.Is4In6() || c.Remote.Is4In6() {
			t.Errorf("Connections: IPv4-mapped row %+v", c)
		}
	}
	for _, p := range [][2]netip.Addr{{vmtest.TCPLocal4, vmtest.TCPPeer4}, {vmtest.TCPLocal6, vmtest.TCPPeer6}} {
		if c := find(conns, p[0], p[1]); c == nil || c.Transport != "tcp" || !c.Connected {
			t.Errorf("Connections: TCP connection %v -> %v is %+v in %+v", p[0], p[1], c, conns)
		}
	}
	if c := find(conns, vmtest.IBAddr1, vmtest.IBAddr2); c == nil || c.Transport != "infiniband" {
		t.Errorf("Connections: IB connection %v -> %v is %+v", vmtest.IBAddr1, vmtest.IBAddr2, c)
	}
	// The raw RDS6 table lists the IPv4 connections as IPv4-mapped rows.
	rc, err := a.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	data, each, err := rdsinfo.Read(rc, rdsinfo.Connections6, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw6, err := rdsinfo.ParseConnections(data, each, true)
	if err != nil {
		t.Fatal(err)
	}
	mapped := false
	for _, c := range raw6 {
		mapped = mapped || c.Local == netip.AddrFrom16(vmtest.TCPLocal4.As16()) && c.Remote == netip.AddrFrom16(vmtest.TCPPeer4.As16())
	}
	if !mapped {
		t.Errorf("RDS6_INFO_CONNECTIONS has no IPv4-mapped row for %v -> %v: %+v", vmtest.TCPLocal4, vmtest.TCPPeer4, raw6)
	}
	t.Logf("%d connections; the RDS6 table has %d rows", len(conns), len(raw6))

	// Sockets: both families, unmapped, and an unbound socket.
	unbound, err := rdssock.Socket(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unbound.Close()
	socks, err := a.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []netip.AddrPort{a.LocalAddrPort(), a6.LocalAddrPort()} {
		found := false
		for _, s := range socks {
			found = found || s.Bound == want && s.SendBuffer > 0 && s.Inode != 0
		}
		if !found {
			t.Errorf("Sockets lacks %v: %+v", want, socks)
		}
	}
	found := false
	for _, s := range socks {
		found = found || s.Bound == netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	}
	if !found {
		t.Errorf("Sockets lacks the unbound socket ([::]:0): %+v", socks)
	}

	// TCP sockets: a path of each family.
	tcps, err := a.TCPSockets()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]netip.Addr{{vmtest.TCPLocal4, vmtest.TCPPeer4}, {vmtest.TCPLocal6, vmtest.TCPPeer6}} {
		found := false
		for _, s := range tcps {
			found = found || s.Local.Addr() == p[0] && s.Peer.Addr() == p[1] || s.Local.Addr() == p[1] && s.Peer.Addr() == p[0]
		}
		if !found {
			t.Errorf("TCPSockets lacks the %v-%v path: %+v", p[0], p[1], tcps)
		}
	}

	ibs, err := a.IBConnections()
	if err != nil {
		t.Fatal(err)
	}
	found = false
	for _, c := range ibs {
		found = found || c.Source == vmtest.IBAddr1 && c.Dest == vmtest.IBAddr2 && c.MaxSendWR > 0
	}
	if !found {
		t.Errorf("IBConnections lacks %v -> %v: %+v", vmtest.IBAddr1, vmtest.IBAddr2, ibs)
	}

	// Messages: one unread message of each family in the receive queue.
	for _, from := range []*rdssock.Conn{a, a6} {
		to := listen(t, netip.AddrPortFrom(from.LocalAddrPort().Addr(), port()), nil)
		msg := []byte("left unread")
		if _, err := from.WriteMsg(msg, nil, to.LocalAddrPort()); err != nil {
			t.Fatal(err)
		}
		var ms []rdssock.QueuedMessage
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			ms, err = a.Messages(rdssock.ReceiveQueue)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(ms, func(m rdssock.QueuedMessage) bool {
				return m.Local == to.LocalAddrPort() && m.Remote == from.LocalAddrPort() && m.Len == uint32(len(msg))
			})
			if i >= 0 {
				t.Logf("receive queue row %+v", ms[i])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("receive queue lacks %v -> %v (%d bytes): %+v", from.LocalAddrPort(), to.LocalAddrPort(), len(msg), ms)
			}
		}
	}
	// A message to an address nobody answers (10.11.0.99 is on the TCP
	// link's subnet, unassigned) waits on the send queue while RDS/TCP
	// tries to connect; the queue lists it with its IPv4 addresses. The
	// IPv4 send table is logged for comparison: the kernel fills its
	// addresses from the wrong bytes (see info_linux.go).
	held := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	nowhere := netip.AddrPortFrom(netip.MustParseAddr("10.11.0.99"), port())
	if _, err := held.WriteMsg([]byte("held"), nil, nowhere); err != nil {
		t.Fatal(err)
	}
	var queued []rdssock.QueuedMessage
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if queued, err = a.Messages(rdssock.SendQueue); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(queued, func(m rdssock.QueuedMessage) bool {
			return m.Local == held.LocalAddrPort() && m.Remote == nowhere && m.Len == 4
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("send queue lacks %v -> %v: %+v", held.LocalAddrPort(), nowhere, queued)
		}
	}
	data, each, err = rdsinfo.Read(rc, rdsinfo.SendMessages, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw4, err := rdsinfo.ParseMessages(data, each, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("send queue: %+v; the IPv4 send table: %+v", queued, raw4)
	for _, q := range []rdssock.MessageQueue{rdssock.SendQueue, rdssock.RetransmitQueue} {
		if _, err := a.Messages(q); err != nil {
			t.Errorf("Messages(%d): %v", q, err)
		}
	}
	if _, err := a.Messages(rdssock.MessageQueue(7)); err == nil {
		t.Error("Messages(7) succeeded")
	}

	// Every table the header names can be read raw or gives a documented
	// error.
	for _, tb := range rdsinfo.Tables() {
		data, each, err := rdsinfo.Read(rc, tb, make([]byte, 0, 1)) // tiny buffer: exercises ENOSPC growth
		switch {
		case err == nil:
			if each <= 0 || len(data)%each != 0 {
				t.Errorf("%v: %d bytes with row size %d", tb, len(data), each)
			}
		case tb == rdsinfo.ConnectionStats || tb == rdsinfo.IWARPConnections:
			if !errors.Is(err, unix.ENOPROTOOPT) {
				t.Errorf("%v: %v; want ENOPROTOOPT (no provider in mainline)", tb, err)
			}
		default:
			t.Errorf("%v: %v", tb, err)
		}
	}
}

func TestIntegrationRdssockErrors(t *testing.T) {
	vmtest.Require(t)
	// No address: EADDRNOTAVAIL with advice.
	_, err := rdssock.Listen(netip.MustParseAddrPort("10.99.99.99:1"), nil)
	if !errors.Is(err, unix.EADDRNOTAVAIL) || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("bind to an absent address: %v", err)
	}
	// IB forced where there is no RDMA device.
	_, err = rdssock.Listen(netip.AddrPortFrom(vmtest.Loopback4, port()), &rdssock.Config{Transport: rdssock.TransportIB})
	if !errors.Is(err, rdssock.ErrTransportUnavailable) {
		t.Errorf("IB on 127.0.0.1: %v; want ErrTransportUnavailable", err)
	}
	// Link-local IPv6 without a zone.
	_, err = rdssock.Listen(netip.MustParseAddrPort("[fe80::1]:1"), nil)
	if err == nil {
		t.Error("bind to fe80::1 without a zone succeeded")
	}
	// Unbound sockets report no transport; the transport is fixed at bind.
	s, err := rdssock.Socket(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tr, err := s.Transport(); err != nil || tr != rdssock.TransportNone {
		t.Errorf("unbound Transport() = %v, %v; want none", tr, err)
	}
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	// Too large for the send buffer.
	if err := a.SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	_, err = a.WriteMsg(make([]byte, 200<<10), nil, netip.AddrPortFrom(vmtest.TCPPeer4, 1))
	if !errors.Is(err, rdssock.ErrMessageTooLarge) || !strings.Contains(err.Error(), "SendBuffer") {
		t.Errorf("oversized send: %v; want ErrMessageTooLarge with advice", err)
	}
	// RDMA on TCP is not supported. The local vector must be real memory:
	// the kernel pins it before it looks at the transport.
	local := make([]byte, 4096)
	vec := rdsabi.Iovec{Addr: uint64(uintptr(unsafe.Pointer(&local[0]))), Bytes: uint64(len(local))}
	oob := make([]byte, cmsg.RDMAArgsSpace)
	bld := cmsg.NewBuilder(oob[:0])
	bld.RDMAArgs(cmsg.RDMAArgs{
		Cookie:       cmsg.MakeCookie(1, 0),
		Remote:       cmsg.IOVec{Addr: 0, Bytes: uint64(len(local))},
		LocalVecAddr: uint64(uintptr(unsafe.Pointer(&vec))),
		NumLocal:     1,
		Flags:        rdsabi.RDMAReadWrite,
	})
	oob, _ = bld.Finish()
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	_, err = a.WriteMsg([]byte("x"), oob, b.LocalAddrPort())
	runtime.KeepAlive(local)
	runtime.KeepAlive(&vec)
	if !errors.Is(err, rdssock.ErrNotSupported) {
		t.Errorf("RDMA_DEST on TCP: %v; want ErrNotSupported", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Net != "rds" || oe.Op != "write" {
		t.Errorf("%#v is not a *net.OpError{Net: rds, Op: write}", err)
	}
}

func TestIntegrationRdssockTruncation(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), nil)
	b := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), nil)
	if _, err := a.WriteMsg([]byte("0123456789"), nil, b.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	n, _, flags, from, err := b.ReadMsg(buf, nil)
	if !errors.Is(err, rdssock.ErrTruncated) || n != 4 || string(buf) != "0123" || flags&unix.MSG_TRUNC == 0 || from != a.LocalAddrPort() {
		t.Fatalf("truncated read: n=%d %q flags=%#x from=%v err=%v", n, buf[:n], flags, from, err)
	}
}

func TestIntegrationRdssockOptions(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.IBAddr1, port()), &rdssock.Config{
		RecvErr: true, CongestionMonitor: true, Timestamps: true, SendBuffer: 1 << 20, ReceiveBuffer: 1 << 20, ForceBuffers: true,
		RxPathLatency: []cmsg.TracePoint{cmsg.TraceHdrToDgramStart, cmsg.TraceDgramDelivered},
		TOS:           2,
	})
	if on, err := sockoptInt(a, rdsabi.SOL, rdsabi.OptRecvErr); err != nil || on != 1 {
		t.Errorf("RDS_RECVERR = %v, %v; want 1", on, err)
	}
	if on, err := sockoptInt(a, unix.SOL_SOCKET, unix.SO_TIMESTAMP); err != nil || on != 1 {
		t.Errorf("SO_TIMESTAMP = %v, %v; want 1", on, err)
	}
	if tos, err := a.TOS(); err != nil || tos != 2 {
		t.Errorf("TOS() = %d, %v; want 2", tos, err)
	}
	if sb, err := a.WriteBuffer(); err != nil || sb < 1<<20 {
		t.Errorf("WriteBuffer() = %d, %v", sb, err)
	}
	b := listen(t, netip.AddrPortFrom(vmtest.IBAddr2, port()), nil)
	if _, err := b.WriteMsg([]byte("stamp me"), nil, a.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 64), make([]byte, cmsg.MaxReceiveSpace)
	n, oobn, _, _, err := a.ReadMsg(buf, oob)
	if err != nil || string(buf[:n]) != "stamp me" {
		t.Fatalf("ReadMsg = %q, %v", buf[:n], err)
	}
	var sawTime, sawTrace bool
	for p := cmsg.NewParser(oob[:oobn]); ; {
		m, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if tv, err := m.Timestamp(); err == nil {
			sawTime = true
			if d := time.Since(time.Unix(tv.Sec, tv.Usec*1000)); d < 0 || d > time.Minute {
				t.Errorf("receive timestamp %v is %v away from now", tv, d)
			}
		}
		if tr, err := m.RxPathLatency(); err == nil {
			sawTrace = tr.Count == 2
		}
	}
	if !sawTime || !sawTrace {
		t.Errorf("control data %x: timestamp %v, 2-point rx trace %v; want both", oob[:oobn], sawTime, sawTrace)
	}
	if err := a.CancelSentTo(b.LocalAddrPort()); err != nil {
		t.Errorf("CancelSentTo: %v", err)
	}
	if err := a.SetTOS(3); err == nil {
		t.Error("second SetTOS succeeded; the kernel allows one")
	}
}

func TestIntegrationRdssockDeadlineAndContext(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), nil)
	a.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, _, _, err := a.ReadMsg(make([]byte, 8), nil); !errors.Is(err, unix.ETIMEDOUT) && !isTimeout(err) {
		t.Errorf("ReadMsg past deadline: %v", err)
	}
	a.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, _, _, err := a.ReadMsgContext(ctx, make([]byte, 8), nil, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReadMsgContext past deadline: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestIntegrationAllocRdssock checks the zero-allocation promise on a real
// RDS socket: send and receive with control messages (timestamps) attached.
func TestIntegrationAllocRdssock(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), nil)
	b := listen(t, netip.AddrPortFrom(vmtest.Loopback4, port()), &rdssock.Config{Timestamps: true})
	to := b.LocalAddrPort()
	payload, buf, oob := make([]byte, 256), make([]byte, 512), make([]byte, cmsg.MaxReceiveSpace)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := a.WriteMsg(payload, nil, to); err != nil {
			t.Fatal(err)
		}
		if _, oobn, _, _, err := b.ReadMsg(buf, oob); err != nil || oobn == 0 {
			t.Fatalf("ReadMsg: oobn %d, %v", oobn, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteMsg+ReadMsg on AF_RDS allocated %v times per message; want 0", allocs)
	}
}

// TestIntegrationRdssockBatch sends and receives with sendmmsg/recvmmsg over
// RDS/TCP across namespaces, and checks the batch path allocates nothing.
func TestIntegrationRdssockBatch(t *testing.T) {
	vmtest.Require(t)
	a := listen(t, netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	b := listenPeer(t, netip.AddrPortFrom(vmtest.TCPPeer4, port()), nil)
	const batch = 16
	out, in := make([]rdssock.Message, batch), make([]rdssock.Message, batch)
	for i := range out {
		out[i] = rdssock.Message{Buffer: []byte(fmt.Sprintf("batched message %02d", i)), Addr: b.LocalAddrPort()}
		in[i].Buffer = make([]byte, 128)
	}
	roundTrip := func() {
		n, err := a.WriteBatch(context.Background(), out, 0)
		if err != nil || n != batch {
			t.Fatalf("WriteBatch = %d, %v; want %d", n, err, batch)
		}
		for got := 0; got < batch; {
			m, err := b.ReadBatch(context.Background(), in[got:], 0)
			if err != nil {
				t.Fatalf("ReadBatch: %v", err)
			}
			got += m
		}
	}
	roundTrip()
	for i := range in {
		if got := in[i].Buffer[:in[i].N]; !bytes.Equal(got, out[i].Buffer) || in[i].Addr != a.LocalAddrPort() {
			t.Fatalf("message %d: %q from %v; want %q from %v", i, got, in[i].Addr, out[i].Buffer, a.LocalAddrPort())
		}
	}
	if allocs := testing.AllocsPerRun(50, roundTrip); allocs != 0 {
		t.Fatalf("a batch of %d over RDS/TCP allocated %v times; want 0", batch, allocs)
	}
}

// sockoptInt reads an integer socket option of c as the kernel holds it.
func sockoptInt(c *rdssock.Conn, level, opt int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		return 0, err
	}
	return v, gerr
}
