//go:build linux

package rdssock_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// TestInstrRDMA is the Go side of integration/cmd/rdsinstr's count of an
// RDMA operation: with RDSINSTR_N set it issues that many RDMA WRITEs of
// 4 KiB with 16 bytes of immediate data with rdmaops.Conn.Do on fd 3, one
// every RDSINSTR_USEC microseconds, each followed by its completion
// notice, handled with HandleControl as a read of the socket would, and
// Conn.Wait, which finds it complete (all in oneRDMA). The socket is one end of an
// AF_UNIX SOCK_SEQPACKET pair: it carries the message and ignores the
// RDS control data, so what is counted is the library's own work. Run
// plainly, it checks that over a pair of its own.
func TestInstrRDMA(t *testing.T) {
	if n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N")); n > 0 {
		usec, _ := strconv.Atoi(os.Getenv("RDSINSTR_USEC"))
		issueRDMA(t, 3, n, time.Duration(usec)*time.Microsecond)
		return
	}
	fds := rdssock.InstrPairForTest(t)
	const n = 20
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 64)
		k := 0
		for ; k < n; k++ {
			if m, err := unix.Read(fds[1], buf); err != nil || m != 16 {
				break
			}
		}
		got <- k
	}()
	issueRDMA(t, fds[0], n, 0)
	if k := <-got; k != n {
		t.Fatalf("the other end received %d messages of 16 bytes, want %d", k, n)
	}
}

// TestInstrRDMARead is the Go side of integration/cmd/rdsinstr's count of
// a read through rdmaops (mode rdmaops), the passive side of an RDMA
// program reading immediate data: with RDSINSTR_N set it reads that many
// 64-byte messages from fd 3 with rdmaops.Conn.ReadMsg and a context with
// a deadline, as TestInstrReadWait reads with rdssock. Run plainly, it
// checks that over a pair of its own, fed by a paced goroutine.
func TestInstrRDMARead(t *testing.T) {
	if n, _ := strconv.Atoi(os.Getenv("RDSINSTR_N")); n > 0 {
		if os.Getenv("RDSINSTR_NOPARK") != "" {
			rdssock.NoParkForTest()
		}
		readRDMAWaiting(t, 3, n)
		return
	}
	const n = 20
	fd, sent := rdssock.PacedPairForTest(t, n)
	readRDMAWaiting(t, fd, n)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// readRDMAWaiting reads n 64-byte messages from fd, which it closes, with
// rdmaops.Conn.ReadMsg (see TestInstrRDMARead).
func readRDMAWaiting(t *testing.T, fd, n int) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil { // blocking, as the package makes them
		t.Fatalf("fd %d: %v", fd, err)
	}
	c := rdmaops.New(rdssock.ConnForTest(fd), nil, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	buf := make([]byte, 128)
	for i := range n {
		if m, err := c.ReadMsg(ctx, buf, nil); err != nil || m.N != 64 {
			t.Fatalf("message %d of %d: %d bytes, %v", i, n, m.N, err)
		}
	}
}

// issueRDMA issues n operations on fd, which it closes (see TestInstrRDMA).
func issueRDMA(t *testing.T, fd, n int, pace time.Duration) {
	t.Helper()
	if err := unix.SetNonblock(fd, false); err != nil { // blocking, as the package makes them
		t.Fatalf("fd %d: %v", fd, err)
	}
	c := rdmaops.New(rdssock.ConnForTest(fd), nil, nil)
	defer c.Close()
	region, err := rdmaops.NewRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	var imm [16]byte
	op := &rdmaops.Op{Write: true, Remote: cmsg.MakeCookie(1, 0), Local: []rdmaops.Span{region.Span(0, 4096)}, Payload: imm[:]}
	b := cmsg.NewBuilder(nil)
	b.RDMAStatus(cmsg.Notify{})
	notice, _ := b.Finish()
	for i := range n {
		time.Sleep(pace)
		if err := oneRDMA(c, op, notice); err != nil {
			t.Fatalf("operation %d of %d: %v", i, n, err)
		}
	}
}

// oneRDMA issues op with Do, hands the notice of its completion (notice,
// with its token written in) to HandleControl and waits for it with Wait:
// the function rdsinstr counts.
//
//go:noinline
func oneRDMA(c *rdmaops.Conn, op *rdmaops.Op, notice []byte) error {
	ctx := context.Background()
	tok, err := c.Do(ctx, netip.AddrPort{}, op)
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(notice[cmsg.HeaderLen:], uint64(tok)) // rds_rdma_notify's user_token
	if _, _, k, err := c.HandleControl(notice); err != nil || k != 1 {
		return fmt.Errorf("HandleControl = %d notices, %v", k, err)
	}
	if s, err := c.Wait(ctx, tok); err != nil || s != barrier.Success {
		return fmt.Errorf("Wait = %v, %v", s, err)
	}
	return nil
}
