//go:build linux

package rdssock_test

import (
	"fmt"
	"log"
	"net/netip"

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
