//go:build integration

package rdmafaults

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestCloseInFlight closes an initiator while RDMA operations are in
// flight: 128 WRITEs and READs against a live key plus 8 operations queued
// for a peer that does not exist. Rounds 0 and 1 use rdmaops.Conn.Close,
// which must return at once and resolve every operation (success for the
// ones the kernel finished, canceled for the rest); round 2 closes only
// the socket underneath, so the tracker learns nothing and the
// operations' deadlines (3 s) must resolve them: reported timed out, but
// quarantined (the barrier holds, the region keeps its users) until the
// test tells the tracker the socket is gone (CompleteAll). A goroutine
// blocked in the barrier returns in every round. The owner of the registered memory
// then closes its Conn while its key is live: its region must refuse to
// unmap (the peer may still write into it) until the MR is freed. No
// goroutine or descriptor outlives the rounds.
func TestCloseInFlight(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()
	nowhere := netip.AddrPortFrom(netip.MustParseAddr("10.22.0.99"), 4000)
	settle := func() {
		runtime.GC()
		time.Sleep(500 * time.Millisecond)
	}
	settle()
	g0, fd0 := runtime.NumGoroutine(), countFDs(t)
	for round := range 3 {
		var c tally
		raw := round == 2
		p := newPair(t, ctx)
		creg := newRegion(t, 16*ps)
		mr, ck := p.register(t, ctx, creg.Span(0, 16*ps), cmsg.FlagReadWrite)
		sreg := newRegion(t, 16*ps)
		tr := p.server.c.Tracker()
		first := tr.Last() + 1
		dl := time.Now().Add(30 * time.Second)
		if raw {
			dl = time.Now().Add(3 * time.Second)
		}
		for i := range 128 {
			op := &rdmaops.Op{Write: i%2 == 0, Remote: ck, RemoteOffset: uint64(i%16) * uint64(ps), Local: []rdmaops.Span{sreg.Span((i%16)*ps, ps)}, Deadline: dl}
			if !op.Write {
				op.Flags = cmsg.FlagFence
			}
			if _, err := p.server.c.Do(ctx, p.client.addr(), op); err != nil {
				t.Fatalf("round %d: op %d: %v", round, i, err)
			}
		}
		for i := range 8 {
			if _, err := p.server.c.Do(ctx, nowhere, &rdmaops.Op{Write: true, Remote: ck, Local: []rdmaops.Span{sreg.Span(i*ps, ps)}, Deadline: dl}); err != nil {
				t.Fatalf("round %d: op to a missing peer: %v", round, err)
			}
		}
		last := tr.Last()
		waited := make(chan error, 1)
		go func() { waited <- tr.WaitAll(ctx, last) }()
		outstanding := tr.Outstanding()
		start := time.Now()
		var err error
		if raw {
			err = p.server.sock.Close()
		} else {
			err = p.server.c.Close()
		}
		took := time.Since(start)
		if err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if took > time.Second {
			t.Errorf("round %d: close took %v", round, took)
		}
		<-p.server.done // the receive loop saw the close
		limit := time.Second
		if raw {
			// Every op times out, none is released, the barrier holds.
			for wait := time.Now(); tr.Outstanding() != 0; time.Sleep(10 * time.Millisecond) {
				if time.Since(wait) > 5*time.Second {
					t.Fatalf("round %d: %d ops still pending 5s after the close", round, tr.Outstanding())
				}
			}
			q := tr.Stats().Quarantined
			select {
			case err := <-waited:
				t.Fatalf("round %d: barrier passed timed-out ops the kernel may still run (%v)", round, err)
			case <-time.After(200 * time.Millisecond):
			}
			if q == 0 || sreg.Users() != q || tr.HighWater() >= last {
				t.Fatalf("round %d: after the deadlines: %d quarantined, region users %d, mark %d (last %d)", round, q, sreg.Users(), tr.HighWater(), last)
			}
			t.Logf("round %d: %d ops timed out and quarantined; the socket is closed: CompleteAll", round, q)
			tr.CompleteAll(barrier.Canceled)
		}
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("round %d: barrier: %v", round, err)
			}
		case <-time.After(limit):
			t.Fatalf("round %d: barrier still blocked %v after the close; %d outstanding", round, limit, tr.Outstanding())
		}
		resolved := time.Since(start)
		for tok := first; tok <= last; tok++ {
			st := tr.Status(tok)
			if !st.Done() {
				t.Fatalf("round %d: op %d is %v after the close", round, tok, st)
			}
			c.add(st)
		}
		if tr.Outstanding() != 0 || tr.HighWater() < last {
			t.Fatalf("round %d: %d outstanding, mark %d, last %d", round, tr.Outstanding(), tr.HighWater(), last)
		}
		if raw && c.timeout == 0 {
			t.Errorf("round %d: closing the bare socket, no op timed out: %+v", round, c)
		}
		if !raw && c.canceled == 0 {
			t.Errorf("round %d: Conn.Close canceled nothing: %+v", round, c)
		}
		if sreg.Users() != 0 {
			t.Fatalf("round %d: initiator region has %d users after every op resolved", round, sreg.Users())
		}
		if err := sreg.Close(); err != nil {
			t.Fatalf("round %d: unmap the initiator's region: %v", round, err)
		}
		// The owner closes while its key is live.
		p.client.close()
		if err := creg.Close(); !errors.Is(err, rdmaops.ErrBusy) {
			t.Fatalf("round %d: unmap of a region with a live registration after Close: %v, want ErrBusy", round, err)
		}
		if err := mr.Free(); err != nil {
			t.Fatalf("round %d: Free after Close: %v", round, err)
		}
		if err := creg.Close(); err != nil {
			t.Fatalf("round %d: unmap after Free: %v", round, err)
		}
		p.server.close()
		how := "rdmaops.Conn.Close"
		if raw {
			how = "socket Close under the Conn (deadlines 3s)"
		}
		out := fmt.Sprintf("%s with %d of %d ops outstanding returned in %v; all resolved in %v", how, outstanding, c.ops, took.Round(time.Microsecond), resolved.Round(time.Millisecond))
		t.Log(out)
		reliability(t, fmt.Sprintf("close-in-flight/round%d", round), c, out)
	}
	settle()
	g1, fd1 := runtime.NumGoroutine(), countFDs(t)
	t.Logf("goroutines %d -> %d, descriptors %d -> %d", g0, g1, fd0, fd1)
	if g1 > g0 || fd1 != fd0 {
		buf := make([]byte, 1<<16)
		t.Fatalf("leak: goroutines %d -> %d, descriptors %d -> %d\n%s", g0, g1, fd0, fd1, buf[:runtime.Stack(buf, true)])
	}
}
