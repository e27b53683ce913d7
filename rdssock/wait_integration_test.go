//go:build integration

package rdssock_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// TestIntegrationWaiting: how Conns wait, over RDS/TCP, the echo side
// created in the peer namespace through Config.NetNS: request/response in
// order (reads sleeping in the kernel), a read deadline, a canceled
// context and Close each end a waiting read (parked in the runtime poller
// after kernelSlice), and a send waiting for a congested port goes through
// once the receiver reads (the congestion monitor's notice wakes it).
func TestIntegrationWaiting(t *testing.T) {
	vmtest.Require(t)
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	echo, err := rdssock.Listen(netip.AddrPortFrom(vmtest.TCPPeer4, 0), &rdssock.Config{NetNS: ns.FD(), ReceiveBuffer: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	c, err := rdssock.Listen(netip.AddrPortFrom(vmtest.TCPLocal4, 0), &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := echo.LocalAddrPort()

	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, _, from, err := echo.ReadMsg(buf, nil)
			if err != nil {
				done <- err
				return
			}
			if string(buf[:n]) == "stop" {
				done <- nil
				return
			}
			if _, err := echo.WriteMsg(buf[:n], nil, from); err != nil {
				done <- err
				return
			}
		}
	}()
	buf := make([]byte, 64)
	const rounds = 2000
	for i := 0; i < rounds; i++ {
		req := []byte{byte(i), byte(i >> 8)}
		if _, err := c.WriteMsg(req, nil, to); err != nil {
			t.Fatalf("round trip %d: send: %v", i, err)
		}
		n, _, _, from, err := c.ReadMsg(buf, nil)
		if err != nil || from != to || n != 2 || buf[0] != req[0] || buf[1] != req[1] {
			t.Fatalf("round trip %d: got %x from %v, %v; want %x from %v", i, buf[:n], from, err, req, to)
		}
	}
	if _, err := c.WriteMsg([]byte("stop"), nil, to); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("echo: %v", err)
	}

	// A deadline ends a waiting read.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, _, _, err := c.ReadMsg(buf, nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsg with a 50ms deadline and nothing to read: %v; want os.ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Time{})
	// So does a canceled context.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, _, _, _, err := c.ReadMsgContext(ctx, buf, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadMsgContext canceled after 50ms: %v; want context.Canceled", err)
	}

	// A send to a congested port waits until the receiver reads (the
	// echo side no longer reads: its receive buffer fills).
	big := make([]byte, 8<<10)
	sent := 0
	for ; sent < 1000; sent++ {
		if _, err := c.WriteMsgContext(context.Background(), big, nil, to, unix.MSG_DONTWAIT); err != nil {
			if !errors.Is(err, rdssock.ErrCongested) && !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("filling the receiver: %v", err)
			}
			break
		}
	}
	wdone := make(chan error, 1)
	go func() {
		_, err := c.WriteMsg(big, nil, to)
		wdone <- err
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-wdone:
		t.Logf("the send went through before the receiver read (%v): the port was not congested after %d messages", err, sent)
	default:
		rbuf := make([]byte, len(big))
		go func() {
			for {
				if _, _, _, _, err := echo.ReadMsg(rbuf, nil); err != nil {
					return
				}
			}
		}()
		select {
		case err := <-wdone:
			if err != nil {
				t.Fatalf("waiting send after the receiver read: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("send still waiting 20s after the receiver started reading")
		}
	}

	// Close ends a waiting read.
	rerr := make(chan error, 1)
	go func() {
		_, _, _, _, err := c.ReadMsg(buf, nil)
		rerr <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-rerr:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadMsg waiting while the socket closed: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadMsg still waiting 5s after Close")
	}
}

// TestIntegrationBlockingSoloRead: a read (ReadMsg, or ReadBatch's
// recvmmsg) sleeping in the receive itself over
// RDS (here its loopback transport) is woken by a message, a deadline
// change, a context's end and Close. RDS restarts an interrupted receive,
// so without the wake-up's O_NONBLOCK the read would sleep on for the
// scenario's 20 s slice (see rdssock.BlockingSoloReadScenario).
func TestIntegrationBlockingSoloRead(t *testing.T) {
	vmtest.Require(t)
	for _, batch := range []bool{false, true} {
		for _, skip := range []bool{false, true} {
			t.Run(rdssock.SoloReadName(batch, skip), func(t *testing.T) {
				a, b := listenLoopback(t), listenLoopback(t)
				rdssock.BlockingSoloReadScenario(t, a, b, b.LocalAddrPort(), batch, skip)
			})
		}
	}
}

// listenLoopback returns a socket bound to the IPv4 loopback address on a
// port of the kernel's choice, closed when t ends.
func listenLoopback(t *testing.T) *rdssock.Conn {
	t.Helper()
	c, err := rdssock.Listen(netip.AddrPortFrom(vmtest.Loopback4, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
