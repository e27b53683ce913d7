//go:build linux

package barrier

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
)

// cmsgNotify is the kernel's notice of status st (rds_rdma_notify) for tok.
func cmsgNotify(tok Token, st cmsg.NotifyStatus) cmsg.Notify {
	return cmsg.Notify{UserToken: uint64(tok), Status: st}
}

// releaseLog records every release, in order.
type releaseLog struct {
	mu   sync.Mutex
	seen []Completion
}

func (l *releaseLog) Release(c Completion) { l.mu.Lock(); l.seen = append(l.seen, c); l.mu.Unlock() }

func (l *releaseLog) list() []Completion {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Completion(nil), l.seen...)
}

// timeOut makes tok time out through its deadline and waits for it.
func timeOut(t *testing.T, tr *Tracker, tok Token) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := tr.Wait(ctx, tok); s != TimedOut || err != nil {
		t.Fatalf("Wait(%d) = %v, %v; want timed out", tok, s, err)
	}
}

// A timed-out operation is reported at its deadline and released by its
// late kernel status, through Process as the receive loop applies it;
// OnRelease sees the release with the late status.
func TestTimeoutThenLateStatusReleases(t *testing.T) {
	var onRel releaseLog
	tr := New(&Config{Completions: 4, OnRelease: onRel.Release})
	defer tr.Close()
	rel := new(releaseLog)
	keep := new(int)
	tok := tr.Begin(Entry{Deadline: time.Now().Add(10 * time.Millisecond), Keep: keep, Release: rel})
	c := <-tr.Completions()
	if c.Token != tok || c.Status != TimedOut || c.Keep != keep {
		t.Fatalf("completion %+v", c)
	}
	if n := len(rel.list()); n != 0 {
		t.Fatalf("%d releases at the deadline", n)
	}
	if st := tr.Stats(); st.Quarantined != 1 || tr.HighWater() != 0 || tr.Outstanding() != 0 {
		t.Fatalf("after the timeout: stats %+v, mark %d, outstanding %d", st, tr.HighWater(), tr.Outstanding())
	}
	tr.mu.Lock()
	kept := tr.held[0].keep
	tr.mu.Unlock()
	if kept != keep {
		t.Fatal("the tracker dropped Keep of a quarantined operation")
	}
	if n, err := tr.Process(notices(t, make([]byte, 64), cmsgNotify(tok, cmsg.StatusCanceled))); n != 1 || err != nil {
		t.Fatalf("Process = %d, %v", n, err)
	}
	if r := rel.list(); len(r) != 1 || r[0].Token != tok || r[0].Status != Canceled || r[0].Keep != keep {
		t.Fatalf("releases %+v, want one with the late status", r)
	}
	if r := onRel.list(); len(r) != 1 || r[0].Token != tok || r[0].Status != Canceled {
		t.Fatalf("OnRelease saw %+v", r)
	}
	st := tr.Stats()
	if st.Quarantined != 0 || st.Late != 1 || st.LateStatus[Canceled] != 1 || tr.HighWater() != tok || tr.Status(tok) != TimedOut {
		t.Fatalf("after the late status: stats %+v, mark %d, status %v", st, tr.HighWater(), tr.Status(tok))
	}
	select {
	case c := <-tr.Completions():
		t.Fatalf("second completion %+v", c)
	default:
	}
	// A repeated status releases nothing more.
	if tr.Complete(tok, Success) || len(rel.list()) != 1 || tr.Stats().Unmatched != 1 {
		t.Fatalf("repeated late status: releases %+v, stats %+v", rel.list(), tr.Stats())
	}
}

