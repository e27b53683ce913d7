package rdssock_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/go-rds/rds/rdssock"
)

// The kernel's statistics are global to the host; print the non-zero ones.
func ExampleConn_Counters() {
	c, err := rdssock.Socket(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	counters, err := c.Counters()
	if err != nil {
		log.Fatal(err)
	}
	for _, ct := range counters {
		if ct.Value != 0 {
			fmt.Println(ct.Name, ct.Value)
		}
	}
}

// Count the messages a bound socket has sent that its peers' kernels have
// not yet acknowledged.
func ExampleConn_Messages() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ms, err := c.Messages(rdssock.RetransmitQueue)
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.Local == c.LocalAddrPort() {
			n++
		}
	}
	fmt.Println(n, "unacknowledged")
}

// List the RDS sockets of the network namespace with their buffers.
func ExampleConn_Sockets() {
	c, err := rdssock.Socket(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	socks, err := c.Sockets()
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range socks {
		fmt.Println(s.Bound, s.SendBuffer, s.ReceiveBuffer)
	}
}

// Show how many bytes each RDS/TCP path has still to send.
func ExampleConn_TCPSockets() {
	c, err := rdssock.Socket(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	tcps, err := c.TCPSockets()
	if err != nil {
		log.Fatal(err) // rds_tcp not loaded: ENOPROTOOPT
	}
	for _, s := range tcps {
		fmt.Println(s.Local, "->", s.Peer, s.HeaderRemaining+s.DataRemaining)
	}
}

// Show the queue limits of each InfiniBand or RoCE connection.
func ExampleConn_IBConnections() {
	c, err := rdssock.Socket(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ibs, err := c.IBConnections()
	if err != nil {
		log.Fatal(err) // rds_rdma not loaded: ENOPROTOOPT
	}
	for _, ib := range ibs {
		fmt.Println(ib.Source, "->", ib.Dest, ib.MaxSendWR, ib.MaxRecvWR)
	}
}
