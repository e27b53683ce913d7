//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// TestConcurrentContexts: goroutines waiting on one socket, each with its
// own context, plus one plain ReadMsg. Canceling one context or letting one
// time out wakes only that call; the others go on waiting and get the
// messages sent afterwards.
func TestConcurrentContexts(t *testing.T) {
	a, b := pair(t)
	canceled, cancel := context.WithCancel(context.Background())
	timed, cancelTimed := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancelTimed()
	long, cancelLong := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelLong()

	type result struct {
		name string
		msg  string
		err  error
	}
	results := make(chan result, 8)
	read := func(name string, ctx context.Context) {
		buf := make([]byte, 16)
		n, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0)
		results <- result{name, string(buf[:n]), err}
	}
	go read("canceled", canceled)
	go read("timed", timed)
	for _, name := range []string{"long1", "long2"} {
		go read(name, long)
	}
	go read("plain", context.Background())

	time.Sleep(20 * time.Millisecond)
	cancel()
	got := map[string]result{}
	for range 2 {
		r := <-results
		got[r.name] = r
	}
	if r := got["canceled"]; !errors.Is(r.err, context.Canceled) {
		t.Errorf("canceled read: %q, %v; want context.Canceled", r.msg, r.err)
	}
	if r := got["timed"]; !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("timed read: %q, %v; want context.DeadlineExceeded", r.msg, r.err)
	}
	select {
	case r := <-results:
		t.Fatalf("%s returned early: %q, %v", r.name, r.msg, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if _, err := a.WriteMsg([]byte(m), nil, noAddr); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range 3 {
		select {
		case r := <-results:
			if r.err != nil {
				t.Errorf("%s: %v", r.name, r.err)
			}
			seen[r.msg] = true
		case <-time.After(5 * time.Second):
			t.Fatal("a waiting read did not get its message")
		}
	}
	if len(seen) != 3 {
		t.Errorf("messages received: %v; want m1, m2, m3 once each", seen)
	}
}

// TestContextKeepsUserDeadline: a context wait neither clears nor extends
// the deadline the application set.
func TestContextKeepsUserDeadline(t *testing.T) {
	_, b := pair(t)
	if err := b.SetReadDeadline(time.Now().Add(80 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, _, _, err := b.ReadMsgContext(ctx, make([]byte, 8), nil, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadMsgContext: %v; want context.DeadlineExceeded", err)
	}
	long, cancelLong := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLong()
	start := time.Now()
	_, _, _, _, err := b.ReadMsgContext(long, make([]byte, 8), nil, 0)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsgContext past the socket's deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the socket's deadline was lost: the read took %v", d)
	}
	if _, _, _, _, err := b.ReadMsg(make([]byte, 8), nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsg past the socket's deadline: %v", err)
	}
}

// TestContextStress: many goroutines with short contexts on one socket
// while messages flow; every message is received exactly once.
func TestContextStress(t *testing.T) {
	a, b := pair(t)
	const msgs = 2000
	var mu sync.Mutex
	seen := make(map[byte]int)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				n, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("ReadMsgContext: %v", err)
						return
					}
					continue
				}
				mu.Lock()
				seen[buf[0]]++
				mu.Unlock()
				if n != 2 {
					t.Errorf("got %d bytes", n)
				}
			}
		}()
	}
	for i := range msgs {
		if _, err := a.WriteMsg([]byte{byte(i), byte(i >> 8)}, nil, noAddr); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		total := 0
		for _, n := range seen {
			total += n
		}
		mu.Unlock()
		if total == msgs || time.Now().After(deadline) {
			if total != msgs {
				t.Errorf("received %d of %d messages", total, msgs)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
}

// TestContextDeadlineLeftBehind: a read with a context deadline that
// returns early leaves that deadline on the socket (it is not cleared after
// every call); a later read without a context must sleep through it and
// still get the message sent after it passed, and a later read with the
// same context, canceled, must still wake.
func TestContextDeadlineLeftBehind(t *testing.T) {
	a, b := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	buf := make([]byte, 16)
	if _, err := a.WriteMsg([]byte("first"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	// The read waits briefly (the message is there), so read one that
	// must wait: send it a little later.
	go func() {
		time.Sleep(5 * time.Millisecond)
		a.WriteMsg([]byte("second"), nil, noAddr)
	}()
	for _, want := range []string{"first", "second"} {
		n, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read with context: %q, %v; want %q", buf[:n], err, want)
		}
	}
	go func() {
		time.Sleep(150 * time.Millisecond) // past the context's deadline
		a.WriteMsg([]byte("third"), nil, noAddr)
	}()
	n, _, _, _, err := b.ReadMsg(buf, nil)
	if err != nil || string(buf[:n]) != "third" {
		t.Fatalf("plain read after the context's deadline passed: %q, %v; want \"third\"", buf[:n], err)
	}

	// One context used call after call keeps a standing registration;
	// canceling it must still wake the next call.
	long, cancelLong := context.WithCancel(context.Background())
	for range 3 {
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := b.ReadMsgContext(long, buf, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	time.AfterFunc(20*time.Millisecond, cancelLong)
	start := time.Now()
	if _, _, _, _, err := b.ReadMsgContext(long, buf, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a canceled context: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the canceled read returned after %v", d)
	}
}

// TestContextDeadlineUnderUserDeadline: waits with a context whose
// deadline is earlier than the socket's own move the socket's deadline
// twice in all, not twice per call: to the context's for the first wait,
// which registers, and back for the next ones, which rely on the mux's
// watch of the context. A plain read afterwards ends at the socket's
// deadline.
func TestContextDeadlineUnderUserDeadline(t *testing.T) {
	a, b := pair(t)
	sets := 0
	set := b.readDeadline.set
	b.readDeadline.set = func(d time.Time) error { sets++; return set(d) }
	user := time.Now().Add(400 * time.Millisecond)
	if err := b.SetReadDeadline(user); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(150*time.Millisecond))
	defer cancel()
	buf := make([]byte, 16)
	before := sets
	const calls = 5
	for i := range calls {
		// The message comes a little later, so that each read waits.
		go func() {
			time.Sleep(2 * time.Millisecond)
			a.WriteMsg([]byte("m"), nil, noAddr)
		}()
		if _, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if n := sets - before; n > 2 {
		t.Errorf("%d waits with one context moved the socket's deadline %d times, want at most twice", calls, n)
	}
	<-ctx.Done() // the context's deadline, left behind, has passed
	_, _, _, _, err := b.ReadMsg(buf, nil)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("plain read: %v, want os.ErrDeadlineExceeded at the socket's deadline", err)
	}
	if now := time.Now(); now.Before(user) {
		t.Errorf("plain read ended %v before the socket's deadline (at the stale one)", user.Sub(now))
	}
}

// ctxErr reports a nil, an endless, a live and an ended context as such.
func TestCtxErr(t *testing.T) {
	live, cancel := context.WithCancel(context.Background())
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	expired, cancelExpired := context.WithTimeout(context.Background(), -time.Second)
	defer cancelExpired()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"nil", nil, nil},
		{"background", context.Background(), nil},
		{"live", live, nil},
		{"canceled", ended, context.Canceled},
		{"expired", expired, context.DeadlineExceeded},
	} {
		if got := ctxErr(c.ctx); got != c.want {
			t.Errorf("ctxErr(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	cancel()
	if got := ctxErr(live); got != context.Canceled {
		t.Errorf("ctxErr after cancel = %v, want %v", got, context.Canceled)
	}
}

// TestLocklessContextWait: a wait with the context the mux watches already
// (from an earlier wait) takes no registration; canceling the context, or
// its deadline passing, wakes it, and afterwards the socket's deadline is the
// application's again. A wait with another context meanwhile registers
// (the watch stays while the lockless wait relies on it) and is not
// disturbed by the first context's end.
func TestLocklessContextWait(t *testing.T) {
	a, b := pair(t)
	mux := &b.readDeadline
	state := func() (lockless int32, waiters int) {
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return mux.lockless.Load(), len(mux.waiters)
	}
	read := func(ctx context.Context) chan readResult { return readWithContext(b, ctx) }
	expect := func(got chan readResult, msg string, want error) {
		t.Helper()
		expectRead(t, "ReadMsgContext", got, msg, want)
	}
	send := func(msg string) { t.Helper(); sendString(t, a, msg) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first wait with ctx registers for its call only: a context
	// made for one call is canceled after it, which a registration left
	// standing would run in a goroutine of its own.
	got := read(ctx)
	waitFor(t, "a registered wait", func() bool { _, w := state(); return w == 1 })
	send("one")
	expect(got, "one", nil)
	if mux.watchedID.Load() != 0 {
		t.Fatal("the mux watches a context after its first call")
	}
	// The second registers and makes the mux watch ctx.
	got = read(ctx)
	waitFor(t, "a registered wait", func() bool { _, w := state(); return w == 1 })
	send("one more")
	expect(got, "one more", nil)
	if mux.watchedID.Load() != chanID(ctx.Done()) {
		t.Fatal("the mux does not watch a context after its second call")
	}
	// The next one relies on the watch.
	got = read(ctx)
	waitFor(t, "a lockless wait", func() bool { l, _ := state(); return l == 1 })
	if _, w := state(); w != 0 {
		t.Fatalf("a lockless wait and %d registered ones, want none", w)
	}
	// A wait with another context registers on its own.
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	gotOther := read(other)
	waitFor(t, "a second, registered wait", func() bool { _, w := state(); return w == 1 })
	cancel()
	expect(got, "", context.Canceled)
	waitFor(t, "the lockless wait to leave", func() bool { l, _ := state(); return l == 0 })
	mux.mu.Lock()
	ended, applied := mux.locklessEnd.Load(), mux.applied
	mux.mu.Unlock()
	if ended || !applied.IsZero() {
		t.Errorf("after the lockless wait left: locklessEnd %v, deadline %v; want false and none", ended, applied)
	}
	send("two")
	expect(gotOther, "two", nil)

	// A context with a deadline is watched the same way: its first two
	// waits register, the next takes no lock and withdraws the deadline
	// the second one left, and the context's deadline passing wakes it.
	timed, cancelTimed := context.WithTimeout(context.Background(), time.Second)
	defer cancelTimed()
	for _, msg := range []string{"three", "three more"} {
		got = read(timed)
		waitFor(t, "a registered wait", func() bool { _, w := state(); return w == 1 })
		send(msg)
		expect(got, msg, nil)
	}
	got = read(timed)
	// It counts itself before it withdraws the deadline.
	waitFor(t, "a lockless wait with no deadline applied", func() bool {
		l, w := state()
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return l == 1 && w == 0 && mux.applied.IsZero()
	})
	deadline, _ := timed.Deadline()
	expect(got, "", context.DeadlineExceeded)
	if early := time.Until(deadline); early > 0 {
		t.Errorf("the lockless wait ended %v before its context's deadline", early)
	}
	waitFor(t, "the lockless wait to leave", func() bool { l, _ := state(); return l == 0 })
	mux.mu.Lock()
	ended, applied = mux.locklessEnd.Load(), mux.applied
	mux.mu.Unlock()
	if ended || !applied.IsZero() {
		t.Errorf("after the lockless wait left: locklessEnd %v, deadline %v; want false and none", ended, applied)
	}
}

// TestWatchedContextEndsDuringAProbe: a wait whose context is not the
// watched one counts itself for a moment while it checks (enterLockless).
// If the watched context ends in that moment, the mux takes the check for
// a lockless wait and applies a deadline in the past until the count falls
// to 0 again; the check's own exit must then apply the right deadline.
// Left in place, that deadline ended every later read at once, and a read
// with a context of its own retried until that context ended, with a
// message waiting (seen under -race as block-server replies never read).
// The interleaving is forced here by holding such a count by hand.
func TestWatchedContextEndsDuringAProbe(t *testing.T) {
	a, b := pair(t)
	mux := &b.readDeadline
	read := func(ctx context.Context) chan readResult { return readWithContext(b, ctx) }
	send := func(msg string) { t.Helper(); sendString(t, a, msg) }
	registered := func() bool {
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return len(mux.waiters) == 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, msg := range []string{"one", "one more"} {
		got := read(ctx) // registers; the second makes the mux watch ctx
		waitFor(t, "a registered wait", registered)
		send(msg)
		expectRead(t, "read with the watched context", got, msg, nil)
	}
	if mux.watchedID.Load() != chanID(ctx.Done()) {
		t.Fatal("the mux does not watch a context after its second call")
	}

	mux.lockless.Add(1) // a check in progress, by a wait with another context
	cancel()
	waitFor(t, "the watched context's end", func() bool {
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return mux.watchedID.Load() == 0
	})
	mux.uncount() // the check finds it may not go lockless
	mux.mu.Lock()
	ended, applied := mux.locklessEnd.Load(), mux.applied
	mux.mu.Unlock()
	if ended || !applied.IsZero() {
		t.Errorf("after the check left: locklessEnd %v, deadline %v; want false and none", ended, applied)
	}

	other, cancelOther := context.WithTimeout(context.Background(), time.Minute)
	defer cancelOther()
	got := read(other)
	waitFor(t, "a registered wait with another context", registered)
	send("two")
	expectRead(t, "read with another context", got, "two", nil)
}

// TestReadsWithAContextEach: request and answer, each read with a context
// of its own that is canceled after it returns, while every wait, or one
// in a few, parks in the runtime poller. Each read must get its answer:
// a watched context's end racing the next read's check (see
// TestWatchedContextEndsDuringAProbe) left reads failing at their
// context's deadline, with the answer queued, within a few thousand rounds
// under -race.
func TestReadsWithAContextEach(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for _, wall := range []time.Duration{0, 300 * time.Microsecond} {
		t.Run(fmt.Sprintf("park after %v", wall), func(t *testing.T) {
			wall0 := parkWall
			parkWall = wall
			defer func() { parkWall = wall0 }()
			a, b := pair(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			echoed := make(chan error, 1)
			go func() { // answers every request, with one long-lived context
				buf := make([]byte, 16)
				for {
					n, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0)
					if err == nil && string(buf[:n]) != "quit" {
						_, err = b.WriteMsgContext(ctx, buf[:n], nil, noAddr, 0)
					}
					if err != nil || string(buf[:n]) == "quit" {
						echoed <- err
						return
					}
				}
			}()
			buf := make([]byte, 16)
			for i := range rounds {
				if _, err := a.WriteMsg([]byte("ping"), nil, noAddr); err != nil {
					t.Fatal(err)
				}
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				n, _, _, _, err := a.ReadMsgContext(rctx, buf, nil, 0)
				rcancel()
				if err != nil || string(buf[:n]) != "ping" {
					t.Fatalf("round %d: %q, %v", i, buf[:n], err)
				}
			}
			if _, err := a.WriteMsg([]byte("quit"), nil, noAddr); err != nil {
				t.Fatal(err)
			}
			if err := <-echoed; err != nil {
				t.Fatalf("the answering side: %v", err)
			}
		})
	}
}

// readWithContext starts ReadMsgContext on c in the background.
func readWithContext(c *Conn, ctx context.Context) chan readResult {
	got := make(chan readResult, 1)
	go func() {
		buf := make([]byte, 16)
		n, _, _, _, err := c.ReadMsgContext(ctx, buf, nil, 0)
		got <- readResult{string(buf[:n]), err}
	}()
	return got
}

// sendString sends msg on c, to its peer.
func sendString(t *testing.T, c *Conn, msg string) {
	t.Helper()
	if _, err := c.WriteMsg([]byte(msg), nil, noAddr); err != nil {
		t.Fatal(err)
	}
}
