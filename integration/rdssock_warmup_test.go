//go:build integration

package integration

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

// noHost is an address in the RDS/TCP topology's subnet that no host has:
// RDS/TCP connections to it never come up, so pings to it go unanswered.
var noHost = netip.MustParseAddr("10.11.0.250")

// TestIntegrationRdssockWarmUpBounds checks how a Conn's automatic warm-up
// treats a peer that never answers: a send's write deadline, its context
// and MSG_DONTWAIT end the wait without sending; a send without a limit
// goes ahead once the warm-up gives up (counted in WarmUpTimeouts), and
// later sends there and pings do not wait at all.
func TestIntegrationRdssockWarmUpBounds(t *testing.T) {
	vmtest.Require(t)
	c, err := rdssock.Listen(netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.AddrPortFrom(noHost, 4000)
	msg := []byte("into the void")

	c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	start := time.Now()
	if _, err := c.WriteMsg(msg, nil, to); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteMsg with a 300ms write deadline to an unanswering peer: %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("WriteMsg with a 300ms write deadline returned after %v", took)
	}
	c.SetWriteDeadline(time.Time{})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = c.WriteMsgContext(ctx, msg, nil, to, 0)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteMsgContext with a 200ms context: %v, want context.DeadlineExceeded", err)
	}
	if _, err := c.WriteMsgContext(context.Background(), msg, nil, to, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("WriteMsgContext(MSG_DONTWAIT) during the warm-up: %v, want EAGAIN", err)
	}
	start = time.Now()
	if _, err := c.WriteMsg(nil, nil, netip.AddrPortFrom(noHost, 0)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a ping (port 0) waited %v for the warm-up", took)
	}
	if n := c.WarmUpTimeouts(); n != 0 {
		t.Fatalf("WarmUpTimeouts = %d before the warm-up's bound, want 0", n)
	}

	start = time.Now()
	if _, err := c.WriteMsg(msg, nil, to); err != nil {
		t.Fatalf("WriteMsg without a limit: %v, want the send to go ahead once the warm-up gives up", err)
	}
	took := time.Since(start)
	if n := c.WarmUpTimeouts(); n != 1 {
		t.Errorf("WarmUpTimeouts = %d after the warm-up gave up, want 1", n)
	}
	start = time.Now()
	if _, err := c.WriteMsg(msg, nil, to); err != nil {
		t.Fatalf("second WriteMsg: %v", err)
	}
	if again := time.Since(start); again > time.Second {
		t.Errorf("the second send waited %v: the warm-up ran again", again)
	}
	t.Logf("first send to an unanswering peer went ahead after %v", took.Round(time.Millisecond))
}

// TestIntegrationRdssockWarmUpShared checks that concurrent first sends of
// one Conn to one peer share a single warm-up: the peer's kernel receives
// one round of warm-up pings, not one per send, and every message
// arrives once.
func TestIntegrationRdssockWarmUpShared(t *testing.T) {
	vmtest.Require(t)
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	r, err := rdssock.Listen(netip.AddrPortFrom(vmtest.TCPPeer4, port()), &rdssock.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := rdssock.Listen(netip.AddrPortFrom(vmtest.TCPLocal4, port()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pings := func() uint64 {
		cs, err := c.Counters()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range cs {
			if x.Name == "recv_ping" {
				return x.Value
			}
		}
		t.Fatal("no recv_ping counter")
		return 0
	}
	before := pings()
	const senders = 8
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.WriteMsgContext(ctx, []byte{byte(i)}, nil, r.LocalAddrPort(), 0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent first send: %v", err)
		}
	}
	got := pings() - before
	// The connection is up already (TestMain), so one warm-up needs one
	// round of 4 pings (a few more if an answer takes over 200ms and a
	// socket pings again); a warm-up per send would be at least 32.
	if got < 4 || got >= 16 {
		t.Errorf("the kernel received %d RDS pings for %d concurrent first sends, want one warm-up's (4, fewer than 16)", got, senders)
	}
	seen := make(map[byte]bool)
	buf := make([]byte, 16)
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(seen) < senders {
		n, _, _, from, err := r.ReadMsg(buf, nil)
		if err != nil {
			t.Fatalf("receive after %d of %d: %v", len(seen), senders, err)
		}
		if n != 1 || from != c.LocalAddrPort() || seen[buf[0]] {
			t.Fatalf("unexpected message %x from %v (seen %v)", buf[:n], from, seen)
		}
		seen[buf[0]] = true
	}
	t.Logf("%d concurrent first sends, %d RDS pings received", senders, got)
}
