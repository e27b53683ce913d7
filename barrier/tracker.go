package barrier

import (
	"context"
	"sync"
	"time"
)

// Token identifies one tracked operation. Tokens start at 1 and increase
// by one per Begin; 0 is never issued, so a HighWater of 0 means that no
// operation has completed in order yet.
type Token uint64

// Releaser is implemented by values that must learn when the operation
// holding them is complete, for example to return buffers to a pool.
// Release is called exactly once per operation, with the tracker's lock
// held: it must be quick and must not call methods of the Tracker.
type Releaser interface {
	Release(Completion)
}

// Op describes an operation to track.
type Op struct {
	// Deadline is when the operation times out if no status arrived.
	// The zero value means Config.Timeout after Begin, or no deadline
	// if that is zero too.
	Deadline time.Time

	// Keep is held until the operation completes and is then returned in
	// the Completion (and dropped by the tracker). Store the buffers the
	// kernel reads or writes for the operation here, so that they stay
	// reachable while the transfer may run. A pointer stored here does
	// not allocate.
	Keep any

	// Release, if not nil, is called once the operation is complete.
	Release Releaser
}

// Completion reports the end of an operation.
type Completion struct {
	Token  Token
	Status Status
	Keep   any // Op.Keep; nil in the Completions returned by Wait
}

// Err returns Status.Err().
func (c Completion) Err() error { return c.Status.Err() }

// Config holds a Tracker's options. The zero value is usable.
type Config struct {
	// Capacity is the initial number of operation slots, rounded up to a
	// power of two (default 256). The ring doubles whenever more
	// operations are outstanding than it holds; completed operations'
	// statuses stay queryable until their slot is reused, that is for at
	// least the last Capacity tokens.
	Capacity int

	// Completions, if above zero, makes Completions return a channel of
	// that capacity that receives every completion. The goroutine that
	// completes an operation (usually the one calling Process) blocks
	// while the channel is full, so keep it drained.
	Completions int

	// OnComplete, if not nil, is called for every completion, after the
	// tracker's lock is released, in the goroutine that completed it.
	OnComplete func(Completion)

	// Timeout is the deadline given to operations whose Op.Deadline is
	// zero, counted from Begin. Zero means no deadline.
	Timeout time.Duration
}

// Stats are counters of a Tracker's life.
type Stats struct {
	Begun      uint64          // operations begun
	Completed  [Unknown]uint64 // operations completed, by Status
	Late       uint64          // kernel statuses for operations that had already timed out
	Unmatched  uint64          // statuses for tokens not pending in this tracker (never issued, repeated, or forgotten)
	LateStatus [Unknown]uint64 // the statuses counted in Late, by Status
}

type slot struct {
	tok      Token
	status   Status
	deadline int64 // UnixNano; 0: none
	keep     any
	rel      Releaser
}

type waiter struct {
	tok Token
	all bool // wait until the mark reaches tok, else for tok alone
	ch  chan struct{}
}

// A Tracker assigns tokens to operations, holds their state until a status
// arrives, and maintains the locally complete high-water mark. See the
// package documentation.
type Tracker struct {
	mu      sync.Mutex
	slots   []slot
	mask    uint64
	low     Token // lowest pending token, or next when none is pending
	next    Token // the token the next Begin returns
	pending int
	waiters []*waiter
	stats   Stats

	timer   *time.Timer
	timerAt int64 // UnixNano the timer is armed for; 0: not armed
	closed  bool  // Close was called: never arm the timer again

	ch         chan Completion
	onComplete func(Completion)
	timeout    time.Duration
}

// New returns a Tracker configured by cfg (nil means defaults).
func New(cfg *Config) *Tracker {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	n := 256
	if c.Capacity > 0 {
		n = 1
		for n < c.Capacity {
			n <<= 1
		}
	}
	t := &Tracker{
		slots:      make([]slot, n),
		mask:       uint64(n - 1),
		low:        1,
		next:       1,
		onComplete: c.OnComplete,
		timeout:    c.Timeout,
	}
	if c.Completions > 0 {
		t.ch = make(chan Completion, c.Completions)
	}
	return t
}

// Completions returns the channel that receives every completion, or nil
// unless Config.Completions was set.
func (t *Tracker) Completions() <-chan Completion { return t.ch }

