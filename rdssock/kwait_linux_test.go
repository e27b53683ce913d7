//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFullSendBufferWaits: a send that finds the send buffer full waits
// (in ppoll or the runtime poller, for POLLOUT) until the peer reads, then
// goes through; a write deadline ends such a wait; Close ends it with
// net.ErrClosed.
func TestFullSendBufferWaits(t *testing.T) {
	a, b := pair(t)
	msg := make([]byte, 1024)
	filled := 0
	for {
		if _, err := a.WriteMsgContext(t.Context(), msg, nil, noAddr, unix.MSG_DONTWAIT); err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("filling the send buffer: %v", err)
			}
			break
		}
		filled++
	}
	if filled == 0 {
		t.Fatal("no message fit the send buffer")
	}
	// A deadline ends the wait.
	a.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := a.WriteMsg(msg, nil, noAddr); !isTimeout(err) {
		t.Fatalf("WriteMsg on a full buffer with a 30ms deadline: %v; want a timeout", err)
	}
	a.SetWriteDeadline(time.Time{})
	// Reading on the other side lets a waiting send through.
	errc := make(chan error, 1)
	go func() {
		_, err := a.WriteMsg(msg, nil, noAddr)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("WriteMsg on a full buffer returned %v before the peer read", err)
	default:
	}
	buf := make([]byte, len(msg))
	for i := 0; i < filled; i++ {
		if _, _, _, _, err := b.ReadMsg(buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("waiting WriteMsg after the peer read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteMsg still waiting 5s after the peer emptied the queue")
	}
	// Close ends a waiting send.
	for {
		if _, err := a.WriteMsgContext(t.Context(), msg, nil, noAddr, unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	go func() {
		_, err := a.WriteMsg(msg, nil, noAddr)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("WriteMsg waiting while the socket closed: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteMsg still waiting 5s after Close")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestWaitingReadsLeaveAPFree: reads sleeping in the kernel never hold
// every P. With one, two and three readers waiting, at GOMAXPROCS 1 and 2,
// another goroutine's timers keep their pace and a garbage collection
// (which stops the world) completes promptly.
func TestWaitingReadsLeaveAPFree(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, readers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("GOMAXPROCS=%d/readers=%d", procs, readers), func(t *testing.T) {
				defer setGOMAXPROCS(procs)()
				var wg sync.WaitGroup
				var conns []*Conn
				for i := 0; i < readers; i++ {
					a, b := pair(t)
					conns = append(conns, a)
					wg.Add(1)
					go func() {
						defer wg.Done()
						b.ReadMsg(make([]byte, 8), nil)
					}()
				}
				time.Sleep(20 * time.Millisecond) // the readers are waiting
				start := time.Now()
				for i := 0; i < 20; i++ {
					time.Sleep(time.Millisecond)
				}
				if d := time.Since(start); d > 200*time.Millisecond {
					t.Errorf("20 sleeps of 1ms took %v while %d readers waited in the kernel", d, readers)
				}
				start = time.Now()
				runtime.GC()
				if d := time.Since(start); d > time.Second {
					t.Errorf("a garbage collection took %v while %d readers waited in the kernel", d, readers)
				}
				for _, a := range conns {
					if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
			})
		}
	}
}

// TestOneReaderSleepsSolo: the first read to wait on a socket sleeps as
// its solo waiter, outside the waiting list; a second one at the same time
// joins the list. Each is woken by a message; a canceled context, a
// deadline and Close wake the solo read as well, through its eventfd.
func TestOneReaderSleepsSolo(t *testing.T) {
	defer setGOMAXPROCS(4)()
	// Sleeps that never end by themselves: only the wake-ups end them.
	defer setSleepLimits(time.Hour)()
	a, b := pair(t)
	waiting := func() int {
		b.k.mu.Lock()
		defer b.k.mu.Unlock()
		return len(b.k.waiting)
	}
	result := func(got chan error, want error) {
		t.Helper()
		select {
		case err := <-got:
			if !errors.Is(err, want) {
				t.Fatalf("ReadMsg: %v, want %v", err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a read still waiting after 5s")
		}
	}

	first := readInBackground(b)
	waitFor(t, "a read sleeping in ppoll", func() bool { return kernelWaiters.Load() == 1 })
	if !b.k.soloBusy.Load() || waiting() != 0 {
		t.Fatalf("one read sleeping: solo %v, %d in the waiting list; want the solo waiter", b.k.soloBusy.Load(), waiting())
	}
	second := readInBackground(b)
	waitFor(t, "a second read in the waiting list", func() bool { return waiting() == 1 })
	for range 2 {
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
	}
	result(first, nil)
	result(second, nil)
	if b.k.soloBusy.Load() || waiting() != 0 {
		t.Fatalf("no read waiting: solo %v, %d in the waiting list", b.k.soloBusy.Load(), waiting())
	}

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, _, _, _, err := b.ReadMsgContext(ctx, make([]byte, 8), nil, 0)
		got <- err
	}()
	waitFor(t, "the solo read with a context", func() bool { return b.k.soloBusy.Load() && kernelWaiters.Load() == 1 })
	cancel()
	result(got, context.Canceled)

	got = readInBackground(b)
	waitFor(t, "the solo read", func() bool { return b.k.soloBusy.Load() && kernelWaiters.Load() == 1 })
	if err := b.SetReadDeadline(aLongTimeAgo); err != nil {
		t.Fatal(err)
	}
	result(got, os.ErrDeadlineExceeded)

	// A deadline ahead: the read sleeps as the solo waiter until it
	// passes, however distant it is.
	start := time.Now()
	for _, dl := range []time.Time{start.Add(50 * time.Millisecond), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := b.SetReadDeadline(dl); err != nil {
			t.Fatal(err)
		}
		got = readInBackground(b)
		waitFor(t, "the solo read with a deadline", func() bool { return b.k.soloBusy.Load() && kernelWaiters.Load() == 1 })
		if dl.Year() == 3000 {
			if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
				t.Fatal(err)
			}
			result(got, nil)
			continue
		}
		result(got, os.ErrDeadlineExceeded)
		if now := time.Now(); now.Before(dl) {
			t.Fatalf("a read with a deadline returned %v before it", dl.Sub(now))
		}
	}

	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	got = readInBackground(b)
	waitFor(t, "the solo read", func() bool { return b.k.soloBusy.Load() && kernelWaiters.Load() == 1 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	result(got, net.ErrClosed)
}

// TestSoloWakeUps: SetReadDeadline and Close write the solo waiter's
// eventfd while a read holds it, and leave it alone otherwise. (A solo
// read that missed a wake-up would still return once sysmon preempts its
// sleep, so TestOneReaderSleepsSolo alone cannot tell.)
func TestSoloWakeUps(t *testing.T) {
	_, b := pair(t)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := unix.Dup(efd) // outlives Close, which closes efd
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(seen)
	written := func() bool {
		var buf [8]byte
		n, err := unix.Read(seen, buf[:])
		return err == nil && n == 8
	}
	b.k.mu.Lock()
	b.k.soloEfd = efd
	b.k.mu.Unlock()

	if err := b.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if written() {
		t.Error("SetReadDeadline with no solo read wrote the solo eventfd")
	}
	b.k.soloBusy.Store(true)
	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !written() {
		t.Error("SetReadDeadline did not wake the solo read")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !written() {
		t.Error("Close did not wake the solo read")
	}
	if b.k.soloEfd != -1 {
		t.Errorf("after Close the solo eventfd is %d, want -1 (closed)", b.k.soloEfd)
	}
}

// TestIdleReadParks: a read sleeps in ppoll for kernelSlice at most, then
// parks in the runtime poller, holding no P; the message still wakes it.
func TestIdleReadParks(t *testing.T) {
	defer setGOMAXPROCS(4)()
	a, b := pair(t)
	got := make(chan error, 1)
	go func() {
		_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for kernelWaiters.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if kernelWaiters.Load() != 1 {
		t.Fatal("the waiting read never slept in ppoll")
	}
	time.Sleep(3 * kernelSlice)
	if n := kernelWaiters.Load(); n != 0 {
		t.Errorf("%v after the read began waiting: %d goroutines sleeping in ppoll, want 0", 3*kernelSlice, n)
	}
	if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("ReadMsg: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked read did not return 5s after a message was sent")
	}
}

// readInstance is c's read epoll instance: the socket in it, parked reads
// holding it, and whether it stays without them.
func readInstance(c *Conn) (in bool, holders int, kept bool) {
	c.k.mu.Lock()
	e := c.k.er
	c.k.mu.Unlock()
	if e == nil {
		return false, 0, c.k.readKept.Load()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.in, e.holders, c.k.readKept.Load()
}

// readInBackground starts a ReadMsg of c and returns where its error goes.
func readInBackground(c *Conn) chan error {
	got := make(chan error, 1)
	go func() {
		_, _, _, _, err := c.ReadMsg(make([]byte, 8), nil)
		got <- err
	}()
	return got
}

// TestLongSleepingReadsPark: once parkWall has passed since a read of a
// socket last came back from a park, the next read that must wait parks
// in the runtime poller at once, lets go of the socket there when it
// returns and notes when it came back, and the read after it sleeps in
// ppoll again.
func TestLongSleepingReadsPark(t *testing.T) {
	defer setGOMAXPROCS(4)()
	a, b := pair(t)
	holders := func() int { _, h, _ := readInstance(b); return h }
	read := func() chan error { return readInBackground(b) }
	send := func(got chan error) {
		t.Helper()
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("ReadMsg: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the read did not return 5s after its message was sent")
		}
	}

	// As if reads had gone on for twice parkWall without parking.
	b.k.parked.Add(-2 * int64(parkWall))
	got := read()
	deadline := time.Now().Add(5 * time.Second)
	for holders() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if h := holders(); h != 1 {
		t.Fatalf("the read held the socket in the read instance %d times, want 1 (parked)", h)
	}
	time.Sleep(2 * time.Millisecond)
	send(got)
	if since := time.Since(monoBase) - time.Duration(b.k.parked.Load()); since < 0 || since > time.Second {
		t.Errorf("the parked read came back %v ago by its note, want just now", since)
	}
	// With Ps to spare the parked read took the socket out when it
	// returned: the next read is likely to sleep in ppoll, or to find a
	// message without waiting, and meanwhile the socket's wake-ups would
	// reach the runtime poller for nothing.
	if in, _, kept := readInstance(b); in || kept {
		t.Errorf("after the parked read returned with GOMAXPROCS 4: socket in the read instance %v, kept %v; want neither", in, kept)
	}

	got = read()
	deadline = time.Now().Add(5 * time.Second)
	for kernelWaiters.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if n := kernelWaiters.Load(); n != 1 {
		t.Errorf("after the park, %d reads sleep in ppoll, want 1", n)
	}
	send(got)
}

// TestParkDue: parkDue counts wall time since the last park (or since the
// socket was made), not sleeps: a reader that computes between short
// waits parks as often as one that sleeps throughout.
func TestParkDue(t *testing.T) {
	k := newKfd(-1)
	if due, left := k.parkDue(int64(time.Since(monoBase))); due || left <= parkWall || left > parkWall+parkCap {
		t.Fatalf("parkDue on a socket just made: %v, %v left; want false, up to parkWall+parkCap", due, left)
	}
	k.parked.Add(-int64(parkWall - time.Millisecond))
	// A sleep from here may last about 1ms+parkCap: a lull in the
	// traffic must not keep the reader from the scheduler past
	// sysmon's 10ms.
	if due, left := k.parkDue(int64(time.Since(monoBase))); due || left <= parkCap || left > time.Millisecond+parkCap {
		t.Fatalf("parkDue 1ms short of parkWall since the last park: %v, %v left; want false, at most 1ms+parkCap", due, left)
	}
	k.parked.Add(-int64(2 * time.Millisecond))
	if due, _ := k.parkDue(int64(time.Since(monoBase))); !due {
		t.Fatal("parkDue 1ms past parkWall since the last park: false")
	}
	if since := time.Since(monoBase) - time.Duration(k.parked.Load()); since < 0 || since > time.Second {
		t.Fatalf("parkDue that parks noted the park %v ago, want now", since)
	}
	if due, _ := k.parkDue(int64(time.Since(monoBase))); due {
		t.Fatal("parkDue right after it parked: true")
	}
}

// TestSleepEndsBeforeSysmon: a read that begins its wait shortly before
// parkWall has passed since its socket's last park sleeps only until
// parkWall+parkCap, then parks, instead of sleeping its whole kernelSlice
// (which would outlast sysmon's 10ms).
func TestSleepEndsBeforeSysmon(t *testing.T) {
	defer setGOMAXPROCS(4)()
	// The read sleeps in ppoll (stayNB: not in recvmsg, whose timeout
	// the kernel rounds up to its tick): without the cap for its whole
	// kernelSlice, parking after 10ms; with it until parkWall+parkCap,
	// after about 4.5ms. A loaded host may delay the read or the
	// check: one early park of three tries will do.
	const short = 3 * time.Millisecond
	var took []time.Duration
	for range 3 {
		_, b := pair(t)
		b.k.stayNB.Store(true)
		b.k.parked.Store(int64(time.Since(monoBase) - (parkWall - short)))
		start := time.Now()
		got := readInBackground(b)
		waitFor(t, "the read to park", func() bool { _, h, _ := readInstance(b); return h == 1 })
		d := time.Since(start)
		b.Close()
		<-got
		if d < kernelSlice {
			return
		}
		took = append(took, d)
	}
	t.Errorf("reads that began %v short of parkWall since their socket's last park parked after %v; want about %v", short, took, short+parkCap)
}

// TestWaitersBeyondThePsPark: of readers waiting at once, one sleeps in
// ppoll for its kernelSlice; the ones that take the last free P sleep
// there lastPSlice at most and then park in the runtime poller (where
// none holds a thread or a P), and all of them are woken by their
// messages.
func TestWaitersBeyondThePsPark(t *testing.T) {
	defer setGOMAXPROCS(2)()
	// The window is short, so a loaded host may fail to run the
	// readers in it; without the parking every try fails.
	const tries = 3
	var late []string
	for try := 0; try < tries; try++ {
		why := waitersBeyondThePs(t)
		if why == "" {
			return
		}
		late = append(late, why)
		t.Logf("try %d: %s", try+1, why)
	}
	t.Errorf("in each of %d tries: %s", tries, strings.Join(late, "; "))
}

// waitersBeyondThePs runs TestWaitersBeyondThePsPark once and returns
// what was late, if anything. Reads that do not finish fail the test.
func waitersBeyondThePs(t *testing.T) string {
	const readers = 6
	var senders, receivers []*Conn
	got := make(chan error, readers)
	for i := 0; i < readers; i++ {
		a, b := pair(t)
		senders, receivers = append(senders, a), append(receivers, b)
		go func() {
			_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
			got <- err
		}()
	}
	parked := func() int {
		n := 0
		for _, b := range receivers {
			b.k.mu.Lock()
			if b.k.er != nil {
				n++
			}
			b.k.mu.Unlock()
		}
		return n
	}
	n := 0
	for end := time.Now().Add(kernelSlice / 2); n < readers-1 && time.Now().Before(end); {
		time.Sleep(100 * time.Microsecond)
		n = parked()
	}
	var why []string
	if n != readers-1 {
		why = append(why, fmt.Sprintf("%d readers waiting with GOMAXPROCS 2: %d parked within %v, want %d", readers, n, kernelSlice/2, readers-1))
	}
	if k := kernelWaiters.Load(); k != 1 {
		why = append(why, fmt.Sprintf("%d readers sleeping in ppoll beside the goroutine looking, want 1", k))
	}
	for _, a := range senders {
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < readers; i++ {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("ReadMsg: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d waiting reads still waiting 5s after their messages were sent", readers-i, readers)
		}
	}
	return strings.Join(why, ", ")
}

// TestParkedReadersShareASocket: goroutines reading one socket beyond the
// ones sleeping in ppoll park, and take turns on the socket's epoll
// instance; one that lets go of the socket after the next took its turn
// must not take the socket out from under it, nor may the next fail to
// add it (concurrency on 7.2 in CI failed with "epoll_ctl: file exists"
// before the instance counted its holders).
func TestParkedReadersShareASocket(t *testing.T) {
	defer setGOMAXPROCS(4)()
	a, b := pair(t)
	const readers, each = 8, 150
	errs := make(chan error, readers)
	for range readers {
		go func() {
			buf := make([]byte, 8)
			for range each {
				if _, _, _, _, err := b.ReadMsg(buf, nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range readers * each {
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond) // readers wait, park and wake in between
	}
	for range readers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("ReadMsg: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a parked reader missed its messages: still waiting 10s after all were sent")
		}
	}
}

// TestParkedReadKeepsTheSocket: with GOMAXPROCS=1 a read whose message
// does not come during its short sleep on the only P parks (here every
// read: the message is sent once the read is parked), and the socket's
// next reads park at once (onlyPSkips); the read epoll instance keeps the
// socket from one parked read to the next (no epoll_ctl per wait), every
// parked read still wakes for its message, and the first read that
// sleeps in ppoll takes the socket out.
func TestParkedReadKeepsTheSocket(t *testing.T) {
	restore := setGOMAXPROCS(1)
	defer func() { restore() }()
	a, b := pair(t)
	state := func() (in bool, holders int, kept bool) { return readInstance(b) }
	read := func() chan error { return readInBackground(b) }
	const waits = 20
	for i := range waits {
		got := read()
		deadline := time.Now().Add(5 * time.Second)
		for _, h, _ := state(); h == 0 && time.Now().Before(deadline); _, h, _ = state() {
			time.Sleep(100 * time.Microsecond)
		}
		if in, h, _ := state(); !in || h != 1 {
			t.Fatalf("wait %d: socket in the read instance %v, held by %d parked reads; want a parked read (GOMAXPROCS=1) holding it", i, in, h)
		}
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("wait %d: ReadMsg: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("wait %d: the parked read did not return 5s after its message was sent", i)
		}
		if in, h, kept := state(); !in || h != 0 || !kept {
			t.Fatalf("after parked read %d: socket in the read instance %v, holders %d, kept %v; want in and kept, no holder", i, in, h, kept)
		}
	}

	// With Ps to spare the next read sleeps in ppoll, and takes the socket
	// out first. (It may park again after its kernelSlice, on a slow
	// machine before the message is sent, which adds it again: the check
	// is before the send.)
	restore()
	restore = setGOMAXPROCS(4)
	got := read()
	deadline := time.Now().Add(5 * time.Second)
	for in, _, kept := state(); (in || kept) && time.Now().Before(deadline); in, _, kept = state() {
		time.Sleep(100 * time.Microsecond)
	}
	if in, _, kept := state(); in || kept {
		t.Errorf("with GOMAXPROCS 4 a read waits: socket in the read instance %v, kept %v; want neither (taken out before its sleep in ppoll)", in, kept)
	}
	if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
}

func TestSleepInKernel(t *testing.T) {
	for _, tc := range []struct {
		n     int32
		procs int
		rest  time.Duration
		want  bool
	}{
		{1, 2, kernelSlice, true},
		{1, 4, time.Microsecond, true},
		{3, 4, kernelSlice, true},
		{1, 1, kernelSlice, true}, // the only P (for onlyPSlice, after a yield)
		{2, 1, kernelSlice, false},
		{2, 2, kernelSlice, true}, // the last free P (for lastPSlice)
		{3, 2, kernelSlice, false},
		{5, 2, kernelSlice, false},
		{1, 2, 0, false}, // the slice is used up
		{1, 2, -time.Millisecond, false},
	} {
		if got := sleepInKernel(tc.n, tc.procs, tc.rest); got != tc.want {
			t.Errorf("sleepInKernel(%d, %d, %v) = %v, want %v", tc.n, tc.procs, tc.rest, got, tc.want)
		}
	}
}

func TestSleepFor(t *testing.T) {
	for _, tc := range []struct {
		n           int32
		procs       int
		rest, until time.Duration
		want        time.Duration
		lastP       bool
	}{
		{1, 2, kernelSlice, -1, kernelSlice, false},
		{1, 2, 3 * time.Millisecond, -1, 3 * time.Millisecond, false},
		{1, 2, kernelSlice, time.Millisecond, time.Millisecond, false}, // the deadline first
		{2, 2, kernelSlice, -1, lastPSlice, true},
		{1, 1, kernelSlice, -1, onlyPSlice, true},
		{1, 1, 300 * time.Microsecond, -1, 300 * time.Microsecond, true},
		{1, 1, kernelSlice, 200 * time.Microsecond, 200 * time.Microsecond, true},
		{2, 2, kernelSlice, 100 * time.Microsecond, 100 * time.Microsecond, true},
		{4, 4, 50 * time.Microsecond, -1, 50 * time.Microsecond, true},
	} {
		got, lastP := sleepFor(tc.n, tc.procs, tc.rest, tc.until)
		if got != tc.want || lastP != tc.lastP {
			t.Errorf("sleepFor(%d, %d, %v, %v) = %v, %v; want %v, %v", tc.n, tc.procs, tc.rest, tc.until, got, lastP, tc.want, tc.lastP)
		}
	}
}

func TestProcsFollowsGOMAXPROCS(t *testing.T) {
	// A program's own change, not setGOMAXPROCS's.
	old := runtime.GOMAXPROCS(3)
	defer func() {
		runtime.GOMAXPROCS(old)
		procsSeen.Store(int32(old))
	}()
	for range procsEvery {
		procs()
	}
	if got := procs(); got != 3 {
		t.Errorf("procs() = %d %d calls after GOMAXPROCS(3)", got, procsEvery)
	}
}

// TestWriteWithRoomSkipsThePoller: a send that finds room in the send
// buffer, with or without a context, never comes near the runtime poller
// (no epoll instance for writes is made), only a send that must wait.
func TestWriteWithRoomSkipsThePoller(t *testing.T) {
	a, b := pair(t)
	msg := make([]byte, 64)
	for range 4 {
		if _, err := a.WriteMsg(msg, nil, noAddr); err != nil {
			t.Fatal(err)
		}
		if _, err := a.WriteMsgContext(context.Background(), msg, nil, noAddr, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.WriteBatch(context.Background(), []Message{{Buffer: msg}}, 0); err != nil {
		t.Fatal(err)
	}
	a.k.mu.Lock()
	ew := a.k.ew
	a.k.mu.Unlock()
	if ew != nil {
		t.Error("sends that found room made an epoll instance for waiting writes")
	}
	_ = b
}

// fillSendBuffer sends 1 KiB messages on c until its send buffer is full
// and returns how many it sent.
func fillSendBuffer(t *testing.T, c *Conn) int {
	t.Helper()
	msg := make([]byte, 1024)
	for n := 0; ; n++ {
		if _, err := c.WriteMsgContext(t.Context(), msg, nil, noAddr, unix.MSG_DONTWAIT); err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("filling the send buffer: %v", err)
			}
			if n == 0 {
				t.Fatal("no message fit the send buffer")
			}
			return n
		}
	}
}

// TestWriteWaitSleepsInKernel: with a P to spare, a send that waits for
// room in the send buffer sleeps in ppoll, as a C sender does in poll,
// and never parks in the runtime poller (no epoll instance for writes is
// made); the peer's reads let it through.
func TestWriteWaitSleepsInKernel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, b := pair(t)
	for round := range 3 {
		filled := fillSendBuffer(t, a)
		errc := make(chan error, 1)
		go func() {
			_, err := a.WriteMsg(make([]byte, 1024), nil, noAddr)
			errc <- err
		}()
		time.Sleep(2 * time.Millisecond)
		select {
		case err := <-errc:
			t.Fatalf("round %d: WriteMsg on a full buffer returned %v before the peer read", round, err)
		default:
		}
		buf := make([]byte, 1024)
		for range filled + 1 {
			if _, _, _, _, err := b.ReadMsg(buf, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-errc; err != nil {
			t.Fatalf("round %d: waiting WriteMsg: %v", round, err)
		}
	}
	a.k.mu.Lock()
	ew := a.k.ew
	a.k.mu.Unlock()
	if ew != nil {
		t.Error("sends that waited for room parked in the runtime poller")
	}
}

// TestWriteWaitWithRoomParks: a write that cannot go through although the
// socket polls writable (as a send to a congested destination, which the
// congestion monitor's notice wakes) parks in the runtime poller instead
// of polling again at once, and a later wake-up of the socket retries it.
func TestWriteWaitWithRoomParks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, b := pair(t)
	if _, err := a.WriteMsg(make([]byte, 64), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	tries, open := 0, false
	f := func(uintptr) bool {
		mu.Lock()
		defer mu.Unlock()
		tries++
		return open
	}
	done := make(chan error, 1)
	go func() { done <- a.k.writeWait(f) }()
	waitFor(t, "a park of the write that found room but could not go through", func() bool {
		a.k.mu.Lock()
		defer a.k.mu.Unlock()
		return a.k.ew != nil
	})
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	if tries > 4 {
		t.Errorf("the parked write was tried %d times with nothing happening on the socket", tries)
	}
	open = true
	mu.Unlock()
	// The peer's read frees room in a's send buffer: a wake-up.
	if _, _, _, _, err := b.ReadMsg(make([]byte, 64), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writeWait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked write was not retried after the socket's wake-up")
	}
}

// TestKfdCloseWaitsForCalls: Close waits until the calls holding the
// descriptor are out, and refuses new ones meanwhile.
func TestKfdCloseWaitsForCalls(t *testing.T) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	k := newKfd(fd)
	if !k.acquire() || !k.acquire() {
		t.Fatal("acquire on an open kfd failed")
	}
	closed := make(chan error, 1)
	go func() { closed <- k.close() }()
	for k.refs.Load()&kfdClosing == 0 {
		runtime.Gosched()
	}
	if k.acquire() {
		t.Fatal("acquire succeeded after Close")
	}
	k.release()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a call still held the descriptor", err)
	case <-time.After(50 * time.Millisecond):
	}
	k.release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the last call released the descriptor")
	}
	if got := k.refs.Load(); got != kfdClosing {
		t.Errorf("refs after Close = %#x, want %#x", got, kfdClosing)
	}
	if err := k.close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
}

// TestBlockingSoloRead: the solo read (ReadMsg, and ReadBatch's
// recvmmsg) sleeps in the receive itself, and a
// message, a deadline change, a context's end and Close each end that
// sleep (BlockingSoloReadScenario). Over AF_UNIX, whose receive returns
// EINTR when signalled, this cannot tell whether the wake-up set
// O_NONBLOCK; over RDS, whose receive the kernel restarts, the
// integration test TestIntegrationBlockingSoloRead can.
func TestBlockingSoloRead(t *testing.T) {
	for _, batch := range []bool{false, true} {
		for _, skip := range []bool{false, true} {
			t.Run(soloReadName(batch, skip), func(t *testing.T) {
				a, b := pair(t)
				BlockingSoloReadScenario(t, a, b, noAddr, batch, skip)
			})
		}
	}
}

// TestSkippingReadSleepsInRecvmsgOnce: a read that skips its try sleeps
// in the receive at once (Conn.recvSkipping); when that sleep times out
// with no message, the rest of the wait sleeps in ppoll, as after
// blockRecv's one such sleep per wait, and a message still ends it. The
// same for ReadMsg and ReadBatch.
func TestSkippingReadSleepsInRecvmsgOnce(t *testing.T) {
	defer setGOMAXPROCS(4)()
	defer setSleepLimits(time.Hour)()
	oldSlice, oldTook := blockSlice, blockTook.Load()
	// Short of sysmon's 10 ms, whose preemption signal interrupts an
	// AF_UNIX receive (EINTR), which is then made again.
	blockSlice = 5 * time.Millisecond
	defer func() { blockSlice = oldSlice; blockTook.Store(oldTook) }()
	for _, batch := range []bool{false, true} {
		a, b := pair(t)
		read := func() chan error {
			got := make(chan error, 1)
			go func() {
				var err error
				if batch {
					_, err = b.ReadBatch(context.Background(), []Message{{Buffer: make([]byte, 8)}}, 0)
				} else {
					_, _, _, _, err = b.ReadMsg(make([]byte, 8), nil)
				}
				got <- err
			}()
			return got
		}
		// A first read that waits sets the socket up for sleeps in
		// recvmsg (its SO_RCVTIMEO is blockSlice).
		go func() {
			time.Sleep(20 * time.Millisecond)
			a.WriteMsg([]byte("0"), nil, noAddr)
		}()
		if err := <-read(); err != nil {
			t.Fatal(err)
		}
		if !b.k.rcvTimeo {
			t.Fatal("a read that waited left the socket without its receive timeout")
		}
		blockTook.Store(0)
		b.k.waits.Store(skipAfter)
		got := read()
		waitFor(t, "the read's sleep in the receive to time out", func() bool { return blockTook.Load() > 0 })
		for end := time.Now().Add(3 * blockSlice); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if b.k.blockTid.Load() != 0 {
				t.Fatalf("batch %v: after its sleep in the receive timed out, the read slept there again", batch)
			}
		}
		if kernelWaiters.Load() != 1 || !b.k.soloBusy.Load() {
			t.Fatalf("batch %v: the read is not sleeping in ppoll as the solo waiter: %d sleepers, solo %v", batch, kernelWaiters.Load(), b.k.soloBusy.Load())
		}
		if _, err := a.WriteMsg([]byte("1"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		if err := readResultIn(t, got, 5*time.Second); err != nil {
			t.Fatalf("batch %v: %v", batch, err)
		}
	}
}

// readResultIn returns what a read started in the background (got)
// returned, failing t if it has not within d.
func readResultIn(t *testing.T, got <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-got:
		return err
	case <-time.After(d):
		t.Fatalf("a read still waiting %v after its message was sent", d)
		return nil
	}
}

// parkedEver reports whether a read of c has parked in the runtime poller
// (its read epoll instance exists).
func parkedEver(c *Conn) bool {
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	return c.k.er != nil
}

// TestOnlyPYieldsThenSleeps: with GOMAXPROCS=1 a read that must wait first
// lets the runnable goroutines run, here the one that sends its message,
// and then sleeps in the kernel, where the message is, instead of parking
// in the runtime poller. Without the yield the sender could not run before
// the sleep ended empty, and the read would park; before the only P could
// sleep at all, every such read parked.
func TestOnlyPYieldsThenSleeps(t *testing.T) {
	defer setGOMAXPROCS(1)()
	const rounds = 20
	parked := 0
	for range rounds {
		a, b := pair(t)
		sent := make(chan error, 1)
		go func() { // runnable, not running, until the read yields
			_, err := a.WriteMsg([]byte("x"), nil, noAddr)
			sent <- err
		}()
		if _, _, _, _, err := b.ReadMsg(make([]byte, 8), nil); err != nil {
			t.Fatalf("ReadMsg: %v", err)
		}
		if err := <-sent; err != nil {
			t.Fatalf("WriteMsg: %v", err)
		}
		if parkedEver(b) {
			parked++
		}
		if n := b.k.onlyPSkip.Load(); n != 0 && !parkedEver(b) {
			t.Fatalf("a read that did not park set onlyPSkip to %d", n)
		}
	}
	// The scheduler runs the global queue first once every 61 turns, so
	// now and then the reader comes back before the sender has run.
	if parked > rounds/4 {
		t.Errorf("%d of %d reads parked with their message sent during their yield; want most to find it in their sleep on the only P", parked, rounds)
	}
}

// TestOnlyPParksBesideAParkedWait: with GOMAXPROCS=1 a read does not sleep
// on the only P while another read of the program is parked, whose
// goroutine could not run meanwhile; and after a sleep there that found
// nothing, the socket's next onlyPSkips reads park at once.
func TestOnlyPParksBesideAParkedWait(t *testing.T) {
	defer setGOMAXPROCS(1)()
	a1, b1 := pair(t)
	first := readInBackground(b1) // sleeps onlyPSlice, finds nothing, parks
	waitFor(t, "the first read to park", func() bool { _, h, _ := readInstance(b1); return h == 1 })
	if n := b1.k.onlyPSkip.Load(); n != onlyPSkips {
		t.Errorf("after a sleep on the only P that found nothing, onlyPSkip = %d, want %d", n, onlyPSkips)
	}

	a2, b2 := pair(t)
	go a2.WriteMsg([]byte("x"), nil, noAddr) // sends during the read's yield
	if _, _, _, _, err := b2.ReadMsg(make([]byte, 8), nil); err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	if !parkedEver(b2) {
		t.Error("a read beside a parked one slept on the only P; want it parked")
	}

	if _, err := a1.WriteMsg([]byte("x"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the parked read: %v", err)
	}
	// No other wait is parked now, but b1's reads still skip their sleep.
	go a1.WriteMsg([]byte("y"), nil, noAddr)
	if _, _, _, _, err := b1.ReadMsg(make([]byte, 8), nil); err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	if n := b1.k.onlyPSkip.Load(); n != onlyPSkips-1 {
		t.Errorf("the read after the miss: onlyPSkip = %d, want %d (one skip used)", n, onlyPSkips-1)
	}
}

// TestDeadlineBeforeTheTick: the kernel rounds a receive's timeout up to
// its timer tick, so a read whose deadline is nearer than a timed-out
// sleep in recvmsg was seen to last sleeps in ppoll instead, and returns
// at its deadline rather than at the tick.
func TestDeadlineBeforeTheTick(t *testing.T) {
	defer setGOMAXPROCS(4)()
	a, b := pair(t)
	// A wait with no message for a while: its sleep in recvmsg times
	// out, and the read learns how long that took.
	got := readInBackground(b)
	waitFor(t, "a sleep in recvmsg to time out", func() bool { return blockTook.Load() > 0 })
	if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	tick := blockBound()
	// Where the tick is fine (well under 2.5ms) a sleep in recvmsg
	// would also end in time and the check below cannot tell the two
	// ways apart; it still holds, so it runs.
	t.Logf("a sleep in recvmsg with a timeout of %v took %v", blockSlice, tick)
	// A deadline past blockSlice, which a sleep in recvmsg would
	// overshoot whenever the next tick comes after it. A loaded host
	// delays every wait, so each read is paired with a plain timer sleep
	// of the same length just before it, and the medians are compared: a
	// read that waited for the tick takes a tick longer than its timer.
	d, tries := 3*blockSlice/2, 9
	reads := make([]time.Duration, 0, tries)
	sleeps := make([]time.Duration, 0, tries)
	for range tries {
		start := time.Now()
		time.Sleep(d)
		sleeps = append(sleeps, time.Since(start))

		b.SetReadDeadline(time.Now().Add(d))
		start = time.Now()
		_, _, _, _, err := b.ReadMsg(make([]byte, 8), nil)
		reads = append(reads, time.Since(start))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadMsg with a deadline %v ahead: %v, want a deadline error", d, err)
		}
	}
	read, sleep := median(reads), median(sleeps)
	t.Logf("deadline %v: reads took %v (median %v), timer sleeps %v (median %v)", d, reads, read, sleeps, sleep)
	if read >= max(d, sleep)+time.Millisecond {
		t.Errorf("reads with a deadline %v ahead took a median %v, a timer sleep of that length %v; want the read about as long, not until the next timer tick (a sleep in recvmsg took %v)", d, read, sleep, tick)
	}
}

// median returns the middle of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestWaitedReadSkipsTheTry: a read of a socket whose last skipAfter
// reads had to wait skips its try with MSG_DONTWAIT and sleeps in the receive at once
// (Conn.recvWait), which returns a message that is there; and a message
// that is there comes back as a try would have returned it, also when
// the read deadline has passed.
func TestWaitedReadSkipsTheTry(t *testing.T) {
	a, b := pair(t)
	buf := make([]byte, 8)
	go func() {
		time.Sleep(20 * time.Millisecond)
		a.WriteMsg([]byte("1"), nil, noAddr)
	}()
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "1" {
		t.Fatalf("ReadMsg = %q, %v", buf[:n], err)
	}
	if w := b.k.waits.Load(); w != 1 {
		t.Fatalf("a read that waited left waits at %d, want 1", w)
	}
	// A second one in a row: the next read skips.
	go func() {
		time.Sleep(20 * time.Millisecond)
		a.WriteMsg([]byte("1"), nil, noAddr)
	}()
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "1" {
		t.Fatalf("ReadMsg = %q, %v", buf[:n], err)
	}
	if w := b.k.waits.Load(); w != skipAfter {
		t.Fatalf("two reads that waited left waits at %d, want %d", w, skipAfter)
	}
	// The next read skips its try: the message is there, and the sleep
	// in recvmsg returns it.
	if _, err := a.WriteMsg([]byte("2"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "2" {
		t.Fatalf("ReadMsg = %q, %v", buf[:n], err)
	}
	// A context that has ended gives its error, not the message that is
	// there, whether the socket watches it already or not.
	for _, watched := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		if watched {
			waitedRead(t, a, b, ctx) // makes the socket watch ctx
		}
		if _, err := a.WriteMsg([]byte("6"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		cancel()
		b.k.waits.Store(skipAfter)
		if _, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadMsgContext with the context canceled (watched %v) and a message there = %v; want context.Canceled", watched, err)
		}
		b.k.waits.Store(0)
		if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "6" {
			t.Fatalf("ReadMsg after the canceled read = %q, %v; want 6", buf[:n], err)
		}
	}
	// With the deadline passed, the skipped try is made before the
	// deadline's error, as it is made first when nothing is skipped.
	b.k.waits.Store(skipAfter)
	if _, err := a.WriteMsg([]byte("3"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(-time.Second))
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "3" {
		t.Fatalf("ReadMsg with the deadline passed and a message there = %q, %v; want 3", buf[:n], err)
	}
	// The same with a context the socket does not watch yet, whose wait
	// goes the shared way.
	b.k.waits.Store(skipAfter)
	if _, err := a.WriteMsg([]byte("5"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0); err != nil || string(buf[:n]) != "5" {
		t.Fatalf("ReadMsgContext with the deadline passed and a message there = %q, %v; want 5", buf[:n], err)
	}
	// Without a message, the deadline's error.
	b.k.waits.Store(skipAfter)
	if _, _, _, _, err := b.ReadMsg(buf, nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadMsg with the deadline passed = %v, want os.ErrDeadlineExceeded", err)
	}
	b.SetReadDeadline(time.Time{})
	// A read whose try finds its message clears waits.
	if _, err := a.WriteMsg([]byte("4"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	b.k.waits.Store(0)
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "4" {
		t.Fatalf("ReadMsg = %q, %v", buf[:n], err)
	}
	if w := b.k.waits.Load(); w != 0 {
		t.Errorf("a read whose try found its message left waits at %d", w)
	}
}

// TestSkippingReadTakesItsOwnWay: a ReadMsg and a ReadBatch that skip
// their try on a socket set up for sleeps in recvmsg take recvSkipping's
// way, whose receive returns the message that is there. Observed through
// the solo read's eventfd, which only the usual way (soloSleep) creates.
// (The message is sent first: a sleep of more than 10 ms in an AF_UNIX
// receive ends with EINTR at sysmon's preemption, and the rest of such a
// wait goes the usual way.)
func TestSkippingReadTakesItsOwnWay(t *testing.T) {
	defer setGOMAXPROCS(4)()
	defer setSleepLimits(time.Hour)()
	for _, batch := range []bool{false, true} {
		a, b := pair(t)
		tv := unix.NsecToTimeval(int64(blockSlice))
		if err := unix.SetsockoptTimeval(b.k.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			t.Fatal(err)
		}
		b.k.rcvTimeo = true // as blockRecv leaves it
		b.k.waits.Store(skipAfter)
		if _, err := a.WriteMsg([]byte("x"), nil, noAddr); err != nil {
			t.Fatal(err)
		}
		var err error
		if batch {
			_, err = b.ReadBatch(context.Background(), []Message{{Buffer: make([]byte, 8)}}, 0)
		} else {
			_, _, _, _, err = b.ReadMsg(make([]byte, 8), nil)
		}
		if err != nil {
			t.Fatalf("batch %v: %v", batch, err)
		}
		if w := b.k.waits.Load(); w != skipAfter+1 {
			t.Errorf("batch %v: the read left waits at %d, want %d (a wait)", batch, w, skipAfter+1)
		}
		if b.k.soloEfd != -1 {
			t.Errorf("batch %v: the skipping read went the usual way (it made the solo eventfd)", batch)
		}
	}
}

// TestSkippingReadSeesTheContextEnd: a read that skips its try with a
// context the socket watches returns the context's error, not a message
// that is there, also before the watch has moved the read deadline into
// the past (its callback runs in a goroutine of its own, which here, with
// one P, cannot run before the read).
func TestSkippingReadSeesTheContextEnd(t *testing.T) {
	a, b := pair(t)
	buf := make([]byte, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Reads with ctx that wait: the socket watches ctx after the second,
	// and the descriptor is set up for sleeps in recvmsg.
	for range 3 {
		waitedRead(t, a, b, ctx)
	}
	if _, err := a.WriteMsg([]byte("m"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	// One P for the runtime, while the read takes the program for one of
	// two, as it does where sleeping in recvmsg is allowed.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	old := procsSeen.Swap(2)
	defer procsSeen.Store(old)
	b.k.soloCalls = 2 // no reading of GOMAXPROCS in the next calls
	b.k.waits.Store(skipAfter)
	cancel()
	if _, _, _, _, err := b.ReadMsgContext(ctx, buf, nil, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a skipping read with its watched context canceled and a message there = %v; want context.Canceled", err)
	}
}

// waitedRead makes a read of b with ctx that has to wait for its message,
// which a sends 20 ms later.
func waitedRead(t *testing.T, a, b *Conn, ctx context.Context) {
	t.Helper()
	go func() {
		time.Sleep(20 * time.Millisecond)
		a.WriteMsg([]byte("w"), nil, noAddr)
	}()
	if _, _, _, _, err := b.ReadMsgContext(ctx, make([]byte, 8), nil, 0); err != nil {
		t.Fatal(err)
	}
}

// TestWaitedReadsSleepAtOnce: after skipAfter reads in a row that had to
// wait, the next ReadMsg and the next ReadBatch go straight to the sleep
// in the receive (kfd.blockRecv) without their try, and get the message
// that is there, which leaves the run of waits going; after fewer, and
// as the run's probe (every probeEvery-th), they try first, as a receiver
// of a stream should, and a try that finds its message ends the run; a
// batch whose deadline has passed makes the skipped try before the
// deadline's error.
func TestWaitedReadsSleepAtOnce(t *testing.T) {
	defer setSleepLimits(time.Hour)()
	a, b := pair(t)
	buf := make([]byte, 16)
	ms := []Message{{Buffer: make([]byte, 16)}, {Buffer: make([]byte, 16)}}
	reads := []struct {
		name string
		read func() (string, error)
	}{
		{"ReadMsg", func() (string, error) {
			n, _, _, _, err := b.ReadMsg(buf, nil)
			return string(buf[:n]), err
		}},
		{"ReadBatch", func() (string, error) {
			n, err := b.ReadBatch(context.Background(), ms, 0)
			if err != nil || n != 1 {
				return fmt.Sprintf("%d messages", n), err
			}
			return string(ms[0].Buffer[:ms[0].N]), err
		}},
	}
	// A message is there for each read: one that tries first finds it
	// and ends the run (waits 0); one that skips its try gets it from the
	// sleep in the receive, which counts as a wait.
	cases := []struct {
		waits, after int32
		what         string
	}{
		{skipAfter, skipAfter + 1, "after skipAfter reads that waited made its try instead of sleeping in the receive at once"},
		{skipAfter + probeEvery - 2, skipAfter + probeEvery - 1, "before the run's probe made its try"},
		{skipAfter + probeEvery - 1, 0, "as the run's probe slept in the receive instead of trying first"},
		{skipAfter - 1, 0, "after fewer than skipAfter reads that waited slept in the receive instead of trying first"},
	}
	for _, r := range reads {
		for _, c := range cases {
			b.k.parked.Store(int64(time.Since(monoBase))) // no park due
			b.k.waits.Store(c.waits)
			if _, err := a.WriteMsg([]byte(r.name), nil, noAddr); err != nil {
				t.Fatal(err)
			}
			if got, err := r.read(); err != nil || got != r.name {
				t.Fatalf("%s = %q, %v", r.name, got, err)
			}
			if w := b.k.waits.Load(); w != c.after {
				t.Errorf("%s with waits at %d %s: waits %d, want %d", r.name, c.waits, c.what, w, c.after)
			}
		}
	}
	b.k.waits.Store(skipAfter)
	if _, err := a.WriteMsg([]byte("late"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(-time.Second))
	if got, err := reads[1].read(); err != nil || got != "late" {
		t.Fatalf("ReadBatch with the deadline passed and a message there = %q, %v; want late", got, err)
	}
	b.k.waits.Store(skipAfter)
	if _, err := reads[1].read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadBatch with the deadline passed = %v, want os.ErrDeadlineExceeded", err)
	}
}
