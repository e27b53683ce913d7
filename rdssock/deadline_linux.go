//go:build linux

package rdssock

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The runtime poller offers one deadline per direction and socket, and it
// is the only way to wake a goroutine waiting there. Contexts are built on
// it: a call waiting with a context lowers the socket's deadline to the
// context's, or moves it into the past when the context is canceled. Since
// several goroutines may wait on one socket, each with its own context, and
// the application may set its own deadline too, every wait registers with a
// deadlineMux, which applies the earliest of them all. A goroutine woken by
// someone else's deadline finds its own not reached and waits again.

// opWait is an op's state for waiting in the poller: the callback, which
// a call with a context also tries once outside the poller first, and the
// op's registration with a deadlineMux. Ops bind it once and are pooled,
// so a wait allocates nothing.
type opWait struct {
	f func(fd uintptr) bool
	w ctxWaiter
}

func (o *opWait) bind(f func(uintptr) bool) { o.f = f }

// deadlineMux arbitrates one direction's poller deadline.
//
// Setting the poller's deadline updates a runtime timer, and watching a
// context costs a context.AfterFunc registration; a loop that waits with
// the same context call after call pays for neither more than once. The
// deadline last applied is not set again while it stays right, and when
// the last waiter leaves it stays (stale; it is never later than the
// application's): a wait that it wakes for nothing applies the right one
// and waits again. The mux watches the end of one context (by its Done channel) with a standing
// registration that outlives the calls; a waiter with another context,
// while the watched one is in use, registers its own.
type deadlineMux struct {
	mu      sync.Mutex
	set     func(time.Time) error // the socket's SetReadDeadline or SetWriteDeadline
	user    time.Time             // set with SetDeadline/SetReadDeadline/SetWriteDeadline
	waiters []*ctxWaiter          // a few at most, so a slice
	applied time.Time             // what the poller has; zero: no deadline
	stale   atomic.Bool           // applied is left from waiters that are gone (set under mu)

	watched   <-chan struct{} // the Done channel watched by stopWatch's registration
	stopWatch func() bool
	watchers  int // waiters relying on that registration
	// lastDone is the Done channel of the latest waiter's context. Only
	// a context seen again gets the standing registration: a context
	// made for one call (context.WithTimeout around each read) is
	// canceled right after it, which runs a registration that outlived
	// the call in a goroutine of its own, and a goroutine per call costs
	// thread wake-ups; the call's own registration is stopped instead.
	lastDone <-chan struct{}

	// Waits with the watched context may also rely on the standing
	// registration without the lock (waitContext): watchedID is the
	// address of the watched channel while they may, which is until the
	// watched context ends (canceled, or at its deadline: the context's
	// own timer ends it), else 0; lockless counts them. The watch is
	// replaced only while none relies on it.
	// locklessEnd is set when the watched context ended while some did: its
	// deadline in the past stays applied until the last of them leaves.
	// lockless also counts, for a moment, every wait that checks whether
	// it may go lockless and finds that it may not (enterLockless), so
	// whoever takes the count to 0 looks at locklessEnd (uncount).
	watchedID   atomic.Uintptr
	lockless    atomic.Int32
	locklessEnd atomic.Bool // set and cleared under mu
}

// ctxWaiter is one call waiting with a context that can end.
type ctxWaiter struct {
	ctx      context.Context
	doneCh   <-chan struct{}
	deadline time.Time   // zero if the context has none
	done     bool        // the context ended
	standing bool        // the mux's standing registration watches ctx
	stop     func() bool // else: its own registration
	gen      uint64      // counts the calls that used this (pooled) waiter
}

// setUser records and applies the application's deadline.
func (m *deadlineMux) setUser(t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.user = t
	return m.applyLocked()
}

// userPassed reports whether the application's deadline has passed.
func (m *deadlineMux) userPassed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.user.IsZero() && !time.Now().Before(m.user)
}

// userDeadline returns the application's deadline; zero means none.
func (m *deadlineMux) userDeadline() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user
}

func (m *deadlineMux) applyLocked() error {
	if m.locklessEnd.Load() {
		return m.setLocked(aLongTimeAgo)
	}
	d := m.user
	for _, w := range m.waiters {
		switch {
		case w.done:
			return m.setLocked(aLongTimeAgo)
		case !w.deadline.IsZero() && (d.IsZero() || w.deadline.Before(d)):
			d = w.deadline
		}
	}
	return m.setLocked(d)
}

func (m *deadlineMux) setLocked(d time.Time) error {
	m.stale.Store(false)
	if sameInstant(d, m.applied) {
		return nil
	}
	if err := m.set(d); err != nil {
		return err
	}
	m.applied = d
	return nil
}

