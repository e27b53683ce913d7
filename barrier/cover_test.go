//go:build linux

package barrier

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
)

// tokRelease records which tokens were released, and with what status.
type tokRelease struct{ got map[Token]Status }

func (r *tokRelease) Release(c Completion) {
	if r.got == nil {
		r.got = map[Token]Status{}
	}
	if _, dup := r.got[c.Token]; dup {
		r.got[c.Token] = Unknown // released twice
		return
	}
	r.got[c.Token] = c.Status
}

// unsig begins an unsignaled operation in lane and marks it sent.
func unsig(tr *Tracker, lane uint32, rel Releaser) Token {
	tok := tr.begin(time.Time{}, nil, rel, kindUnsent, lane)
	tr.sent(tok)
	return tok
}

func sealed(tr *Tracker, lane uint32, rel Releaser) Token {
	return tr.begin(time.Time{}, nil, rel, kindSealed, lane)
}

func drain(tr *Tracker) []Completion {
	var out []Completion
	for {
		select {
		case c := <-tr.Completions():
			out = append(out, c)
		default:
			return out
		}
	}
}

func TestCoverBySealedStatus(t *testing.T) {
	rel := &tokRelease{}
	tr := New(&Config{Completions: 64})
	a1, a2 := unsig(tr, 1, rel), unsig(tr, 1, rel)
	other := unsig(tr, 2, rel) // another destination: not covered
	a3 := unsig(tr, 1, rel)
	b := sealed(tr, 1, rel)
	late := tr.begin(time.Time{}, nil, rel, kindUnsent, 1) // sendmsg still running when b sealed
	if tr.HighWater() != 0 || len(rel.got) != 0 {
		t.Fatalf("mark %d, releases %v before any status", tr.HighWater(), rel.got)
	}
	tr.sent(late)
	if !tr.Complete(b, Success) {
		t.Fatal("b was not pending")
	}
	cs := drain(tr)
	want := []Token{a1, a2, a3, b}
	if len(cs) != len(want) {
		t.Fatalf("completions %+v, want tokens %v", cs, want)
	}
	for i, c := range cs {
		st := Covered
		if c.Token == b {
			st = Success
		}
		if c.Token != want[i] || c.Status != st || c.Amended {
			t.Fatalf("completion %d = %+v, want token %d %v", i, c, want[i], st)
		}
		if rel.got[c.Token] != st {
			t.Fatalf("token %d released with %v, want %v", c.Token, rel.got[c.Token], st)
		}
	}
	if _, ok := rel.got[other]; ok {
		t.Fatal("an operation of another lane was covered")
	}
	if _, ok := rel.got[late]; ok {
		t.Fatal("an operation sent after the seal was covered")
	}
	if tr.HighWater() != other-1 || tr.Status(a1) != Covered || Covered.Err() != nil || !Covered.Done() {
		t.Fatalf("mark %d, status %v", tr.HighWater(), tr.Status(a1))
	}
	// The next sealed operation of lane 1 covers late; lane 2's covers other.
	c := sealed(tr, 1, rel)
	tr.Complete(c, Dropped)
	if rel.got[late] != Covered || tr.HighWater() != other-1 {
		t.Fatalf("late: %v, mark %d", rel.got[late], tr.HighWater())
	}
	d := sealed(tr, 2, rel)
	tr.Complete(d, Success)
	if rel.got[other] != Covered || tr.HighWater() != d {
		t.Fatalf("other: %v, mark %d, want %d", rel.got[other], tr.HighWater(), d)
	}
	if s := tr.Stats(); s.Completed[Covered] != 5 || unfinished(s) != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// unfinished returns the operations begun and not completed.
func unfinished(s Stats) uint64 {
	var n uint64
	for _, c := range s.Completed {
		n += c
	}
	return s.Begun - n
}

func TestCoverNotSentSealDoesNotCover(t *testing.T) {
	rel := &tokRelease{}
	tr := New(nil)
	a := unsig(tr, 1, rel)
	b := sealed(tr, 1, rel)
	tr.Complete(b, NotSent)
	if _, ok := rel.got[a]; ok || tr.Status(a) != Pending || tr.HighWater() != 0 {
		t.Fatalf("NotSent covered: %v, mark %d", rel.got, tr.HighWater())
	}
	// Nothing seals a now: waiting for it fails fast.
	if _, err := tr.Wait(context.Background(), a); !errors.Is(err, ErrUnsealed) {
		t.Fatalf("Wait on an unsealed op: %v", err)
	}
	if err := tr.WaitAll(context.Background(), b); !errors.Is(err, ErrUnsealed) {
		t.Fatalf("WaitAll over an unsealed op: %v", err)
	}
	c := sealed(tr, 1, rel)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := tr.Wait(ctx, a); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a sealed op: %v", err)
	}
	go tr.Complete(c, Success)
	if err := tr.WaitAll(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if rel.got[a] != Covered {
		t.Fatalf("a released with %v", rel.got[a])
	}
}

func TestCoverUnsentIsUnsealed(t *testing.T) {
	tr := New(nil)
	a := tr.begin(time.Time{}, nil, nil, kindUnsent, 1)
	sealed(tr, 1, nil)
	if err := tr.WaitAll(context.Background(), a); !errors.Is(err, ErrUnsealed) {
		t.Fatalf("WaitAll over an op whose sendmsg has not returned: %v", err)
	}
}

func TestCoverAmendment(t *testing.T) {
	rel := &tokRelease{}
	tr := New(&Config{Completions: 16})
	a1 := unsig(tr, 1, rel)
	a2 := unsig(tr, 1, rel)
	b := sealed(tr, 1, rel)
	// a2's own RECVERR drop arrives first: it completes as Dropped.
	tr.Complete(a2, Dropped)
	tr.Complete(b, Success)
	// a1's arrives after the cover: an amendment, not a second release.
	tr.Complete(a1, Dropped)
	cs := drain(tr)
	want := []Completion{{Token: a2, Status: Dropped}, {Token: a1, Status: Covered}, {Token: b, Status: Success}, {Token: a1, Status: Dropped, Amended: true}}
	if len(cs) != len(want) {
		t.Fatalf("completions %+v, want %+v", cs, want)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Fatalf("completion %d = %+v, want %+v", i, cs[i], want[i])
		}
	}
	if rel.got[a1] != Covered || rel.got[a2] != Dropped || tr.Status(a1) != Dropped {
		t.Fatalf("releases %v, status %v", rel.got, tr.Status(a1))
	}
	if s := tr.Stats(); s.Late != 1 || s.LateStatus[Dropped] != 1 || s.Unmatched != 0 {
		t.Fatalf("stats %+v", s)
	}
	// A second one is unmatched.
	tr.Complete(a1, Dropped)
	if s := tr.Stats(); s.Unmatched != 1 || len(drain(tr)) != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A sealed operation that times out keeps the ones it covers: the mark
// stays below them until its late status.
func TestCoverTimedOutSeal(t *testing.T) {
	rel := &tokRelease{}
	tr := New(nil)
	a1 := unsig(tr, 1, rel)
	a2 := unsig(tr, 1, rel)
	b := sealed(tr, 1, rel)
	tr.Complete(b, TimedOut)
	tr.Complete(a2, TimedOut) // its own deadline
	if len(rel.got) != 0 || tr.HighWater() != 0 || tr.Stats().Quarantined != 2 {
		t.Fatalf("released %v, mark %d, stats %+v", rel.got, tr.HighWater(), tr.Stats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := tr.Wait(ctx, a1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("an op sealed by a timed-out op is reported unsealed")
	}
	tr.Complete(b, Success) // late
	if rel.got[a1] != Covered || rel.got[a2] != Covered || rel.got[b] != Success {
		t.Fatalf("releases %v", rel.got)
	}
	if tr.HighWater() != b || tr.Stats().Quarantined != 0 || tr.Status(a1) != Covered || tr.Status(a2) != TimedOut {
		t.Fatalf("mark %d, stats %+v", tr.HighWater(), tr.Stats())
	}
}

// Canceling a lane covers its sent operations once the call returns, not
// before: the kernel gives them no status but waits for them in the call.
func TestCoverCancelLane(t *testing.T) {
	rel := &tokRelease{}
	tr := New(nil)
	a := unsig(tr, 1, rel)
	o := unsig(tr, 2, rel)
	b := sealed(tr, 1, rel)
	err := tr.cancelLane(1, func() error {
		tr.Complete(b, Canceled) // the kernel's status, inside the call
		if len(rel.got) != 0 || tr.HighWater() != 0 {
			t.Errorf("released during the cancel: %v, mark %d", rel.got, tr.HighWater())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rel.got[a] != Covered || rel.got[b] != Canceled || len(rel.got) != 2 {
		t.Fatalf("releases %v", rel.got)
	}
	if tr.HighWater() != o-1 {
		t.Fatalf("mark %d", tr.HighWater())
	}
	// Without a sealed op: the lane's ops are covered by the cancel alone.
	a2 := unsig(tr, 1, rel)
	tr.cancelLane(1, func() error { return nil })
	if rel.got[a2] != Covered || tr.Status(o) != Pending {
		t.Fatalf("releases %v", rel.got)
	}
}

// The pipeline rdmaops runs with SignalEvery 8 allocates nothing per
// operation once warm: seven unsignaled, one sealed, its status processed.
func TestCoverZeroAllocs(t *testing.T) {
	rel := new(plainRelease)
	tr := New(&Config{Capacity: 64, Completions: 64, OnRelease: func(Completion) {}})
	keep := new([4096]byte)
	buf := make([]byte, cmsg.RDMAStatusSpace)
	allocs := testing.AllocsPerRun(200, func() {
		for range 7 {
			tok := tr.begin(time.Time{}, keep, rel, kindUnsent, 3)
			tr.sent(tok)
		}
		b := tr.begin(time.Time{}, keep, rel, kindSealed, 3)
		if n, err := tr.Process(notices(t, buf, cmsgNotify(b, cmsg.StatusSuccess))); n != 1 || err != nil {
			t.Fatalf("Process = %d, %v", n, err)
		}
		for range 8 {
			<-tr.Completions()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 8 operations", allocs)
	}
	if tr.Outstanding() != 0 || tr.HighWater() != tr.Last() || uint64(rel.n) != tr.Stats().Begun {
		t.Fatalf("mark %d of %d, %d releases", tr.HighWater(), tr.Last(), rel.n)
	}
}
