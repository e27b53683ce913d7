//go:build integration && rdsfaultlab

package twovmfaults

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdmaops"
)

// TestLinkFlapDuringRDMA: the peer VM registers 16 pages and announces the
// cookie; the main VM streams RDMA WRITEs and READs into them (up to 16
// outstanding, each with a 5 s deadline) and takes its link down for 3 s
// in the middle. Asserted: every operation completes exactly once
// (success or a failure status; none stays pending past its deadline) and
// the barrier covers them all. Measured and logged: whether and when new
// operations succeed after the link is back, asking the owner for its key
// again (the owner reopens its socket after 5 s of silence).
func TestLinkFlapDuringRDMA(t *testing.T) {
	vmtest.Require(t)
	if !vmtest.TwoVMs() {
		t.Fatal("this package must run in two VMs: its rdsvm.json asks for them; was it started through rdsvm?")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	remote := netip.AddrPortFrom(vmtest.RemoteAddr4(), port)
	if vmtest.Role() == vmtest.RolePeer {
		owner(t, ctx, remote, port, 5*time.Second)
		return
	}
	initiator(t, ctx, remote)
}

func initiator(t *testing.T, ctx context.Context, peer netip.AddrPort) {
	ps := os.Getpagesize()
	var mu sync.Mutex
	completions := map[barrier.Token]int{}
	tr := barrier.New(&barrier.Config{Capacity: 8192, Timeout: 5 * time.Second, OnComplete: func(c barrier.Completion) {
		mu.Lock()
		completions[c.Token]++
		mu.Unlock()
	}})
	defer tr.Close()
	e := newEnd(t, tr, port)
	closed := false
	defer func() {
		if !closed {
			e.closeWithin(20 * time.Second)
		}
	}()

	dead := map[cmsg.Cookie]bool{}
	key := func(limit time.Duration) (cmsg.Cookie, bool) {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			e.sock.WriteMsgContext(ctx, []byte("key?"), nil, peer, 0)
			select {
			case m := <-e.msgs:
				if m.hasDest && !dead[m.dest] {
					return m.dest, true
				}
			case <-time.After(time.Second):
			}
		}
		return 0, false
	}
	start := time.Now()
	e.sock.WriteMsgContext(ctx, []byte("hello"), nil, peer, 0)
	ck, ok := key(90 * time.Second)
	if !ok {
		t.Fatal("no key from the peer VM within 90 s")
	}
	t.Logf("key %v from the peer after %v", ck, time.Since(start))
	local, err := rdmaops.NewRegion(16 * ps)
	if err != nil {
		t.Fatal(err)
	}
	fillPattern := func(b []byte, v byte) {
		for i := range b {
			b[i] = v
		}
	}
	fillPattern(local.Bytes(), 0x77)
	do := func(i int) (barrier.Token, error) {
		op := &rdmaops.Op{Write: i%2 == 0, Remote: ck, RemoteOffset: uint64(i%16) * uint64(ps), Local: []rdmaops.Span{local.Span((i%16)*ps, ps)}, Payload: []byte("op")}
		if !op.Write {
			op.Flags = cmsg.FlagFence
		}
		return e.c.Do(ctx, peer, op)
	}
	// Baseline.
	for i := range 16 {
		tok, err := do(i)
		if err != nil {
			t.Fatalf("baseline op %d: %v", i, err)
		}
		if st, err := tr.Wait(ctx, tok); err != nil || st != barrier.Success {
			t.Fatalf("baseline op %d: %v %v", i, st, err)
		}
	}
	firstFlap := tr.Last() + 1

	h, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := h.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()

	// Stream with a window of 16 while the link goes down for 3 s.
	var sendErrs int
	var firstSendErr error
	stop := make(chan struct{})
	streamDone := make(chan int)
	go func() {
		n := 0
		for i := 0; ; i++ {
			select {
			case <-stop:
				streamDone <- n
				return
			default:
			}
			for tr.Outstanding() >= 16 {
				time.Sleep(2 * time.Millisecond)
			}
			if _, err := do(i); err != nil {
				mu.Lock()
				sendErrs++
				if firstSendErr == nil {
					firstSendErr = err
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
			n++
		}
	}()
	time.Sleep(500 * time.Millisecond)
	downAt := time.Now()
	if err := nh.SetDown(vmtest.TwoVMLink); err != nil {
		t.Fatalf("link down: %v", err)
	}
	time.Sleep(3 * time.Second)
	if err := nh.SetUp(vmtest.TwoVMLink); err != nil {
		t.Fatalf("link up: %v", err)
	}
	upAt := time.Now()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	issued := <-streamDone
	lastFlap := tr.Last()
	if err := tr.WaitAll(ctx, lastFlap); err != nil {
		t.Fatalf("barrier over the flap: %v (mark %d, last %d, %d outstanding)", err, tr.HighWater(), lastFlap, tr.Outstanding())
	}
	settled := time.Since(upAt)
	// OnComplete runs after the tracker's lock is released: give the
	// last callbacks a moment.
	for wait := time.Now(); time.Since(wait) < 2*time.Second; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := 0
		for tok := firstFlap; tok <= lastFlap; tok++ {
			if completions[tok] > 0 {
				n++
			}
		}
		mu.Unlock()
		if n == int(lastFlap-firstFlap+1) {
			break
		}
	}
	hist := map[barrier.Status]int{}
	mu.Lock()
	for tok := firstFlap; tok <= lastFlap; tok++ {
		if completions[tok] != 1 {
			t.Errorf("op %d completed %d times", tok, completions[tok])
		}
		hist[tr.Status(tok)]++
	}
	se, fse := sendErrs, firstSendErr
	mu.Unlock()
	if hw := tr.HighWater(); hw < lastFlap {
		t.Fatalf("mark %d below the last op %d", hw, lastFlap)
	}
	nops := int(lastFlap - firstFlap + 1)
	if nops != issued {
		t.Errorf("%d tokens for %d issued ops", nops, issued)
	}
	t.Logf("link down %v at +%v; %d ops, %d send errors (first %v); statuses %v; barrier passed %v after the link came up", 3*time.Second, downAt.Sub(start).Round(time.Millisecond), nops, se, fse, hist, settled.Round(time.Millisecond))

	// Recovery: new ops until one succeeds, each with a fresh key. The
	// key from before the flap is not used again: if the owner reopened
	// its socket it is dead, and a remote access error tears the new
	// connection down (see the package documentation). A key that fails
	// makes the owner register again ("rekey").
	recStart := time.Now()
	var rec map[barrier.Status]int = map[barrier.Status]int{}
	recOps := 0
	var okAt time.Duration
	dead[ck] = true
	for time.Since(recStart) < 45*time.Second {
		k, ok := key(3 * time.Second)
		if !ok {
			continue
		}
		ck = k
		tok, err := do(recOps)
		recOps++
		if err != nil {
			rec[barrier.NotSent]++
			time.Sleep(250 * time.Millisecond)
			continue
		}
		st, _ := tr.Wait(ctx, tok)
		rec[st]++
		if st == barrier.Success {
			okAt = time.Since(upAt)
			break
		}
		if st == barrier.RemoteError {
			dead[ck] = true
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			e.sock.WriteMsgContext(rctx, []byte("rekey"), nil, peer, 0)
			rcancel()
		}
	}
	reliability(t, "link-flap-3s", hist, nops, fmt.Sprintf("every op completed exactly once; barrier passed %v after link up", settled.Round(time.Millisecond)))
	reliability(t, "link-flap-3s/recovery", rec, recOps, fmt.Sprintf("first success %v after link up (0 = none within 45s)", okAt.Round(time.Millisecond)))
	if okAt == 0 {
		// Measured on Linux 6.1: the connection does not come back (see
		// the package documentation); logged, since the library cannot
		// change it.
		t.Logf("no successful RDMA within 45 s after the link came back; statuses %v", rec)
	}
	// Tell the peer to finish.
	for range 3 {
		bctx, bcancel := context.WithTimeout(ctx, time.Second)
		e.sock.WriteMsgContext(bctx, []byte("bye"), nil, peer, 0)
		bcancel()
		time.Sleep(200 * time.Millisecond)
	}
	if local.Users() != 0 {
		t.Errorf("local region has %d users after every op completed", local.Users())
	}
	closed = true
	if took, ok := e.closeWithin(20 * time.Second); !ok {
		t.Errorf("closing the socket did not finish within 20 s; blocked tasks: %s\ngoroutines:\n%s", strings.Join(dumpBlocked(), " / "), goroutines())
	} else {
		t.Logf("socket closed in %v", took.Round(time.Millisecond))
		local.Close()
	}
}