// Begin starts tracking an operation and returns its token. Put the token
// in the operation's user_token and send the operation with
// RDS_RDMA_NOTIFY_ME; if sendmsg fails, call Complete(token, NotSent).
func (t *Tracker) Begin(op Op) Token {
	var dl int64
	if !op.Deadline.IsZero() {
		dl = op.Deadline.UnixNano()
	} else if t.timeout > 0 {
		dl = time.Now().Add(t.timeout).UnixNano()
	}
	t.mu.Lock()
	if uint64(t.next-t.low) >= uint64(len(t.slots)) {
		t.grow()
	}
	tok := t.next
	t.next++
	t.slots[uint64(tok)&t.mask] = slot{tok: tok, status: Pending, deadline: dl, keep: op.Keep, rel: op.Release}
	t.pending++
	t.stats.Begun++
	if dl != 0 && (t.timerAt == 0 || dl < t.timerAt) {
		t.armLocked(dl)
	}
	t.mu.Unlock()
	return tok
}

// grow doubles the ring, keeping every slot it can still hold.
func (t *Tracker) grow() {
	old := t.slots
	n := len(old) * 2
	t.slots = make([]slot, n)
	t.mask = uint64(n - 1)
	for i := range old {
		if s := old[i]; s.tok != 0 {
			if t.next-s.tok <= Token(n) {
				t.slots[uint64(s.tok)&t.mask] = s
			}
		}
	}
}

func (t *Tracker) armLocked(dl int64) {
	if t.closed {
		return
	}
	t.timerAt = dl
	d := time.Duration(dl - time.Now().UnixNano())
	if d < 0 {
		d = 0
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.expire)
		return
	}
	t.timer.Reset(d)
}

// Complete records the final status of the operation tok and reports
// whether it was pending. Process calls it for kernel notices; callers
// use it for operations that failed to send (NotSent) or that they abandon.
// A kernel status for an operation that already timed out is counted in
// Stats.Late and ignored.
func (t *Tracker) Complete(tok Token, s Status) bool {
	if !s.Done() {
		return false
	}
	t.mu.Lock()
	c, ok := t.completeLocked(tok, s)
	t.mu.Unlock()
	if ok {
		t.deliver(c)
	}
	return ok
}

func (t *Tracker) completeLocked(tok Token, s Status) (Completion, bool) {
	if tok == 0 || tok >= t.next {
		t.stats.Unmatched++
		return Completion{}, false
	}
	sl := &t.slots[uint64(tok)&t.mask]
	if sl.tok != tok || sl.status != Pending {
		if sl.tok == tok && sl.status == TimedOut && s != TimedOut {
			t.stats.Late++
			t.stats.LateStatus[s]++
		} else {
			t.stats.Unmatched++
		}
		return Completion{}, false
	}
	sl.status = s
	c := Completion{Token: tok, Status: s, Keep: sl.keep}
	rel := sl.rel
	sl.keep, sl.rel = nil, nil
	t.pending--
	t.stats.Completed[s]++
	for t.low < t.next && t.slots[uint64(t.low)&t.mask].status != Pending {
		t.low++
	}
	if rel != nil {
		rel.Release(c)
	}
	if len(t.waiters) > 0 {
		t.wakeLocked()
	}
	return c, true
}

func (t *Tracker) deliver(c Completion) {
	if t.onComplete != nil {
		t.onComplete(c)
	}
	if t.ch != nil {
		t.ch <- c
	}
}

func (t *Tracker) satisfiedLocked(w *waiter) bool {
	if w.all {
		return t.low > w.tok
	}
	sl := &t.slots[uint64(w.tok)&t.mask]
	return sl.tok != w.tok || sl.status != Pending
}

func (t *Tracker) wakeLocked() {
	for i := 0; i < len(t.waiters); {
		w := t.waiters[i]
		if !t.satisfiedLocked(w) {
			i++
			continue
		}
		close(w.ch)
		last := len(t.waiters) - 1
		t.waiters[i] = t.waiters[last]
		t.waiters[last] = nil
		t.waiters = t.waiters[:last]
	}
}

// expire times out every pending operation whose deadline has passed and
// re-arms the timer for the earliest remaining deadline.
func (t *Tracker) expire() {
	var done []Completion
	t.mu.Lock()
	now := time.Now().UnixNano()
	var earliest int64
	for tok := t.low; tok < t.next; tok++ {
		sl := &t.slots[uint64(tok)&t.mask]
		if sl.status != Pending || sl.deadline == 0 {
			continue
		}
		if sl.deadline <= now {
			if c, ok := t.completeLocked(tok, TimedOut); ok {
				done = append(done, c)
			}
		} else if earliest == 0 || sl.deadline < earliest {
			earliest = sl.deadline
		}
	}
	t.timerAt = 0
	if earliest != 0 {
		t.armLocked(earliest)
	}
	t.mu.Unlock()
	for _, c := range done {
		t.deliver(c)
	}
}