// Closing the socket (CompleteAll) releases quarantined operations too.
func TestTimeoutThenCompleteAllReleases(t *testing.T) {
	var onRel releaseLog
	tr := New(&Config{OnRelease: onRel.Release})
	defer tr.Close()
	rel := new(releaseLog)
	a := tr.Begin(Entry{Deadline: time.Now().Add(10 * time.Millisecond), Release: rel})
	b := tr.Begin(Entry{Release: rel})
	timeOut(t, tr, a)
	if len(rel.list()) != 0 || tr.HighWater() != 0 {
		t.Fatalf("timed out: releases %+v, mark %d", rel.list(), tr.HighWater())
	}
	if n := tr.CompleteAll(Canceled); n != 1 {
		t.Fatalf("CompleteAll completed %d, want 1 (the pending one)", n)
	}
	got := map[Token]Status{}
	for _, r := range rel.list() {
		got[r.Token] = r.Status
	}
	if len(rel.list()) != 2 || got[a] != Canceled || got[b] != Canceled {
		t.Fatalf("releases %+v", rel.list())
	}
	if len(onRel.list()) != 2 || tr.HighWater() != b || tr.Stats().Quarantined != 0 {
		t.Fatalf("OnRelease %+v, mark %d, stats %+v", onRel.list(), tr.HighWater(), tr.Stats())
	}
	if tr.Status(a) != TimedOut || tr.Status(b) != Canceled {
		t.Fatalf("statuses %v %v", tr.Status(a), tr.Status(b))
	}
}

// While a Cancel runs, statuses are reported but nothing is released: the
// kernel reports an operation it had posted as canceled before the
// adapter is done with it, and waits for that inside the call. When the
// call returns, operations with a status are released; a timed-out one
// whose status has not come stays quarantined.
func TestTimeoutThenCancel(t *testing.T) {
	tr := New(&Config{Completions: 8})
	defer tr.Close()
	rel := new(releaseLog)
	late := tr.Begin(Entry{Deadline: time.Now().Add(10 * time.Millisecond), Release: rel})   // times out, then canceled
	silent := tr.Begin(Entry{Deadline: time.Now().Add(10 * time.Millisecond), Release: rel}) // times out, no status yet
	inflight := tr.Begin(Entry{Release: rel})                                                // posted; canceled while running
	timeOut(t, tr, late)
	timeOut(t, tr, silent)
	<-tr.Completions()
	<-tr.Completions()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	called := false
	err := tr.Cancel(func() error {
		called = true
		// The kernel queues Canceled for both at once; the receive
		// loop reads them while the call still waits for the adapter.
		tr.Process(notices(t, make([]byte, 128), cmsgNotify(inflight, cmsg.StatusCanceled), cmsgNotify(late, cmsg.StatusCanceled)))
		if s, err := tr.Wait(ctx, inflight); s != Canceled || err != nil {
			t.Errorf("Wait(inflight) during the cancel = %v, %v", s, err)
		}
		if c := <-tr.Completions(); c.Token != inflight || c.Status != Canceled {
			t.Errorf("completion during the cancel %+v", c)
		}
		if r := rel.list(); len(r) != 0 {
			t.Errorf("released during the cancel: %+v", r)
		}
		if st := tr.Stats(); st.Quarantined != 3 || st.Late != 1 || tr.HighWater() != 0 {
			t.Errorf("during the cancel: stats %+v, mark %d", st, tr.HighWater())
		}
		return errors.New("fake cancel error")
	})
	if !called || err == nil || err.Error() != "fake cancel error" {
		t.Fatalf("Cancel = %v (called %v)", err, called)
	}
	got := map[Token]Status{}
	for _, r := range rel.list() {
		got[r.Token] = r.Status
	}
	if len(got) != 2 || got[late] != Canceled || got[inflight] != Canceled {
		t.Fatalf("released after the cancel: %+v", rel.list())
	}
	if st := tr.Stats(); st.Quarantined != 1 || tr.HighWater() != late {
		t.Fatalf("after the cancel: stats %+v, mark %d (silent op %d quarantined)", st, tr.HighWater(), silent)
	}
	// Its status after the cancel releases it at once.
	tr.Complete(silent, Canceled)
	if len(rel.list()) != 3 || tr.HighWater() != inflight || tr.Stats().Quarantined != 0 {
		t.Fatalf("after the last status: releases %+v, mark %d", rel.list(), tr.HighWater())
	}
}

// Nested cancels release only when the last one returns.
func TestNestedCancel(t *testing.T) {
	tr := New(nil)
	rel := new(releaseLog)
	a := tr.Begin(Entry{Release: rel})
	tr.Cancel(func() error {
		tr.Cancel(func() error { tr.Complete(a, Canceled); return nil })
		if len(rel.list()) != 0 {
			t.Error("released while the outer cancel runs")
		}
		return nil
	})
	if len(rel.list()) != 1 || tr.HighWater() != a {
		t.Fatalf("releases %+v, mark %d", rel.list(), tr.HighWater())
	}
}

