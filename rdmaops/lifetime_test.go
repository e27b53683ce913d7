//go:build linux

package rdmaops

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
)

// begin tracks an operation on spans as Do does, without a socket: the
// fake kernel is the test, which completes tokens by hand.
func begin(c *Conn, spans ...Span) barrier.Token {
	rec, err := c.newRecord(spans...)
	if err != nil {
		panic(err)
	}
	return c.tr.Begin(barrier.Entry{Release: rec})
}

// waitState waits for b to reach st (a re-registration runs in the
// background).
func waitState(t *testing.T, b *Buffer, st BufState) {
	t.Helper()
	for start := time.Now(); b.State() != st; {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("buffer %d is %v, want %v", b.Index(), b.State(), st)
		}
		time.Sleep(time.Millisecond)
	}
}

// poolLends reports whether TryGet lends b among all available buffers,
// returning every lent buffer.
func poolLends(p *Pool, b *Buffer) bool {
	var lent []*Buffer
	found := false
	for o := p.TryGet(); o != nil; o = p.TryGet() {
		lent = append(lent, o)
		found = found || o == b
	}
	for _, o := range lent {
		o.Release()
	}
	return found
}

// A pool buffer used as the local memory of an operation that timed out
// is handed back by its user at once (the timeout is how the user learns
// the peer did not answer) but is not lent again before the operation is
// released, by each of the three ways: the late status, CompleteAll (the
// socket closed), or a cancel of the destination. Its region keeps the
// operation as a user until then.
func TestPoolBufferQuarantinedUntilRelease(t *testing.T) {
	for _, how := range []string{"late status", "CompleteAll", "cancel"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			p, err := NewPool(ctx, new(fakeRegistrar), 3, 4096, cmsg.FlagReadWrite)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c := New(nil, nil, nil)
			defer c.tr.Close()
			b, _ := p.Get(ctx)
			tok := begin(c, b.Span())
			if p.region.Users() != 1 {
				t.Fatalf("region users %d with an operation in flight", p.region.Users())
			}
			c.tr.Complete(tok, barrier.TimedOut) // its deadline passed
			if err := b.Release(); err != nil {
				t.Fatal(err)
			}
			if b.State() != Quarantined || p.Stats().Quarantined != 1 || p.region.Users() != 1 {
				t.Fatalf("after the timeout: %v, stats %+v, region users %d", b.State(), p.Stats(), p.region.Users())
			}
			for range 3 {
				if poolLends(p, b) {
					t.Fatal("the pool lent a buffer whose operation is not released")
				}
			}
			if hw := c.tr.HighWater(); hw != 0 {
				t.Fatalf("mark %d past the quarantined operation", hw)
			}
			switch how {
			case "late status":
				c.tr.Complete(tok, barrier.Success)
			case "CompleteAll":
				c.tr.CompleteAll(barrier.Canceled)
			case "cancel":
				err := c.tr.Cancel(func() error {
					c.tr.Complete(tok, barrier.Canceled) // the kernel's report, read during the call
					if b.State() != Quarantined {
						t.Errorf("buffer %v while the cancel runs", b.State())
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if b.State() != Available || p.Stats().Quarantined != 0 || p.region.Users() != 0 || c.tr.HighWater() != tok {
				t.Fatalf("after the release: %v, stats %+v, region users %d, mark %d", b.State(), p.Stats(), p.region.Users(), c.tr.HighWater())
			}
			if !poolLends(p, b) {
				t.Fatal("released buffer not lent again")
			}
		})
	}
}

// A buffer handed back after its operation was released returns at once;
// one released by the operation only after the user handed it back
// returns then; Fail re-registers after the quarantine; Revoke and an
// unreleased operation both have to end.
func TestPoolBufferHolds(t *testing.T) {
	ctx := context.Background()
	reg := new(fakeRegistrar)
	p, err := NewPool(ctx, reg, 2, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := New(nil, nil, nil)
	defer c.tr.Close()

	b, _ := p.Get(ctx)
	tok := begin(c, b.Span().Slice(10, 20))
	c.tr.Complete(tok, barrier.Success)
	if err := b.Release(); err != nil || b.State() != Available {
		t.Fatalf("Release after the op's success: %v, %v", err, b.State())
	}

	// Two operations on one buffer; Fail while both are unreleased.
	b, _ = p.Get(ctx)
	old := b.Cookie()
	t1, t2 := begin(c, b.Span()), begin(c, b.Span())
	c.tr.Complete(t1, barrier.TimedOut)
	c.tr.Complete(t2, barrier.TimedOut)
	if err := b.Fail(); err != nil || b.State() != Quarantined {
		t.Fatalf("Fail with unreleased ops: %v, %v", err, b.State())
	}
	if b.Cookie() != old {
		t.Fatal("re-registered while the kernel may still use the memory")
	}
	c.tr.Complete(t1, barrier.RemoteError)
	if b.State() != Quarantined {
		t.Fatalf("buffer %v with one op unreleased", b.State())
	}
	c.tr.Complete(t2, barrier.Dropped)
	waitState(t, b, Available)
	if b.Cookie() == old {
		t.Fatal("Fail did not give the buffer a new key")
	}

	// Revoked with an unreleased operation: both must end.
	b, _ = p.Get(ctx)
	tok = begin(c, b.Span())
	c.tr.Complete(tok, barrier.TimedOut)
	if err := b.Revoke(); err != nil {
		t.Fatal(err)
	}
	if err := b.Confirm(); err != nil {
		t.Fatal(err)
	}
	if b.State() != Quarantined || p.Stats().Quarantined != 1 {
		t.Fatalf("confirmed with an unreleased op: %v, stats %+v", b.State(), p.Stats())
	}
	c.tr.Complete(tok, barrier.Success)
	if b.State() != Available || p.Stats().Quarantined != 0 {
		t.Fatalf("after the release: %v, stats %+v", b.State(), p.Stats())
	}
	// And the other order: released first, confirmed later.
	b, _ = p.Get(ctx)
	tok = begin(c, b.Span())
	c.tr.Complete(tok, barrier.TimedOut)
	b.Revoke()
	c.tr.Complete(tok, barrier.Success)
	if b.State() != Quarantined {
		t.Fatalf("revoked buffer %v after its op's release, before Confirm", b.State())
	}
	if err := b.Revoke(); err == nil || b.State() != Quarantined {
		t.Fatalf("second Revoke: %v, %v", err, b.State())
	}
	if err := b.Confirm(); err != nil || b.State() != Available {
		t.Fatalf("Confirm: %v, %v", err, b.State())
	}
}

// Closing a pool while an operation still uses one of its buffers keeps
// the memory mapped (ErrBusy); a second Close after the release unmaps it.
func TestPoolCloseWithUnreleasedOp(t *testing.T) {
	ctx := context.Background()
	p, err := NewPool(ctx, new(fakeRegistrar), 2, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := New(nil, nil, nil)
	defer c.tr.Close()
	b, _ := p.Get(ctx)
	tok := begin(c, b.Span())
	c.tr.Complete(tok, barrier.TimedOut)
	if err := p.Close(); !errors.Is(err, ErrBusy) || p.region.Bytes() == nil {
		t.Fatalf("Close with an unreleased op: %v, mapped %v", err, p.region.Bytes() != nil)
	}
	c.tr.Complete(tok, barrier.Canceled)
	if err := p.Close(); err != nil || p.region.Bytes() != nil {
		t.Fatalf("second Close after the release: %v, mapped %v", err, p.region.Bytes() != nil)
	}
}
