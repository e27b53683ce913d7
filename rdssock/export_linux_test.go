//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketpairConns returns two Conns over an AF_UNIX SOCK_SEQPACKET pair.
// The message path (sendmsg/recvmsg with our own msghdr) is the same as for
// AF_RDS, so hosts without RDS can test it.
func socketpairConns() (*Conn, *Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0) // blocking, as kernelSocket makes them
	if err != nil {
		return nil, nil, err
	}
	wrap := func(fd int) (*Conn, error) { return newConn(newKfd(fd)), nil }
	a, err := wrap(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := wrap(fds[1])
	return a, b, err
}

// noAddr sends to the connected peer of a socketpair.
var noAddr netip.AddrPort

// setGOMAXPROCS sets GOMAXPROCS and the wait path's copy of it at once (the
// copy otherwise follows within procsEvery waits) and returns the function
// that restores both.
func setGOMAXPROCS(n int) (restore func()) {
	old := runtime.GOMAXPROCS(n)
	procsSeen.Store(int32(n))
	return func() {
		runtime.GOMAXPROCS(old)
		procsSeen.Store(int32(old))
	}
}

// setSleepLimits sets how long a read sleeps in ppoll before it parks
// (kernelSlice) and how long reads go on before one parks (parkWall); the
// caller runs the returned function to restore them, with no read
// waiting.
func setSleepLimits(d time.Duration) (restore func()) {
	slice, wall := kernelSlice, parkWall
	kernelSlice, parkWall = d, d
	return func() { kernelSlice, parkWall = slice, wall }
}