// The mark rises over released operations only: it stops at the oldest
// quarantined one, whatever completes after it, and WaitAll waits for the
// release.
func TestMarkDoesNotPassQuarantined(t *testing.T) {
	tr := New(nil)
	defer tr.Close()
	a := tr.Begin(Entry{})
	q := tr.Begin(Entry{})
	var rest []Token
	for range 5 {
		rest = append(rest, tr.Begin(Entry{}))
	}
	tr.Complete(a, Success)
	tr.Complete(q, TimedOut) // abandoned as its deadline would
	for _, tok := range rest {
		tr.Complete(tok, Success)
	}
	if hw := tr.HighWater(); hw != a {
		t.Fatalf("mark %d, want %d (token %d quarantined)", hw, a, q)
	}
	last := rest[len(rest)-1]
	done := make(chan error, 1)
	go func() { done <- tr.WaitAll(context.Background(), last) }()
	select {
	case err := <-done:
		t.Fatalf("WaitAll passed a quarantined op: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	tr.Complete(q, RemoteError) // late
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitAll did not return after the release")
	}
	if hw := tr.HighWater(); hw != last {
		t.Fatalf("mark %d after the release, want %d", hw, last)
	}
}

// A quarantined operation survives the reuse of its ring slot: its status
// stays queryable, its late status still finds and releases it, and the
// quarantine holds one entry, not one per operation since.
func TestRingReuseWithQuarantined(t *testing.T) {
	tr := New(&Config{Capacity: 4})
	defer tr.Close()
	rel := new(releaseLog)
	q := tr.Begin(Entry{Release: rel})
	tr.Complete(q, TimedOut)
	const n = 100
	for range n {
		tr.Complete(tr.Begin(Entry{}), Success)
	}
	tr.mu.Lock()
	slots, nheld, slotTok := len(tr.slots), len(tr.held), tr.slots[uint64(q)&tr.mask].tok
	tr.mu.Unlock()
	if slots != 4 || nheld != 1 || slotTok == q {
		t.Fatalf("ring of %d slots (want 4, not grown), %d held, slot of %d holds token %d", slots, nheld, q, slotTok)
	}
	if s := tr.Status(q); s != TimedOut {
		t.Fatalf("Status of the quarantined op after its slot was reused: %v", s)
	}
	if hw := tr.HighWater(); hw != 0 {
		t.Fatalf("mark %d past the quarantined op", hw)
	}
	if tr.Complete(q, Success) {
		t.Fatal("late status reported as a completion")
	}
	if r := rel.list(); len(r) != 1 || r[0].Token != q || r[0].Status != Success {
		t.Fatalf("releases %+v", r)
	}
	if hw := tr.HighWater(); hw != n+1 {
		t.Fatalf("mark %d after the release, want %d", hw, n+1)
	}
	if st := tr.Stats(); st.Late != 1 || st.Quarantined != 0 || st.Unmatched != 0 {
		t.Fatalf("stats %+v", st)
	}
	if s := tr.Status(q); s != Unknown {
		t.Fatalf("Status of a released op whose slot was reused: %v", s)
	}
}

// Quarantining and releasing by a late status do not allocate once the
// quarantine has room: the receive path stays allocation-free.
func TestZeroAllocsLateRelease(t *testing.T) {
	rel := new(plainRelease)
	tr := New(&Config{Capacity: 64, Completions: 64, OnRelease: func(Completion) {}})
	keep := new(int)
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		tok := tr.Begin(Entry{Keep: keep, Release: rel})
		tr.Complete(tok, TimedOut)
		<-tr.Completions()
		if n, err := tr.Process(notices(t, buf, cmsgNotify(tok, cmsg.StatusSuccess))); n != 1 || err != nil {
			t.Fatalf("Process = %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per quarantine and late release", allocs)
	}
	if tr.Stats().Quarantined != 0 || tr.HighWater() != tr.Last() || uint64(rel.n) != tr.Stats().Late {
		t.Fatalf("stats %+v, mark %d, %d releases", tr.Stats(), tr.HighWater(), rel.n)
	}
}
