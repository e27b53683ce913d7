package barrier

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rds/rds/internal/barrierlink"
)

func TestHighWaterOutOfOrder(t *testing.T) {
	tr := New(nil)
	var toks []Token
	for range 5 {
		toks = append(toks, tr.Begin(Entry{}))
	}
	if toks[0] != 1 || toks[4] != 5 {
		t.Fatalf("tokens %v, want 1..5", toks)
	}
	steps := []struct {
		tok  Token
		st   Status
		want Token
	}{
		{3, Success, 0},
		{2, RemoteError, 0},
		{1, Success, 3}, // 1, 2 (failed) and 3 are done
		{5, Dropped, 3},
		{4, Canceled, 5},
	}
	for _, s := range steps {
		if !tr.Complete(s.tok, s.st) {
			t.Fatalf("Complete(%d) = false", s.tok)
		}
		if got := tr.HighWater(); got != s.want {
			t.Fatalf("after completing %d: HighWater = %d, want %d", s.tok, got, s.want)
		}
	}
	for _, s := range steps {
		if got := tr.Status(s.tok); got != s.st {
			t.Errorf("Status(%d) = %v, want %v", s.tok, got, s.st)
		}
	}
	if tr.Complete(3, Success) {
		t.Error("second Complete of the same token reported true")
	}
	if tr.Complete(99, Success) || tr.Complete(0, Success) {
		t.Error("Complete of a token never issued reported true")
	}
	st := tr.Stats()
	if st.Begun != 5 || st.Unmatched != 3 || st.Completed[Success] != 2 || st.Completed[RemoteError] != 1 {
		t.Errorf("stats %+v", st)
	}
	if tr.Outstanding() != 0 || tr.Last() != 5 {
		t.Errorf("Outstanding %d Last %d", tr.Outstanding(), tr.Last())
	}
	if tr.Status(6) != Unknown {
		t.Error("Status of an unissued token is not Unknown")
	}
}

func TestWait(t *testing.T) {
	tr := New(nil)
	a, b := tr.Begin(Entry{}), tr.Begin(Entry{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	got := make(chan Status, 1)
	go func() {
		s, err := tr.Wait(ctx, b)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	time.Sleep(10 * time.Millisecond)
	tr.Complete(a, Success)
	select {
	case s := <-got:
		t.Fatalf("Wait(b) returned %v after only a completed", s)
	case <-time.After(20 * time.Millisecond):
	}
	tr.Complete(b, RemoteError)
	if s := <-got; s != RemoteError {
		t.Fatalf("Wait(b) = %v, want remote error", s)
	}
	// Already complete: returns at once.
	if s, err := tr.Wait(ctx, a); s != Success || err != nil {
		t.Fatalf("Wait(done) = %v, %v", s, err)
	}
	if _, err := tr.Wait(ctx, 77); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("Wait(unissued) err = %v", err)
	}
	// Cancellation.
	c := tr.Begin(Entry{})
	cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Millisecond)
	defer ccancel()
	if s, err := tr.Wait(cctx, c); s != Pending || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with expiring ctx = %v, %v", s, err)
	}
	tr.mu.Lock()
	nw := len(tr.waiters)
	tr.mu.Unlock()
	if nw != 0 {
		t.Fatalf("%d waiters left after cancellation", nw)
	}
}

func TestWaitAll(t *testing.T) {
	tr := New(nil)
	for range 10 {
		tr.Begin(Entry{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.WaitAll(ctx, 6) }()
	// Complete 2..10 first: the barrier must hold until 1 is done.
	for tok := Token(10); tok >= 2; tok-- {
		tr.Complete(tok, Success)
	}
	select {
	case err := <-done:
		t.Fatalf("WaitAll(6) returned %v while token 1 is pending", err)
	case <-time.After(20 * time.Millisecond):
	}
	tr.Complete(1, Dropped)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if hw := tr.HighWater(); hw != 10 {
		t.Fatalf("HighWater = %d, want 10", hw)
	}
	if err := tr.WaitAll(ctx, 11); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("WaitAll beyond Last: %v", err)
	}
	tr.Begin(Entry{})
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer scancel()
	if err := tr.WaitAll(sctx, 11); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAll on a pending op with an expiring ctx: %v", err)
	}
}

