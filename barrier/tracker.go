package barrier

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rds/rds/internal/barrierlink"
)

// Token identifies one tracked operation. Tokens start at 1 and increase
// by one per Begin; 0 is never issued, so a HighWater of 0 means that no
// operation has completed in order yet.
type Token uint64

// Releaser is implemented by values that must learn when the memory of the
// operation holding them is free again, for example to return buffers to a
// pool. Release is called exactly once per operation, when the tracker
// releases it (see "Memory" in the package documentation): for most
// operations together with their completion, for a timed-out one only
// later. Its Completion carries the status that freed the memory. It is
// called with the tracker's lock held: it must be quick and must not call
// methods of the Tracker.
type Releaser interface {
	Release(Completion)
}

// Entry describes an operation to track (Tracker.Begin).
type Entry struct {
	// Deadline is when the operation times out if no status arrived.
	// The zero value means Config.Timeout (by default DefaultTimeout)
	// after Begin, or no deadline if Config.Timeout is negative.
	Deadline time.Time

	// Keep is returned in the Completion and held by the tracker until
	// the operation is released (for a timed-out operation that is later
	// than its completion). Store the buffers the kernel reads or writes
	// for the operation here, so that they stay reachable while the
	// transfer may run. A pointer stored here does not allocate.
	Keep any

	// Release, if not nil, is called once the operation's memory is free
	// (see Releaser).
	Release Releaser
}

// Completion reports the end of an operation.
type Completion struct {
	Token  Token
	Status Status
	Keep   any // Entry.Keep; nil in the Completions returned by Wait

	// Amended marks the second completion of a Covered operation: the
	// kernel reported it failed (RDS_RECVERR) after a later operation's
	// status had covered it. It was released with the first; Keep is nil.
	Amended bool
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

	// OnRelease, if not nil, is called once for every operation when the
	// tracker releases it (its memory is free again; see Releaser),
	// after the tracker's lock is released, in the goroutine that
	// released it: right after OnComplete for most operations, later for
	// a timed-out one. Unlike a Releaser it may call the Tracker.
	OnRelease func(Completion)

	// Timeout is the deadline given to operations whose Entry.Deadline is
	// zero, counted from Begin: zero means DefaultTimeout, a negative
	// value no deadline (an operation whose status the kernel never
	// delivers then stays pending, and the mark below it, for good).
	// Such an operation times out no earlier than Timeout after its
	// Begin, and no more than Timeout/16 (at least 1ms) later, plus the
	// timer's latency: Begin does not read the clock, a periodic tick
	// stamps the deadlines of the operations begun since the previous
	// one.
	Timeout time.Duration
}

// DefaultTimeout is the deadline of an operation when neither its
// Entry.Deadline nor Config.Timeout gives one. A status normally comes
// within milliseconds; Linux 7.2 was seen to never report some failed
// RDMA operations, and without a deadline a caller would wait for them
// forever instead of learning that the peer never answered.
const DefaultTimeout = time.Minute

// Stats are counters of a Tracker's life.
type Stats struct {
	Begun      uint64          // operations begun
	Completed  [Unknown]uint64 // operations completed, by Status
	Late       uint64          // kernel statuses for operations already completed: timed out (each releases its operation) or Covered (delivered as Amended)
	Unmatched  uint64          // statuses for tokens neither pending nor quarantined here (never issued, repeated, or forgotten)
	LateStatus [Unknown]uint64 // the statuses counted in Late, by Status

	// Quarantined is not a total but the number of operations completed
	// and not yet released now: timed out with no status from the kernel
	// yet, or completed while a Cancel runs.
	Quarantined int
}

type slot struct {
	tok      Token
	status   Status
	kind     opKind
	lane     uint32
	epoch    uint64 // kindSent: the seal count when it was sent; kindSealed: its own seal
	deadline int64  // on barrierlink.Clock; 0: none; dlAtTick: the tick stamps it
	keep     any
	rel      Releaser
}

// opKind says how an operation takes part in covering (see
// "Signaling every Nth operation" in the package documentation).
type opKind uint8

const (
	kindPlain  opKind = iota // notified, in no lane
	kindUnsent               // unsignaled, its sendmsg not yet returned
	kindSent                 // unsignaled and sent: waits for a later sealed operation of its lane
	kindSealed               // notified, in a lane: its status covers the lane's earlier sent operations
)

