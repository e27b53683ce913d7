//go:build linux

package rdssock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"syscall"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdssock"
)

// Ask the kernel how long each message spent on the receive path, and
// decode the report with package cmsg.
func ExampleConfig_rxPathLatency() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), &rdssock.Config{
		RxPathLatency: []cmsg.TracePoint{cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf, oob := make([]byte, 1<<16), make([]byte, cmsg.MaxReceiveSpace)
	_, oobn, _, _, err := c.ReadMsg(buf, oob)
	if err != nil {
		log.Fatal(err)
	}
	p := cmsg.NewParser(oob[:oobn])
	for {
		m, err := p.Next()
		if err != nil {
			break // io.EOF at the end
		}
		if t, err := m.RxPathLatency(); err == nil {
			for i := range int(t.Count) {
				fmt.Printf("%v: %v\n", t.Points[i], t.Latency[i])
			}
		}
	}
}

// Look at the next message without taking it (MSG_PEEK), giving up after
// a second; a plain receive then takes it.
func ExampleConn_ReadMsgContext() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	buf := make([]byte, 1<<16)
	n, _, _, from, err := c.ReadMsgContext(ctx, buf, nil, syscall.MSG_PEEK)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("nothing within a second")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("next: %d bytes from %v\n", n, from)
	if _, _, _, _, err := c.ReadMsgContext(ctx, buf, nil, 0); err != nil {
		log.Fatal(err)
	}
}

// Send without waiting: with MSG_DONTWAIT a full send buffer is an EAGAIN
// error instead of a wait.
func ExampleConn_WriteMsgContext() {
	c, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("10.0.0.2:4000")
	_, err = c.WriteMsgContext(context.Background(), []byte("now or never"), nil, peer, syscall.MSG_DONTWAIT)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, rdssock.ErrCongested) {
		fmt.Println("busy; try later")
	} else if err != nil {
		log.Fatal(err)
	}
}