type countRelease struct {
	n    atomic.Int32
	last atomic.Value
}

func (r *countRelease) Release(c Completion) { r.n.Add(1); r.last.Store(c) }

func TestDeadline(t *testing.T) {
	var seen []Completion
	var mu sync.Mutex
	tr := New(&Config{OnComplete: func(c Completion) { mu.Lock(); seen = append(seen, c); mu.Unlock() }})
	defer tr.Close()
	buf := make([]byte, 16)
	rel := new(countRelease)
	start := time.Now()
	slow := tr.Begin(Entry{Deadline: start.Add(30 * time.Millisecond), Keep: &buf, Release: rel})
	fast := tr.Begin(Entry{Deadline: start.Add(time.Hour)})
	tr.Complete(fast, Success)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := tr.Wait(ctx, slow); err != nil || s != TimedOut {
		t.Fatalf("Wait(slow) = %v, %v; want timed out", s, err)
	}
	if el := time.Since(start); el < 25*time.Millisecond {
		t.Fatalf("timed out after %v, before the deadline", el)
	}
	if s := tr.Status(slow); s != TimedOut {
		t.Fatalf("status %v, want timed out", s)
	}
	// The barrier does not pass the quarantined op.
	if hw := tr.HighWater(); hw != 0 {
		t.Fatalf("HighWater %d with token 1 quarantined", hw)
	}
	sctx, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := tr.WaitAll(sctx, fast); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAll past a quarantined op: %v", err)
	}
	scancel()
	if !errors.Is(TimedOut.Err(), ErrTimeout) {
		t.Fatal("TimedOut.Err is not ErrTimeout")
	}
	// Reported, not released: the kernel may still use the memory.
	if rel.n.Load() != 0 {
		t.Fatalf("Release called %d times at the timeout", rel.n.Load())
	}
	mu.Lock()
	if len(seen) != 2 || seen[1].Token != slow || seen[1].Keep != &buf {
		t.Fatalf("completions %+v: want the timed-out op with its Keep", seen)
	}
	mu.Unlock()
	// A status arriving after the timeout is late, not a second
	// completion; it releases the op.
	if tr.Complete(slow, Success) {
		t.Fatal("late status completed the op again")
	}
	if st := tr.Stats(); st.Late != 1 || st.LateStatus[Success] != 1 || st.Completed[TimedOut] != 1 || st.Quarantined != 0 {
		t.Fatalf("stats %+v", st)
	}
	if rel.n.Load() != 1 || rel.last.Load().(Completion).Status != Success {
		t.Fatalf("Release called %d times, last %+v", rel.n.Load(), rel.last.Load())
	}
	if err := tr.WaitAll(ctx, fast); err != nil || tr.HighWater() != fast {
		t.Fatalf("WaitAll after the release: %v, mark %d", err, tr.HighWater())
	}
	mu.Lock()
	if len(seen) != 2 {
		t.Fatalf("completions %+v after the late status", seen)
	}
	mu.Unlock()
}