// held is a quarantined operation: reported complete, its memory not yet
// released.
type held struct {
	tok    Token
	status Status // the status reported (TimedOut, or one that arrived during a Cancel)
	freed  Status // the status that frees the memory; Pending while none arrived
	kind   opKind
	lane   uint32
	epoch  uint64
	keep   any
	rel    Releaser
}

// batch collects the completions and releases of one call that completes
// several operations (a status that covers others), to deliver them once
// the lock is released. One is kept for reuse.
type batch struct {
	done, rels []Completion
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

	// Quarantine: operations completed but not released, in no order;
	// at most one entry per operation begun and not yet released.
	held    []held
	heldMin Token  // smallest token in held when len(held) > 0
	cancels int    // Cancel calls running
	seals   uint64 // seal count: bumped by each sealed Begin and each lane cancel
	spare   atomic.Pointer[batch]
	// unsignaled is set by the first operation begun without a status
	// request: before it, no wait can need one (see unsealedLocked) and
	// the check takes no lock.
	unsignaled atomic.Bool

	timer   *time.Timer
	timerAt int64 // when the timer fires (barrierlink.Clock); 0: not armed
	closed  bool  // Close was called: never arm the timer again

	// The tick that stamps Config.Timeout deadlines (see stamp).
	tick     *time.Timer
	ticking  bool  // tick is armed
	tickAt   int64 // when it fires at the earliest (barrierlink.Clock)
	tickFrom Token // the first token the tick has not looked at

	ch         chan Completion
	onComplete func(Completion)
	onRelease  func(Completion)
	timeout    time.Duration
}

// New returns a Tracker configured by cfg (nil means defaults).
func New(cfg *Config) *Tracker {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	case c.Timeout < 0:
		c.Timeout = 0 // no deadline
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
		tickFrom:   1,
		onComplete: c.OnComplete,
		onRelease:  c.OnRelease,
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
func (t *Tracker) Begin(op Entry) Token {
	return t.begin(op.Deadline, op.Keep, op.Release, kindPlain, 0)
}

// begin starts an operation of the given kind in lane.
func (t *Tracker) begin(deadline time.Time, keep any, rel Releaser, kind opKind, lane uint32) Token {
	var dl int64
	if !deadline.IsZero() {
		if dl = barrierlink.ClockOf(deadline); dl == 0 {
			dl = -1 // 0 means none
		}
	} else if t.timeout > 0 {
		dl = dlAtTick
	}
	t.mu.Lock()
	if uint64(t.next-t.low) >= uint64(len(t.slots)) {
		t.grow()
	}
	tok := t.next
	t.next++
	var epoch uint64
	if kind == kindUnsent && !t.unsignaled.Load() {
		t.unsignaled.Store(true)
	}
	if kind == kindSealed {
		t.seals++
		epoch = t.seals
	}
	t.slots[uint64(tok)&t.mask] = slot{tok: tok, status: Pending, kind: kind, lane: lane, epoch: epoch, deadline: dl, keep: keep, rel: rel}
	t.pending++
	t.stats.Begun++
	switch {
	case dl == dlAtTick:
		if !t.ticking {
			t.startTickLocked()
		}
	case dl != 0 && (t.timerAt == 0 || dl < t.timerAt):
		t.armLocked(dl)
	}
	t.mu.Unlock()
	return tok
}

// dlAtTick is the deadline of an operation whose Config.Timeout deadline
// the next tick stamps: never due until then.
const dlAtTick = math.MaxInt64

// tickGrain is the period of the tick that stamps Config.Timeout
// deadlines: how much later than its Timeout an operation may time out.
func (t *Tracker) tickGrain() time.Duration {
	return max(t.timeout/16, time.Millisecond)
}

func (t *Tracker) startTickLocked() {
	if t.closed {
		return
	}
	t.ticking = true
	t.tickAt = barrierlink.Clock() + int64(t.tickGrain()) // one read per burst of Begins
	if t.tick == nil {
		t.tick = time.AfterFunc(t.tickGrain(), t.stamp)
		return
	}
	t.tick.Reset(t.tickGrain())
}

// stamp is the tick: it gives every operation begun since the previous
// tick and still pending its Config.Timeout deadline, counted from now,
// which is no earlier than its Begin and at most a tick later. One clock
// read per tick replaces one per Begin. The tick stops once a period
// passed without a Begin; the next Begin starts it again.
func (t *Tracker) stamp() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.tickFrom == t.next {
		t.ticking = false
		return
	}
	now := barrierlink.Clock()
	dl := now + int64(t.timeout)
	stamped := false
	for x := max(t.tickFrom, t.low); x < t.next; x++ {
		if sl := &t.slots[uint64(x)&t.mask]; sl.tok == x && sl.status == Pending && sl.deadline == dlAtTick {
			sl.deadline = dl
			stamped = true
		}
	}
	t.tickFrom = t.next
	if stamped && (t.timerAt == 0 || dl < t.timerAt) {
		t.armLocked(dl)
	}
	t.tickAt = now + int64(t.tickGrain())
	t.tick.Reset(t.tickGrain())
}

