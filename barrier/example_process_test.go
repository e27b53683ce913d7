//go:build linux

package barrier_test

import (
	"fmt"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
)

// Process takes the control bytes of a received message; here they are
// built by hand as the kernel would deliver them.
func ExampleTracker_Process() {
	tr := barrier.New(nil)
	tok := tr.Begin(barrier.Entry{})

	b := cmsg.NewBuilder(make([]byte, 0, cmsg.RDMAStatusSpace))
	b.RDMAStatus(cmsg.Notify{UserToken: uint64(tok), Status: cmsg.StatusSuccess})
	oob, _ := b.Finish() // in a program: oob[:oobn] from rdssock.Conn.ReadMsg

	n, err := tr.Process(oob)
	fmt.Println(n, err, tr.Status(tok), tr.HighWater())
	// Output: 1 <nil> success 1
}