func TestDefaultTimeoutAndRearm(t *testing.T) {
	tr := New(&Config{Timeout: 20 * time.Millisecond, Completions: 8})
	defer tr.Close()
	a := tr.Begin(Entry{Deadline: time.Now().Add(time.Hour)}) // arms the timer far away
	b := tr.Begin(Entry{})                                    // must re-arm it earlier
	select {
	case c := <-tr.Completions():
		if c.Token != b || c.Status != TimedOut {
			t.Fatalf("completion %+v, want %d timed out", c, b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("default timeout never fired")
	}
	if tr.Status(a) != Pending {
		t.Fatal("op with a far deadline completed")
	}
	if n := tr.CompleteAll(Canceled); n != 1 {
		t.Fatalf("CompleteAll = %d, want 1", n)
	}
	if c := <-tr.Completions(); c.Token != a || c.Status != Canceled {
		t.Fatalf("completion %+v", c)
	}
	if tr.HighWater() != b {
		t.Fatalf("HighWater %d", tr.HighWater())
	}
}

func TestReleaseAndKeep(t *testing.T) {
	tr := New(&Config{Completions: 1})
	rel := new(countRelease)
	k := new(int)
	tok := tr.Begin(Entry{Keep: k, Release: rel})
	tr.Complete(tok, Canceled)
	c := <-tr.Completions()
	if c.Keep != k || c.Status != Canceled || !errors.Is(c.Err(), ErrCanceled) {
		t.Fatalf("completion %+v", c)
	}
	if rel.n.Load() != 1 || rel.last.Load().(Completion).Token != tok {
		t.Fatal("Release not called with the completion")
	}
	tr.mu.Lock()
	kept := tr.slots[uint64(tok)&tr.mask].keep
	tr.mu.Unlock()
	if kept != nil {
		t.Fatal("tracker still holds Keep after completion")
	}
}

func TestGrowKeepsState(t *testing.T) {
	tr := New(&Config{Capacity: 4})
	const n = 1000
	for range n {
		tr.Begin(Entry{})
	}
	perm := rand.Perm(n)
	for i, p := range perm {
		tok := Token(p + 1)
		if !tr.Complete(tok, Success) {
			t.Fatalf("step %d: Complete(%d) failed", i, tok)
		}
	}
	if tr.HighWater() != n || tr.Outstanding() != 0 {
		t.Fatalf("HighWater %d Outstanding %d", tr.HighWater(), tr.Outstanding())
	}
	if tr.Status(n) != Success {
		t.Fatal("status forgotten after growth")
	}
}

func TestForgottenToken(t *testing.T) {
	tr := New(&Config{Capacity: 4})
	first := tr.Begin(Entry{})
	tr.Complete(first, Success)
	for range 8 {
		tr.Complete(tr.Begin(Entry{}), Success)
	}
	if s := tr.Status(first); s != Unknown {
		t.Fatalf("status of a token 8 slots back in a 4-slot ring = %v, want unknown", s)
	}
	if _, err := tr.Wait(context.Background(), first); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("Wait(forgotten) = %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	tr := New(&Config{Capacity: 8})
	const senders, per = 8, 500
	toks := make(chan Token, senders*per)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				toks <- tr.Begin(Entry{})
			}
		}()
	}
	var rwg sync.WaitGroup
	for range 3 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for tok := range toks {
				st := Success
				if tok%7 == 0 {
					st = RemoteError
				}
				if !tr.Complete(tok, st) {
					t.Errorf("Complete(%d) failed", tok)
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitErr := make(chan error, 1)
	go func() {
		for tr.Last() < senders*per {
			time.Sleep(time.Millisecond)
		}
		waitErr <- tr.WaitAll(ctx, senders*per)
	}()
	wg.Wait()
	close(toks)
	rwg.Wait()
	if err := <-waitErr; err != nil {
		t.Fatal(err)
	}
	if tr.HighWater() != senders*per {
		t.Fatalf("HighWater %d", tr.HighWater())
	}
	st := tr.Stats()
	if st.Completed[Success]+st.Completed[RemoteError] != senders*per {
		t.Fatalf("stats %+v", st)
	}
}

func TestStatusStrings(t *testing.T) {
	for s := Pending; s <= Unknown; s++ {
		if s.String() == "" || s.String()[0] == 's' && s.String() != "success" {
			t.Errorf("Status(%d).String() = %q", s, s.String())
		}
	}
	if Status(200).String() != "status(200)" {
		t.Errorf("out of range: %q", Status(200).String())
	}
	for k, want := range map[int32]Status{0: Success, 1: RemoteError, 2: Canceled, 3: Dropped, 4: OtherError, 99: OtherError} {
		if got := FromKernel(k); got != want {
			t.Errorf("FromKernel(%d) = %v, want %v", k, got, want)
		}
	}
	if Success.Err() != nil || Pending.Done() || !NotSent.Done() || !errors.Is(NotSent.Err(), ErrNotSent) {
		t.Error("Err/Done")
	}
}

// A Config.Timeout deadline is stamped by the tick, not read from the
// clock in Begin: the operation still times out no earlier than Timeout
// after its Begin, the deadline a reader is told is never later than the
// one the operation gets, and the tick stops once Begins stop.
func TestTimeoutStampedByTick(t *testing.T) {
	const timeout = 40 * time.Millisecond
	tr := New(&Config{Timeout: timeout, Completions: 8})
	defer tr.Close()
	begun := time.Now()
	tok := tr.Begin(Entry{})
	tr.mu.Lock()
	told, unstamped := tr.nextDeadlineLocked(), tr.slots[uint64(tok)&tr.mask].deadline == dlAtTick
	tr.mu.Unlock()
	if !unstamped {
		t.Fatal("Begin stamped a deadline itself")
	}
	if told == 0 {
		t.Fatal("no deadline told for an operation with a Timeout")
	}
	var c Completion
	select {
	case c = <-tr.Completions():
	case <-time.After(5 * time.Second):
		t.Fatal("the Timeout never fired")
	}
	if elapsed := time.Since(begun); c.Token != tok || c.Status != TimedOut || elapsed < timeout {
		t.Fatalf("completion %+v after %v, want token %d timed out no earlier than %v", c, elapsed, tok, timeout)
	}
	tr.mu.Lock()
	got := tr.held[0].tok
	tr.mu.Unlock()
	if got != tok {
		t.Fatalf("quarantined %d, want %d", got, tok)
	}
	// The deadline told before the stamp was no later than the stamped
	// one, which passed: the timer fired at or after it.
	if now := barrierlink.Clock(); told > now {
		t.Fatalf("told deadline %d is later than the time the operation timed out (%d)", told, now)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		ticking := tr.ticking
		tr.mu.Unlock()
		if !ticking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tick kept running with no Begin")
		}
		time.Sleep(tr.tickGrain())
	}
	// A new Begin starts the tick again.
	tok2 := tr.Begin(Entry{})
	select {
	case c = <-tr.Completions():
		if c.Token != tok2 || c.Status != TimedOut {
			t.Fatalf("completion %+v, want %d timed out", c, tok2)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Timeout of an operation begun after the tick stopped never fired")
	}
}

// Operations begun in a burst all get deadlines from one tick, and one
// that completes before it is left alone.
func TestTickStampsOnlyPending(t *testing.T) {
	tr := New(&Config{Timeout: time.Hour})
	defer tr.Close()
	var toks []Token
	for i := 0; i < 5; i++ {
		toks = append(toks, tr.Begin(Entry{}))
	}
	tr.Complete(toks[2], Success)
	tr.stamp()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var want int64
	for i, tok := range toks {
		d := tr.slots[uint64(tok)&tr.mask].deadline
		switch {
		case i == 2:
			if d != dlAtTick {
				t.Errorf("completed op %d got deadline %d", tok, d)
			}
		case d == dlAtTick || d == 0:
			t.Errorf("op %d not stamped", tok)
		case want == 0:
			want = d
		case d != want:
			t.Errorf("op %d stamped %d, others %d", tok, d, want)
		}
	}
	if tr.timerAt != want {
		t.Errorf("timer armed for %d, want the stamped deadline %d", tr.timerAt, want)
	}
	if tr.tickFrom != tr.next {
		t.Errorf("tickFrom %d after the tick, next %d", tr.tickFrom, tr.next)
	}
}

// Without a Config.Timeout an operation still gets a deadline,
// DefaultTimeout after its Begin; a negative Timeout gives none.
func TestDefaultTimeout(t *testing.T) {
	for _, tc := range []struct {
		cfg  *Config
		want time.Duration
	}{
		{nil, DefaultTimeout},
		{&Config{}, DefaultTimeout},
		{&Config{Timeout: 5 * time.Second}, 5 * time.Second},
		{&Config{Timeout: -1}, 0},
	} {
		tr := New(tc.cfg)
		tr.Begin(Entry{})
		tr.mu.Lock()
		told, timeout := tr.nextDeadlineLocked(), tr.timeout
		tr.mu.Unlock()
		tr.Close()
		if timeout != tc.want {
			t.Errorf("New(%+v): timeout %v, want %v", tc.cfg, timeout, tc.want)
		}
		if (told != 0) != (tc.want != 0) {
			t.Errorf("New(%+v): deadline told %d, want one: %v", tc.cfg, told, tc.want != 0)
		}
	}
}
