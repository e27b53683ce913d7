//go:build linux

package rdssock

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"time"
)

// The runtime poller offers one deadline per direction and socket, and it
// is the only way to wake a goroutine waiting there. Contexts are built on
// it: a call waiting with a context lowers the socket's deadline to the
// context's, or moves it into the past when the context is canceled. Since
// several goroutines may wait on one socket, each with its own context, and
// the application may set its own deadline too, every wait registers with a
// deadlineMux, which applies the earliest of them all. A goroutine woken by
// someone else's deadline finds its own not reached and waits again.

// firstTry runs a poller callback once, outside the poller (through
// RawConn.Control), and records whether it finished. Ops bind it once, so
// a try allocates nothing.
type firstTry struct {
	f    func(fd uintptr) bool
	run  func(fd uintptr) // bound to do
	done bool
}

func (t *firstTry) bind(f func(uintptr) bool) {
	t.f = f
	t.run = t.do
}

func (t *firstTry) do(fd uintptr) { t.done = t.f(fd) }

// deadlineMux arbitrates one direction's poller deadline.
type deadlineMux struct {
	mu      sync.Mutex
	set     func(time.Time) error // the socket's SetReadDeadline or SetWriteDeadline
	user    time.Time             // set with SetDeadline/SetReadDeadline/SetWriteDeadline
	waiters map[*ctxWaiter]struct{}
}

// ctxWaiter is one call waiting with a context that can end.
type ctxWaiter struct {
	deadline time.Time // zero if the context has none
	done     bool      // the context ended
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
	d := m.user
	for w := range m.waiters {
		switch {
		case w.done:
			return m.set(aLongTimeAgo)
		case !w.deadline.IsZero() && (d.IsZero() || w.deadline.Before(d)):
			d = w.deadline
		}
	}
	return m.set(d)
}

func (m *deadlineMux) add(w *ctxWaiter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiters == nil {
		m.waiters = make(map[*ctxWaiter]struct{})
	}
	m.waiters[w] = struct{}{}
	return m.applyLocked()
}

func (m *deadlineMux) end(w *ctxWaiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.done = true
	_ = m.applyLocked()
}

func (m *deadlineMux) remove(w *ctxWaiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.waiters, w)
	_ = m.applyLocked()
}

// wait runs f in the poller (read or write side) until f reports done, the
// application's deadline passes, ctx ends (ctx may be nil), or the socket
// is closed.
//
// With a context that can end, try (if not nil) first runs f once outside
// the poller: most calls find the socket ready, and then they skip the
// deadline bookkeeping of a cancelable wait, which costs more than the
// system call itself.
func (c *Conn) wait(ctx context.Context, write bool, f func(uintptr) bool, try *firstTry) error {
	if ctx != nil && ctx.Done() != nil {
		if try != nil && ctx.Err() == nil {
			try.done = false
			if c.rc.Control(try.run) == nil && try.done {
				return nil
			}
		}
		return c.waitContext(ctx, write, f)
	}
	poll, mux := c.rc.Read, &c.readDeadline
	if write {
		poll, mux = c.rc.Write, &c.writeDeadline
	}
	for {
		err := poll(f)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || mux.userPassed() {
			return err
		}
		// Woken by another goroutine's context: wait again once it has
		// had the chance to withdraw its deadline.
		runtime.Gosched()
	}
}

func (c *Conn) waitContext(ctx context.Context, write bool, f func(uintptr) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	poll, mux := c.rc.Read, &c.readDeadline
	if write {
		poll, mux = c.rc.Write, &c.writeDeadline
	}
	w := &ctxWaiter{}
	w.deadline, _ = ctx.Deadline()
	if err := mux.add(w); err != nil {
		mux.remove(w)
		return err
	}
	stop := context.AfterFunc(ctx, func() { mux.end(w) })
	var err error
	for {
		err = poll(f)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if ctx.Err() != nil || mux.userPassed() {
			break
		}
		if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
			<-ctx.Done() // the poller's timer can fire just before the context's
			break
		}
		runtime.Gosched() // someone else's deadline: wait again
	}
	stop()
	mux.remove(w)
	if err != nil && ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return ctx.Err()
	}
	return err
}