// nextDeadlineLocked is the earliest deadline a pending operation has or
// will have once stamped (on barrierlink.Clock), 0 if none: for a reader
// that must wake when one passes. An operation not stamped yet gets its
// deadline at a tick no earlier than tickAt.
func (t *Tracker) nextDeadlineLocked() int64 {
	d := t.timerAt
	if t.ticking && t.tickFrom != t.next {
		if u := t.tickAt + int64(t.timeout); d == 0 || u < d {
			d = u
		}
	}
	return d
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
	d := time.Duration(dl - barrierlink.Clock())
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
// use it for operations that failed to send (NotSent).
//
// A final status other than TimedOut says that the kernel is done with the
// operation's memory: the operation is released at once (unless a Cancel
// is running). Complete(tok, TimedOut) abandons a pending operation the
// way its deadline would: reported now, its memory quarantined. A kernel
// status for an operation that already timed out is counted in Stats.Late
// and releases it.
func (t *Tracker) Complete(tok Token, s Status) bool {
	if !s.Done() {
		return false
	}
	t.mu.Lock()
	if sl := t.pendingSlotLocked(tok); sl != nil && sl.kind != kindSealed && s != TimedOut && t.cancels == 0 {
		// The common case, a notice for a pending operation that covers
		// nothing: completed and released at once, as completeLocked
		// would, without its detours.
		c := t.finishLocked(sl, tok, s)
		t.mu.Unlock()
		t.deliver(c)
		if t.onRelease != nil {
			t.onRelease(c)
		}
		return true
	}
	lane, seal, sealed := t.sealOfLocked(tok)
	c, ok, r, released := t.completeLocked(tok, s)
	if !sealed || !s.fromKernel() {
		t.mu.Unlock()
		if ok {
			t.deliver(c)
		}
		if released && t.onRelease != nil {
			t.onRelease(r)
		}
		return ok
	}
	// A kernel status of a sealed operation: the operations of its lane
	// sent before it was sealed are done with their memory too.
	b := t.getBatch()
	t.coverLocked(lane, seal, tok, b)
	if len(b.rels) > 0 && len(t.waiters) > 0 {
		t.wakeLocked()
	}
	t.mu.Unlock()
	t.flush(b, c, ok, r, released)
	return ok
}

// fromKernel reports whether s is a status the kernel reports.
func (s Status) fromKernel() bool { return s >= Success && s <= OtherError }

// sealOfLocked returns the lane and seal of tok if it is a sealed
// operation that is pending or quarantined without a freeing status.
func (t *Tracker) sealOfLocked(tok Token) (lane uint32, seal uint64, ok bool) {
	if tok == 0 || tok >= t.next {
		return 0, 0, false
	}
	if sl := &t.slots[uint64(tok)&t.mask]; sl.tok == tok && sl.status == Pending {
		return sl.lane, sl.epoch, sl.kind == kindSealed
	}
	if i := t.heldIndex(tok); i >= 0 && t.held[i].freed == Pending {
		h := &t.held[i]
		return h.lane, h.epoch, h.kind == kindSealed
	}
	return 0, 0, false
}

// coverLocked completes as Covered every pending operation of lane that
// was sent before seal (all of them have tokens below upTo), and frees
// the quarantined ones, collecting completions and releases in b.
func (t *Tracker) coverLocked(lane uint32, seal uint64, upTo Token, b *batch) {
	for tok := t.low; tok < upTo; tok++ {
		sl := &t.slots[uint64(tok)&t.mask]
		if sl.tok != tok || sl.status != Pending || sl.kind != kindSent || sl.lane != lane || sl.epoch >= seal {
			continue
		}
		c, ok, r, released := t.completeLocked(tok, Covered)
		if ok {
			b.done = append(b.done, c)
		}
		if released {
			b.rels = append(b.rels, r)
		}
	}
	for i := 0; i < len(t.held); {
		h := &t.held[i]
		if h.kind != kindSent || h.lane != lane || h.epoch >= seal || h.freed != Pending {
			i++
			continue
		}
		t.stats.Late++
		t.stats.LateStatus[Covered]++
		h.freed = Covered
		if t.cancels > 0 {
			i++
			continue
		}
		b.rels = append(b.rels, t.releaseHeldLocked(i))
	}
}

func (t *Tracker) getBatch() *batch {
	if b := t.spare.Swap(nil); b != nil {
		return b
	}
	return new(batch)
}

// flush delivers b's completions, then c (if ok), then runs the release
// hook for b's releases and r (if released), and keeps b for reuse.
func (t *Tracker) flush(b *batch, c Completion, ok bool, r Completion, released bool) {
	for _, x := range b.done {
		t.deliver(x)
	}
	if ok {
		t.deliver(c)
	}
	if t.onRelease != nil {
		for _, x := range b.rels {
			t.onRelease(x)
		}
		if released {
			t.onRelease(r)
		}
	}
	clear(b.done)
	clear(b.rels)
	b.done, b.rels = b.done[:0], b.rels[:0]
	t.spare.Store(b)
}

// completeLocked applies status s to tok. ok reports a completion c to
// deliver; released reports that the operation (this one, or a
// quarantined one that s was the late status of) was released with r.
func (t *Tracker) completeLocked(tok Token, s Status) (c Completion, ok bool, r Completion, released bool) {
	if tok == 0 || tok >= t.next {
		t.stats.Unmatched++
		return
	}
	sl := &t.slots[uint64(tok)&t.mask]
	if sl.tok != tok || sl.status != Pending {
		if s != TimedOut {
			if i := t.heldIndex(tok); i >= 0 && t.held[i].freed == Pending {
				t.stats.Late++
				t.stats.LateStatus[s]++
				t.held[i].freed = s
				if t.cancels == 0 {
					r = t.releaseHeldLocked(i)
					released = true
					if len(t.waiters) > 0 {
						t.wakeLocked()
					}
				}
				return
			}
		}
		if sl.tok == tok && sl.status == Covered && s.fromKernel() {
			// The kernel reports a covered operation after all (a
			// RECVERR drop): deliver it again, amended.
			sl.status = s
			t.stats.Late++
			t.stats.LateStatus[s]++
			return Completion{Token: tok, Status: s, Amended: true}, true, r, false
		}
		t.stats.Unmatched++
		return
	}
	if s != TimedOut && t.cancels == 0 {
		c = t.finishLocked(sl, tok, s)
		return c, true, c, true
	}
	// Timed out, or a Cancel is running.
	sl.status = s
	keep, rel := sl.keep, sl.rel
	sl.keep, sl.rel = nil, nil
	c = Completion{Token: tok, Status: s, Keep: keep}
	ok = true
	t.pending--
	t.stats.Completed[s]++
	t.advanceLowLocked()
	// Reported, not released: the kernel may still use the memory.
	h := held{tok: tok, status: s, freed: Pending, kind: sl.kind, lane: sl.lane, epoch: sl.epoch, keep: keep, rel: rel}
	if s != TimedOut {
		h.freed = s // released when the running Cancel returns
	}
	if len(t.held) == 0 || tok < t.heldMin {
		t.heldMin = tok
	}
	t.held = append(t.held, h)
	t.stats.Quarantined = len(t.held)
	if len(t.waiters) > 0 {
		t.wakeLocked()
	}
	return
}

// pendingSlotLocked returns the slot of tok if tok is pending there, else
// nil.
func (t *Tracker) pendingSlotLocked(tok Token) *slot {
	if tok == 0 || tok >= t.next {
		return nil
	}
	if sl := &t.slots[uint64(tok)&t.mask]; sl.tok == tok && sl.status == Pending {
		return sl
	}
	return nil
}

// finishLocked gives the pending operation tok in slot sl its final
// status s, which lets the kernel's hold on its memory go (not TimedOut,
// and no Cancel running): it releases the operation, wakes the waiters it
// satisfies, and returns its completion, which is also the release's.
func (t *Tracker) finishLocked(sl *slot, tok Token, s Status) Completion {
	sl.status = s
	keep, rel := sl.keep, sl.rel
	sl.keep, sl.rel = nil, nil
	c := Completion{Token: tok, Status: s, Keep: keep}
	t.pending--
	t.stats.Completed[s]++
	t.advanceLowLocked()
	if rel != nil {
		rel.Release(c)
	}
	if len(t.waiters) > 0 {
		t.wakeLocked()
	}
	return c
}

// advanceLowLocked moves t.low past the operations no longer pending.
func (t *Tracker) advanceLowLocked() {
	for t.low < t.next && t.slots[uint64(t.low)&t.mask].status != Pending {
		t.low++
	}
}

// heldIndex returns the index of tok in the quarantine, or -1.
func (t *Tracker) heldIndex(tok Token) int {
	if len(t.held) == 0 || tok < t.heldMin {
		return -1
	}
	for i := range t.held {
		if t.held[i].tok == tok {
			return i
		}
	}
	return -1
}

// releaseHeldLocked releases quarantined operation i (its freed status
// must be set) and removes it from the quarantine.
func (t *Tracker) releaseHeldLocked(i int) Completion {
	h := t.held[i]
	r := Completion{Token: h.tok, Status: h.freed, Keep: h.keep}
	if h.rel != nil {
		h.rel.Release(r)
	}
	last := len(t.held) - 1
	t.held[i] = t.held[last]
	t.held[last] = held{}
	t.held = t.held[:last]
	if h.tok == t.heldMin && last > 0 {
		m := t.held[0].tok
		for _, x := range t.held[1:] {
			if x.tok < m {
				m = x.tok
			}
		}
		t.heldMin = m
	}
	t.stats.Quarantined = len(t.held)
	return r
}

// markLocked returns the high-water mark: every operation up to it is
// released.
func (t *Tracker) markLocked() Token {
	m := t.low
	if len(t.held) > 0 && t.heldMin < m {
		m = t.heldMin
	}
	return m - 1
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
		return t.markLocked() >= w.tok
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
	now := barrierlink.Clock()
	var earliest int64
	for tok := t.low; tok < t.next; tok++ {
		sl := &t.slots[uint64(tok)&t.mask]
		if sl.status != Pending || sl.deadline == 0 || sl.deadline == dlAtTick {
			continue // no deadline, or not stamped yet
		}
		if sl.deadline <= now {
			if c, ok, _, _ := t.completeLocked(tok, TimedOut); ok {
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

// CompleteAll completes every pending operation with status s and
// releases every operation, quarantined ones included, and returns how
// many operations it completed. It says that the kernel will report
// nothing more and holds no memory of these operations: call it once the
// socket that carried them is closed (closing an RDS socket cancels its
// operations, waits for the adapter to finish those it had started, and
// discards the notices not yet read), typically with Canceled.
func (t *Tracker) CompleteAll(s Status) int {
	if !s.Done() {
		return 0
	}
	var done, rels []Completion
	t.mu.Lock()
	for tok := t.low; tok < t.next; tok++ {
		if t.slots[uint64(tok)&t.mask].status != Pending {
			continue
		}
		c, ok, r, released := t.completeLocked(tok, s)
		if ok {
			done = append(done, c)
		}
		if released {
			rels = append(rels, r)
		}
	}
	for len(t.held) > 0 {
		if t.held[0].freed == Pending {
			t.held[0].freed = s
		}
		rels = append(rels, t.releaseHeldLocked(0))
	}
	if len(t.waiters) > 0 {
		t.wakeLocked()
	}
	t.mu.Unlock()
	for _, c := range done {
		t.deliver(c)
	}
	t.releaseHook(rels)
	return len(done)
}

func (t *Tracker) releaseHook(rels []Completion) {
	if t.onRelease == nil {
		return
	}
	for _, r := range rels {
		t.onRelease(r)
	}
}

// Cancel runs cancel, a call that makes the kernel give up operations,
// typically rdssock's CancelSentTo (RDS_CANCEL_SENT_TO) for one
// destination, and returns its error. The kernel reports each operation it
// gives up with status Canceled, and one it had already posted to the
// adapter is reported at once but its memory is free only when the
// adapter is done with it, which the kernel waits for inside the call.
// So while cancel runs, completions and late statuses are reported as
// usual but no operation is released; when cancel returns, every
// operation with a final status is released. Timed-out operations stay
// quarantined until their own late status arrives (Canceled, for those
// the call gave up): the receive loop must go on feeding Process.
func (t *Tracker) Cancel(cancel func() error) error {
	return t.cancelLane(0, cancel)
}

// cancelLane is Cancel; with a lane (not 0) it also covers the lane's
// operations sent before the call began: the kernel gives them no status,
// but it has waited for them when cancel returns.
func (t *Tracker) cancelLane(lane uint32, cancel func() error) error {
	t.mu.Lock()
	t.cancels++
	t.seals++
	seal := t.seals
	t.mu.Unlock()
	err := cancel()
	var rels []Completion
	t.mu.Lock()
	t.cancels--
	var b *batch
	if lane != 0 {
		b = t.getBatch()
		t.coverLocked(lane, seal, t.next, b)
	}
	if t.cancels == 0 {
		for i := 0; i < len(t.held); {
			if t.held[i].freed == Pending {
				i++
				continue
			}
			rels = append(rels, t.releaseHeldLocked(i))
		}
	}
	if len(t.waiters) > 0 {
		t.wakeLocked()
	}
	t.mu.Unlock()
	if b != nil {
		t.flush(b, Completion{}, false, Completion{}, false)
	}
	t.releaseHook(rels)
	return err
}

// sent records that the unsignaled operation tok's sendmsg returned: a
// lane operation sealed from now on covers it.
func (t *Tracker) sent(tok Token) {
	t.mu.Lock()
	if tok != 0 && tok < t.next {
		if sl := &t.slots[uint64(tok)&t.mask]; sl.tok == tok && sl.kind == kindUnsent {
			sl.kind, sl.epoch = kindSent, t.seals
		}
		if i := t.heldIndex(tok); i >= 0 && t.held[i].kind == kindUnsent {
			t.held[i].kind, t.held[i].epoch = kindSent, t.seals
		}
	}
	t.mu.Unlock()
}

// unsealedLocked reports whether a pending operation among tok (all:
// every token from the lowest pending one up to tok) is unsignaled with no
// status request after it to its lane: unsent, or sent with no sealed
// operation of its lane, pending or timed out, sealed since.
func (t *Tracker) unsealedLocked(tok Token, all bool) bool {
	from := tok
	if all {
		from = t.low
	}
	var hit Token // the last sealed operation found, reused for the next ones of its lane
	var hitLane uint32
	var hitSeal uint64
	for x := from; x <= tok && x < t.next; x++ {
		sl := &t.slots[uint64(x)&t.mask]
		if sl.tok != x || sl.status != Pending {
			continue
		}
		switch sl.kind {
		case kindUnsent:
			return true
		case kindSent:
		default:
			continue
		}
		if hit > x && hitLane == sl.lane && hitSeal > sl.epoch {
			continue
		}
		hit = 0
		for y := x + 1; y < t.next; y++ {
			s2 := &t.slots[uint64(y)&t.mask]
			if s2.tok == y && s2.kind == kindSealed && s2.lane == sl.lane && s2.epoch > sl.epoch && (s2.status == Pending || s2.status == TimedOut) {
				hit, hitLane, hitSeal = y, s2.lane, s2.epoch
				break
			}
		}
		if hit == 0 {
			return true
		}
	}
	return false
}

// Wait blocks until the operation tok is complete or ctx is done, and
// returns its status. The status of a failed operation is not an error
// here; the error is ctx.Err(), or ErrUnknownToken for a token this
// tracker did not issue or no longer remembers.
func (t *Tracker) Wait(ctx context.Context, tok Token) (Status, error) {
	t.mu.Lock()
	if t.unsealedLocked(tok, false) {
		t.mu.Unlock()
		return Pending, ErrUnsealed
	}
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
	if t.markLocked() >= upTo {
		t.mu.Unlock()
		return nil
	}
	if t.unsealedLocked(upTo, true) {
		t.mu.Unlock()
		return ErrUnsealed
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
		done := t.markLocked() >= upTo
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
		if i := t.heldIndex(tok); i >= 0 {
			return t.held[i].status
		}
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
// successfully or not, and released (its memory handed back; a
// quarantined operation holds the mark below its token). It is 0 before
// the first operation is released.
func (t *Tracker) HighWater() Token {
	t.mu.Lock()
	h := t.markLocked()
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

// Outstanding returns the number of operations still pending (without a
// completion). Stats().Quarantined counts those completed but not yet
// released.
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
// Pending operations stay pending and quarantined ones quarantined; use
// CompleteAll first to settle them.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
		t.timerAt = 0
	}
	if t.tick != nil {
		t.tick.Stop()
		t.ticking = false
	}
	t.mu.Unlock()
}
