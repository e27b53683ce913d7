//go:build linux

package rdmaops

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-rds/rds/barrier"
)

// Region.Close races with operations taking the region as their memory:
// an operation either gets the region before Close (which then refuses
// with ErrBusy) or is refused by a closed region; Close never unmaps memory
// an operation holds. Run with -race: reading the memory's address must
// not race with the unmap.
func TestRegionCloseRacesWithUse(t *testing.T) {
	c := New(nil, nil, nil)
	defer c.tr.Close()
	for round := range 200 {
		r, err := NewRegion(4096)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Span(0, 64)
		var held atomic.Int32 // operations holding the region now
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				rec, err := c.newRecord(s)
				if err != nil {
					if !errors.Is(err, ErrBadOp) || r.state.Load()&regionClosed == 0 {
						t.Errorf("round %d: refused with %v while the region is open", round, err)
					}
					return
				}
				held.Add(1)
				if s.addr() == 0 {
					t.Errorf("round %d: no address for a held span", round)
				}
				held.Add(-1)
				rec.Release(barrier.Completion{})
			}
		}()
		for {
			err := r.Close()
			if err == nil {
				if n := held.Load(); n != 0 {
					t.Fatalf("round %d: region unmapped while %d operations hold it", round, n)
				}
				break
			}
			if !errors.Is(err, ErrBusy) {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if _, err := c.newRecord(s); !errors.Is(err, ErrBadOp) {
			t.Fatalf("round %d: a closed region was taken: %v", round, err)
		}
		if r.Users() != 0 || s.Bytes() != nil || r.Bytes() != nil {
			t.Fatalf("round %d: closed region: %d users, span bytes %v", round, r.Users(), s.Bytes() != nil)
		}
	}
}

// Pool.Lookup reads buffers' cookies while re-registration (Fail, use-once
// returns, Confirm) replaces them. Run with -race.
func TestPoolLookupRacesWithRekey(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 2, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stop, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		close(started)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range p.Len() {
				if b := p.Buffer(i); p.Lookup(b.Cookie()) == nil && b.State() == Available {
					// A key replaced between the two reads: fine.
					continue
				}
			}
		}
	}()
	<-started
	for range 2000 {
		b, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Fail(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if reg.regs != 2002 {
		t.Fatalf("%d registrations, want 2 + 2000", reg.regs)
	}
}