// sameInstant is t.Equal(u), decided without a call when both are the
// same value (no deadline on either side, most often).
func sameInstant(t, u time.Time) bool { return t == u || t.Equal(u) }

// refresh applies the right deadline if a stale one is in force, and
// reports whether it was.
func (m *deadlineMux) refresh() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stale.Load() {
		return false
	}
	_ = m.applyLocked()
	return true
}

// add registers w, waiting with ctx (whose Done channel is done), and
// arranges for ctx's end to wake it.
func (m *deadlineMux) add(w *ctxWaiter, ctx context.Context, done <-chan struct{}) error {
	w.ctx, w.doneCh, w.done, w.standing, w.stop = ctx, done, false, false, nil
	w.deadline, _ = ctx.Deadline()
	// The lock is released by hand (here and in remove): these run
	// around every wait with a context, and a deferred call costs a
	// call more.
	m.mu.Lock()
	m.waiters = append(m.waiters, w)
	w.gen++
	switch {
	case w.doneCh == m.watched:
		w.standing = true
	case m.watchers == 0 && w.doneCh == m.lastDone && m.unwatch():
		done := w.doneCh
		m.watched = done
		m.stopWatch = context.AfterFunc(ctx, func() { m.ended(done) })
		w.standing = true
		m.watchedID.Store(chanID(done))
	default:
		// The waiter is pooled with its op: the registration may fire
		// after this call ended and the waiter serves another one, so it
		// names the call.
		gen := w.gen
		w.stop = context.AfterFunc(ctx, func() { m.end(w, gen) })
	}
	m.lastDone = w.doneCh
	if w.standing {
		m.watchers++
		// The watched context may have ended, and its registration run,
		// since the caller checked.
		w.done = ctx.Err() != nil
	}
	err := m.applyLocked()
	m.mu.Unlock()
	return err
}

// unwatch drops the standing registration so that another context can be
// watched, unless lockless waits rely on it: it reports whether it did.
// m.mu is held.
func (m *deadlineMux) unwatch() bool {
	// A lockless wait counts itself before it compares watchedID: with
	// watchedID cleared first, either the wait sees that, or this sees
	// the wait.
	id := m.watchedID.Swap(0)
	if m.lockless.Load() != 0 {
		m.watchedID.Store(id)
		return false
	}
	if m.stopWatch != nil {
		m.stopWatch()
	}
	m.watched, m.stopWatch = nil, nil
	return true
}

// chanID identifies a channel by its address, for deadlineMux.watchedID.
// The mux keeps the watched channel, so the address is not reused while
// it is compared.
func chanID(ch <-chan struct{}) uintptr { return *(*uintptr)(unsafe.Pointer(&ch)) }

// ended runs when the watched context ends: its waiters are done, and the
// lockless ones are woken by a deadline in the past.
func (m *deadlineMux) ended(done <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watched != done {
		return // replaced meanwhile
	}
	m.watchedID.Store(0)
	for _, w := range m.waiters {
		if w.standing {
			w.done = true
		}
	}
	// A lockless wait counted itself before it checked its context, and
	// the context ended before this runs: if the wait saw the context
	// live, this sees the wait. locklessEnd is set before the count is
	// read, and uncount reads it after it lowered the count, so a count
	// this sees is lowered by someone who then sees locklessEnd (a wait
	// that is only checking whether it may go lockless may be counted
	// here too).
	m.locklessEnd.Store(true)
	if m.lockless.Load() == 0 {
		m.locklessEnd.Store(false)
	}
	_ = m.applyLocked()
}

// enterLockless counts a wait with the context whose Done channel is done
// as relying on the standing registration without the lock, if it may: the
// context is watched and, as the caller checks after this returns true,
// has not ended. A stale deadline that an earlier registered wait left
// (the context's own, or another's) would only make each such wait read
// the clock; it is withdrawn, once. leaveLockless undoes the count.
func (m *deadlineMux) enterLockless(done <-chan struct{}) bool {
	m.lockless.Add(1)
	if m.watchedID.Load() != chanID(done) {
		m.uncount()
		return false
	}
	if m.stale.Load() {
		m.refresh()
	}
	return true
}

// leaveLockless ends a lockless wait.
func (m *deadlineMux) leaveLockless() { m.uncount() }

// uncount lowers the lockless count. The last one out after the watched
// context ended (locklessEnd) applies the right deadline again: left in
// place, the deadline in the past would end every later wait on the
// socket at once, and a wait with a context of its own would go on
// trying until that context ended.
func (m *deadlineMux) uncount() {
	if m.lockless.Add(-1) != 0 || !m.locklessEnd.Load() {
		return
	}
	m.mu.Lock()
	if m.locklessEnd.Load() && m.lockless.Load() == 0 {
		m.locklessEnd.Store(false)
		_ = m.applyLocked()
	}
	m.mu.Unlock()
}