// CompleteAll completes every pending operation with status s (for
// example Canceled when the socket carrying them is closed) and returns
// how many there were.
func (t *Tracker) CompleteAll(s Status) int {
	if !s.Done() {
		return 0
	}
	var done []Completion
	t.mu.Lock()
	for tok := t.low; tok < t.next; tok++ {
		if t.slots[uint64(tok)&t.mask].status != Pending {
			continue
		}
		if c, ok := t.completeLocked(tok, s); ok {
			done = append(done, c)
		}
	}
	t.mu.Unlock()
	for _, c := range done {
		t.deliver(c)
	}
	return len(done)
}

// Wait blocks until the operation tok is complete or ctx is done, and
// returns its status. The status of a failed operation is not an error
// here; the error is ctx.Err(), or ErrUnknownToken for a token this
// tracker did not issue or no longer remembers.
func (t *Tracker) Wait(ctx context.Context, tok Token) (Status, error) {
	t.mu.Lock()
	if s := t.statusLocked(tok); s != Pending {
		t.mu.Unlock()
		if s == Unknown {
			return Unknown, ErrUnknownToken
		}
		return s, nil
	}
	w := &waiter{tok: tok, ch: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	select {
	case <-w.ch:
	case <-ctx.Done():
		t.mu.Lock()
		t.removeWaiterLocked(w)
		s := t.statusLocked(tok)
		t.mu.Unlock()
		if s.Done() {
			return s, nil
		}
		return s, ctx.Err()
	}
	t.mu.Lock()
	s := t.statusLocked(tok)
	t.mu.Unlock()
	if s == Unknown {
		return Unknown, ErrUnknownToken
	}
	return s, nil
}

// WaitAll is the barrier: it blocks until every operation with a token at
// most upTo is complete (HighWater() >= upTo) or ctx is done. Completion
// includes failure; check statuses for success. upTo must have been
// issued (WaitAll(ctx, t.Last()) waits for everything begun so far).
func (t *Tracker) WaitAll(ctx context.Context, upTo Token) error {
	t.mu.Lock()
	if upTo >= t.next {
		t.mu.Unlock()
		return ErrUnknownToken
	}
	if t.low > upTo {
		t.mu.Unlock()
		return nil
	}
	w := &waiter{tok: upTo, all: true, ch: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		t.removeWaiterLocked(w)
		done := t.low > upTo
		t.mu.Unlock()
		if done {
			return nil
		}
		return ctx.Err()
	}
}

func (t *Tracker) removeWaiterLocked(w *waiter) {
	for i, x := range t.waiters {
		if x == w {
			last := len(t.waiters) - 1
			t.waiters[i] = t.waiters[last]
			t.waiters[last] = nil
			t.waiters = t.waiters[:last]
			return
		}
	}
}

func (t *Tracker) statusLocked(tok Token) Status {
	if tok == 0 || tok >= t.next {
		return Unknown
	}
	sl := &t.slots[uint64(tok)&t.mask]
	if sl.tok != tok {
		return Unknown
	}
	return sl.status
}

// Status returns the status of the operation tok: Pending, a final status,
// or Unknown for a token not issued or no longer remembered.
func (t *Tracker) Status(tok Token) Status {
	t.mu.Lock()
	s := t.statusLocked(tok)
	t.mu.Unlock()
	return s
}

// HighWater returns the locally complete high-water mark: the largest
// token T such that every operation with a token at most T is complete,
// successfully or not. It is 0 before the first operation completes.
func (t *Tracker) HighWater() Token {
	t.mu.Lock()
	h := t.low - 1
	t.mu.Unlock()
	return h
}

// Last returns the most recently issued token, 0 if none.
func (t *Tracker) Last() Token {
	t.mu.Lock()
	l := t.next - 1
	t.mu.Unlock()
	return l
}

// Outstanding returns the number of operations still pending.
func (t *Tracker) Outstanding() int {
	t.mu.Lock()
	n := t.pending
	t.mu.Unlock()
	return n
}

// Stats returns a snapshot of the tracker's counters.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	s := t.stats
	t.mu.Unlock()
	return s
}

// Close stops the deadline timer for good: deadlines no longer fire.
// Pending operations stay pending; use CompleteAll first to settle them.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
		t.timerAt = 0
	}
	t.mu.Unlock()
}
