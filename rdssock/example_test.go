package rdssock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"time"

	"github.com/go-rds/rds/rdssock"
)

// Send a datagram and read the reply. Both ends are plain bound sockets:
// RDS needs no connect or accept.
func ExampleListen() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	peer := netip.MustParseAddrPort("10.0.0.2:4000")
	if _, err := c.WriteMsg([]byte("ping"), nil, peer); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	n, _, _, from, err := c.ReadMsg(buf, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %v\n", buf[:n], from)
}

// Force RDS/TCP, allow 1 MiB messages, and have failed RDMA operations
// reported.
func ExampleListen_config() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("[fd00::1]:4000"), &rdssock.Config{
		Transport:     rdssock.TransportTCP,
		SendBuffer:    2 << 20,
		ReceiveBuffer: 4 << 20,
		RecvErr:       true,
	})
	if errors.Is(err, rdssock.ErrTransportUnavailable) {
		log.Fatal("load rds_tcp first: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t, _ := c.Transport()
	fmt.Println("transport:", t)
}

// Receive with control messages. A 0-byte message is a notification, for
// example an RDMA completion; decode oob[:oobn] with package cmsg.
func ExampleConn_ReadMsg() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf, oob := make([]byte, 1<<16), make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, from, err := c.ReadMsg(buf, oob)
	switch {
	case errors.Is(err, rdssock.ErrTruncated):
		log.Printf("message from %v cut to %d bytes", from, n)
	case err != nil:
		log.Fatal(err)
	case n == 0 && oobn > 0:
		log.Printf("notification: %d bytes of control data", oobn)
	default:
		log.Printf("%d bytes from %v", n, from)
	}
}

// An RDS ping: the kernel answers a 0-byte message to port 0 from port 0.
func ExampleConn_WriteMsg_ping() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:0"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.WriteMsg(nil, nil, netip.MustParseAddrPort("10.0.0.2:0")); err != nil {
		log.Fatal(err)
	}
	_, _, _, from, err := c.ReadMsg(make([]byte, 64), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reply from %v in %v\n", from, time.Since(start))
}

// Read the kernel's connection table; no bound address is needed.
func ExampleConn_Connections() {
	c, err := rdssock.Socket(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	conns, err := c.Connections()
	if err != nil {
		log.Fatal(err)
	}
	for _, cn := range conns {
		fmt.Println(cn.Local, cn.Remote, cn.Transport, cn.Connected)
	}
}

// Any code written against net.PacketConn works over RDS.
func ExampleConn_packetConn() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("127.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	var pc net.PacketConn = c
	defer pc.Close()
	to := &rdssock.Addr{AddrPort: netip.MustParseAddrPort("127.0.0.1:4000")}
	pc.WriteTo([]byte("to myself"), to)
}

// Bring a new RDS/TCP connection fully up ahead of time, within a limit
// of one's own, instead of at the first send (which a Conn does by itself
// unless Config.NoAutoWarmUp is set).
func ExampleWarmUp() {
	local, peer := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rdssock.WarmUp(ctx, local, peer, nil); err != nil {
		log.Fatal(err)
	}
	c, err := rdssock.Listen(netip.AddrPortFrom(local, 4000), &rdssock.Config{NoAutoWarmUp: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteMsg([]byte("first"), nil, netip.AddrPortFrom(peer, 4000)); err != nil {
		log.Fatal(err)
	}
}

// Send as fast as the receiver drains its queue: with WaitCongested a send
// to a congested port waits (up to the write deadline) instead of failing
// with ErrCongested.
func ExampleConfig_waitCongested() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), &rdssock.Config{WaitCongested: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("10.0.0.2:4000")
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	msg := make([]byte, 1024)
	for range 100000 {
		if _, err := c.WriteMsg(msg, nil, peer); err != nil {
			log.Fatal(err) // a timeout if the receiver stalled for 30 s
		}
	}
}

// How often a fast sender found its receiver's port congested: with
// WaitCongested those sends waited, and CongestedSends counts them.
func ExampleConn_CongestedSends() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), &rdssock.Config{WaitCongested: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("10.0.0.2:4000")
	msg := make([]byte, 1024)
	for range 100000 {
		if _, err := c.WriteMsg(msg, nil, peer); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%d of 100000 sends waited for a congested port\n", c.CongestedSends())
}

// A request/response client that busy-polls for the answer for up to
// 50 µs before it waits in the poller.
func ExampleConfig_busyPoll() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:0"), &rdssock.Config{BusyPoll: 50 * time.Microsecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	server := netip.MustParseAddrPort("10.0.0.2:4000")
	req, resp := []byte("status?"), make([]byte, 1024)
	if _, err := c.WriteMsg(req, nil, server); err != nil {
		log.Fatal(err)
	}
	n, _, _, _, err := c.ReadMsg(resp, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", resp[:n])
}

func ExampleConn_SetBusyPoll() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Spin only during a latency-critical phase.
	if err := c.SetBusyPoll(20 * time.Microsecond); err != nil {
		log.Fatal(err)
	}
	defer c.SetBusyPoll(0)
}