func (m *deadlineMux) end(w *ctxWaiter, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.waiters, w) || w.gen != gen {
		return // that call is over
	}
	w.done = true
	_ = m.applyLocked()
}

func (m *deadlineMux) remove(w *ctxWaiter) {
	if w.stop != nil {
		w.stop()
	}
	m.mu.Lock()
	m.waiters = removeWaiter(m.waiters, w)
	if w.standing {
		m.watchers--
	}
	w.ctx, w.stop = nil, nil
	if len(m.waiters) == 0 && m.applied != aLongTimeAgo { // set from that very value, if at all
		// The last waiter leaves its deadline, which is never later than
		// the application's: a wait it wakes early applies the right one
		// (refresh) and waits again. A loop that waits with a context
		// that has a deadline, on a socket with a deadline of its own
		// (rdmaops' reader does), moved the socket's deadline twice per
		// call otherwise.
		m.stale.Store(!sameInstant(m.applied, m.user))
		m.mu.Unlock()
		return
	}
	_ = m.applyLocked()
	m.mu.Unlock()
}

// release drops the standing registration (the socket is closing).
func (m *deadlineMux) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchedID.Store(0)
	if m.stopWatch != nil {
		m.stopWatch()
	}
	m.watched, m.stopWatch = nil, nil
}

// wait runs f in the poller (read or write side) until f reports done, the
// application's deadline passes, ctx ends (ctx may be nil), or the socket
// is closed. It first runs f once outside the poller: most calls find the
// socket ready and go no further.
func (c *Conn) wait(ctx context.Context, write bool, ow *opWait) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if c.k.acquire() {
		ok := ow.f(uintptr(c.k.fd))
		c.k.release()
		if ok {
			return nil
		}
	}
	return c.waitAfterTry(ctx, write, ow)
}

// ctxErr is ctx's error, or nil for a nil ctx. A cancelable context's Err
// is an atomic load in the Go releases this module needs (go.mod): one
// call, where a non-blocking receive from Done takes three more in the
// runtime.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// waitAfterTry is wait for a caller whose own try of f (outside the
// poller, after ctxErr) just found nothing to do: it waits before it
// tries again.
func (c *Conn) waitAfterTry(ctx context.Context, write bool, ow *opWait) error {
	if ctx != nil {
		if done := ctx.Done(); done != nil {
			return c.waitContext(ctx, done, write, ow) // done goes down: asked once
		}
	}
	mux := &c.readDeadline
	if write {
		mux = &c.writeDeadline
	}
	return c.waitOn(nil, mux, write, ow)
}

// waitOn waits for ow until it is done, the application's deadline on
// mux passes, ctx (nil: none) ends, or an error, for a wait that holds no
// registration with mux. A wake-up by a stale deadline (applied again
// now), or by another goroutine's context, tries and waits again once
// that goroutine has had the chance to withdraw its deadline.
func (c *Conn) waitOn(ctx context.Context, mux *deadlineMux, write bool, ow *opWait) error {
	for tryFirst := false; ; tryFirst = true {
		err := c.k.wait(ow.f, write, tryFirst)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if ctx != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
		}
		if mux.userPassed() {
			return err
		}
		if !mux.refresh() {
			runtime.Gosched()
		}
	}
}

func (c *Conn) waitContext(ctx context.Context, done <-chan struct{}, write bool, ow *opWait) error {
	// The caller's try just failed: wait before the next one.
	mux := &c.readDeadline
	if write {
		mux = &c.writeDeadline
	}
	if mux.enterLockless(done) {
		// ctx is watched already: the wait neither registers nor takes
		// the mux's lock. When ctx ends (canceled, or its deadline
		// passed), the mux applies a deadline in the past, which wakes
		// it.
		err := ctx.Err()
		if err == nil {
			err = c.waitOn(ctx, mux, write, ow)
		}
		mux.leaveLockless()
		return err
	}
	w := &ow.w
	if err := mux.add(w, ctx, done); err != nil {
		mux.remove(w)
		return err
	}
	var err error
	for {
		err = c.k.wait(ow.f, write, false)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if ctx.Err() != nil || mux.userPassed() {
			break
		}
		if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
			<-done // the poller's timer can fire just before the context's
			break
		}
		runtime.Gosched() // someone else's deadline: wait again
	}
	mux.remove(w)
	if err != nil && ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return ctx.Err()
	}
	return err
}
