//go:build linux

package rdmaops

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestReadingRoleHandOff: goroutines that find the reading role taken
// wait for it and get it in turn; none is left waiting while it is free,
// and one whose context ends gives up.
func TestReadingRoleHandOff(t *testing.T) {
	c := &Conn{}
	c.rd.init()
	const goroutines, rounds = 8, 2000
	var inside, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if !c.tryRead() && !c.awaitRead(nil) {
					t.Error("awaitRead without a context gave up")
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Errorf("%d goroutines hold the reading role", inside)
				}
				total++
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				c.release()
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatalf("goroutines still waiting for a free reading role after 20s (%d of %d turns)", total, goroutines*rounds)
	}
	if c.rd.queued.Load() != 0 || c.wantLoad() != 0 || c.rd.busy.Load() {
		t.Errorf("after the turns: queued %d, want %d, busy %v", c.rd.queued.Load(), c.wantLoad(), c.rd.busy.Load())
	}

	// Held: a waiter whose context ends gives up.
	if !c.tryRead() {
		t.Fatal("the free role could not be taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool)
	go func() { got <- c.awaitRead(ctx) }()
	cancel()
	if <-got {
		t.Error("awaitRead got the role while it was held")
	}
	c.release()
	if !c.tryRead() {
		t.Error("the role could not be taken after the waiter gave up")
	}
}