// waitFor polls cond until it holds, failing t after 5s without what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("5s without %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// BlockingSoloReadScenario checks that b's solo read sleeps in recvmsg
// itself, and that a message from a (sent to to), a deadline change, a
// context's end and Close each end that sleep at once, where without the
// wake-up the read would sleep the whole (here 20 s) slice. A wake-up
// leaves O_NONBLOCK behind, which the next sleep clears; I/O through the
// RawConn makes the descriptor non-blocking for good, and reads then sleep
// in ppoll. With batch the reads are ReadBatch calls (a recvmmsg that
// sleeps for its first message), else ReadMsg. With skip each read starts
// as one that skips its try (see Conn.recvWait), which a ReadMsg makes on
// its own way where it can (Conn.recvSkipping); else as one that tries
// first. It closes b.
func BlockingSoloReadScenario(t *testing.T, a, b *Conn, to netip.AddrPort, batch, skip bool) {
	defer setGOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))()
	restore := setSleepLimits(40 * time.Second)
	defer restore()
	old := blockSlice
	blockSlice = 20 * time.Second
	defer func() { blockSlice = old }()

	read := func(ctx context.Context) chan readResult {
		got := make(chan readResult, 1)
		if skip {
			b.k.waits.Store(skipAfter)
		} else {
			b.k.waits.Store(0)
		}
		go func() {
			buf := make([]byte, 16)
			var n int
			var err error
			switch {
			case batch:
				if ctx == nil {
					ctx = context.Background()
				}
				ms := []Message{{Buffer: buf}, {Buffer: make([]byte, 16)}}
				if n, err = b.ReadBatch(ctx, ms, 0); n == 1 {
					n = ms[0].N
				} else if err == nil {
					err = fmt.Errorf("ReadBatch returned %d messages, want 1", n)
				}
			case ctx == nil:
				n, _, _, _, err = b.ReadMsg(buf, nil)
			default:
				n, _, _, _, err = b.ReadMsgContext(ctx, buf, nil, 0)
			}
			got <- readResult{string(buf[:n]), err}
		}()
		return got
	}
	blocked := func() {
		t.Helper()
		waitFor(t, "a read sleeping in recvmsg", func() bool { return b.k.blockTid.Load() != 0 })
	}
	expect := func(got chan readResult, msg string, want error) {
		t.Helper()
		expectRead(t, "a read sleeping in recvmsg", got, msg, want)
	}

	got := read(nil)
	blocked()
	if _, err := a.WriteMsg([]byte("one"), nil, to); err != nil {
		t.Fatal(err)
	}
	expect(got, "one", nil)

	got = read(nil)
	blocked()
	b.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	expect(got, "", os.ErrDeadlineExceeded)
	if !b.k.wakeNB.Load() {
		t.Fatal("the deadline's wake-up did not go through O_NONBLOCK")
	}
	b.SetReadDeadline(time.Time{})

	// The next sleep clears the wake-up's O_NONBLOCK and sleeps again.
	got = read(nil)
	// The read publishes its thread before it clears the flag.
	waitFor(t, "a read sleeping in recvmsg with the wake-up's O_NONBLOCK cleared", func() bool {
		return b.k.blockTid.Load() != 0 && !b.k.wakeNB.Load() && !isNonblocking(b.k.fd)
	})
	if _, err := a.WriteMsg([]byte("two"), nil, to); err != nil {
		t.Fatal(err)
	}
	expect(got, "two", nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, msg := range []string{"three", "four", "five"} {
		got = read(ctx)
		if i < 2 {
			// The first two waits with ctx register it with the read
			// deadline's mux, in the shared way (the second makes the
			// mux watch ctx).
			time.Sleep(20 * time.Millisecond)
		} else {
			blocked() // a lockless wait
		}
		if _, err := a.WriteMsg([]byte(msg), nil, to); err != nil {
			t.Fatal(err)
		}
		expect(got, msg, nil)
	}
	got = read(ctx)
	blocked()
	cancel()
	expect(got, "", context.Canceled)

	// RawConn I/O: non-blocking for good, and no more sleeps in recvmsg.
	rc, err := b.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Write(func(uintptr) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if !b.k.stayNB.Load() || !isNonblocking(b.k.fd) {
		t.Fatal("RawConn.Write left the descriptor blocking")
	}
	got = read(nil)
	time.Sleep(20 * time.Millisecond)
	if b.k.blockTid.Load() != 0 {
		t.Fatal("a read sleeps in recvmsg on a descriptor kept non-blocking")
	}
	if _, err := a.WriteMsg([]byte("five"), nil, to); err != nil {
		t.Fatal(err)
	}
	expect(got, "five", nil)
	b.k.stayNB.Store(false) // as if new: Close must wake a sleep in recvmsg
	unix.SetNonblock(b.k.fd, false)

	got = read(nil)
	blocked()
	b.Close()
	expect(got, "", net.ErrClosed)
}

// readResult is what a read started in the background returned.
type readResult struct {
	msg string
	err error
}

// expectRead fails t unless the background read got returns msg and an
// error for which errors.Is(err, want) holds within 5 s.
func expectRead(t *testing.T, what string, got <-chan readResult, msg string, want error) {
	t.Helper()
	select {
	case r := <-got:
		if r.msg != msg || !errors.Is(r.err, want) {
			t.Fatalf("%s: got %q, %v; want %q, %v", what, r.msg, r.err, msg, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5s", what)
	}
}

// ConnForTest wraps fd, a blocking socket, in a Conn for the package's
// external tests (TestInstrRDMA).
func ConnForTest(fd int) *Conn { return newConn(newKfd(fd)) }

// InstrPairForTest and PacedPairForTest are instrPair and pacedPair, for
// the package's external instruction-count tests.
func InstrPairForTest(t *testing.T) [2]int { return instrPair(t) }

func PacedPairForTest(t *testing.T, n int) (fd int, sent <-chan error) { return pacedPair(t, n) }

// NoParkForTest keeps every wait from parking in the runtime poller every
// parkWall, as TestInstrReadWait does with RDSINSTR_NOPARK.
func NoParkForTest() { parkWall = time.Hour }

// SoloReadName names a BlockingSoloReadScenario subtest.
func SoloReadName(batch, skip bool) string { return soloReadName(batch, skip) }

func soloReadName(batch, skip bool) string {
	name := map[bool]string{false: "ReadMsg", true: "ReadBatch"}[batch]
	if skip {
		name += "Skipping"
	}
	return name
}
