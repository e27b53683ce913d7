//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// TestDeadlineMovedWakesRead: a receive waiting with no deadline returns
// when another goroutine sets one in the past, and a receive waiting with a
// distant deadline returns at a nearer one set while it waits.
func TestDeadlineMovedWakesRead(t *testing.T) {
	a, b := pair(t)
	for _, first := range []time.Time{{}, time.Now().Add(time.Hour)} {
		if err := b.SetReadDeadline(first); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if err := b.SetReadDeadline(start.Add(30 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("waiting ReadMsg after SetReadDeadline: %v; want os.ErrDeadlineExceeded", err)
			}
			if d := time.Since(start); d < 25*time.Millisecond {
				t.Fatalf("ReadMsg returned %v after the new deadline was set, before it passed", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadMsg (first deadline %v) still waiting 5s after a 30ms deadline was set", first)
		}
	}
	// The socket still receives once the deadline is cleared.
	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteMsg([]byte("later"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "later" {
		t.Fatalf("ReadMsg after clearing the deadline = %q, %v; want \"later\", nil", buf[:n], err)
	}
}

// TestCloseUnblocksReadsWithAndWithoutContext: Close wakes every waiting
// receive, with and without a context, and each returns net.ErrClosed.
func TestCloseUnblocksReadsWithAndWithoutContext(t *testing.T) {
	_, b := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 4)
	for i := range 4 {
		go func() {
			c := context.Background()
			if i%2 == 1 {
				c = ctx
			}
			_, _, _, _, err := b.ReadMsgContext(c, make([]byte, 8), nil, 0)
			errc <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	for range 4 {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("waiting ReadMsg after Close: %v; want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a ReadMsg still waiting 5s after Close")
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close still running 5s after the reads returned")
	}
}

// TestAllocWaitingRead: a receive that finds nothing and waits for the
// peer's answer allocates nothing, with or without a context, whether it
// sleeps in ppoll or parks in the runtime poller (GOMAXPROCS 1: a sleep
// there would hold the only P).
func TestAllocWaitingRead(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; allocation counts are meaningless")
	}
	for _, procs := range []int{4, 1} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer setGOMAXPROCS(procs)()
			testAllocWaitingRead(t)
		})
	}
}

func testAllocWaitingRead(t *testing.T) {
	a, b := pair(t)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, _, _, err := b.ReadMsg(buf, nil)
			if err != nil {
				return
			}
			time.Sleep(50 * time.Microsecond) // the other side waits
			if _, err := b.WriteMsg(buf[:n], nil, noAddr); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req, resp := make([]byte, 64), make([]byte, 64)
	for _, c := range []context.Context{context.Background(), ctx} {
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := a.WriteMsg(req, nil, noAddr); err != nil {
				t.Fatal(err)
			}
			if _, _, _, _, err := a.ReadMsgContext(c, resp, nil, 0); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("a round trip whose receive waits (context %v) allocated %v times; want 0", c, allocs)
		}
	}
}
