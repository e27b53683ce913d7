//go:build integration

package concurrency

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

var nextPort atomic.Uint32

func port() uint16 { return uint16(30000 + nextPort.Add(1)) }

// listen binds a socket, in the peer namespace when peer is set.
func listen(t *testing.T, addr netip.Addr, peer bool, cfg rdssock.Config) *rdssock.Conn {
	t.Helper()
	if peer {
		ns, err := vmtest.PeerNamespace()
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		cfg.NetNS = ns.FD()
	}
	c, err := rdssock.Listen(netip.AddrPortFrom(addr, port()), &cfg)
	if err != nil {
		t.Fatalf("Listen(%v): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// warm brings the RDS connection from a to b up before the test proper.
func warm(t *testing.T, a, b *rdssock.Conn) {
	t.Helper()
	b.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer b.SetReadDeadline(time.Time{})
	if _, err := a.WriteMsg([]byte("warm"), nil, b.LocalAddrPort()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, _, _, _, err := b.ReadMsg(buf, nil); err != nil || string(buf[:n]) != "warm" {
		t.Fatalf("warm-up: %q, %v", buf[:n], err)
	}
}

// A message is: sender id (4 bytes), sequence (4), CRC-32 of the rest (4),
// random payload.
const header = 12

func fill(b []byte, sender, seq uint32, r *rand.Rand) {
	binary.BigEndian.PutUint32(b, sender)
	binary.BigEndian.PutUint32(b[4:], seq)
	for i := header; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	binary.BigEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[header:]))
}

// TestSharedSockets has eight goroutines sending on one socket and four
// receiving on another (and the reverse direction at the same time), while
// two more read options and info tables of both sockets. Every message
// arrives exactly once and intact, and each receiving goroutine sees each
// sender's messages in increasing order, since all take from one queue.
func TestSharedSockets(t *testing.T) {
	vmtest.Require(t)
	for _, tc := range []struct {
		name  string
		a, b  netip.Addr
		bPeer bool
	}{
		{"tcp", vmtest.TCPLocal4, vmtest.TCPPeer4, true},
		{"loopback", vmtest.Loopback4, vmtest.Loopback4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rdssock.Config{WaitCongested: true, SendBuffer: 1 << 20, ReceiveBuffer: 1 << 20}
			a := listen(t, tc.a, false, cfg)
			b := listen(t, tc.b, tc.bPeer, cfg)
			warm(t, a, b)
			warm(t, b, a)

			const senders, receivers, perSender = 8, 4, 400
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			report := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			type flow struct {
				from, to *rdssock.Conn
				seen     [senders][perSender]atomic.Int32
				got      atomic.Int64
				disorder atomic.Int64 // a receiver saw a sender's sequence go back
				corrupt  atomic.Int64
				ctx      context.Context // ends when every message arrived
				cancel   context.CancelFunc
			}
			flows := []*flow{{from: a, to: b}, {from: b, to: a}}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for fi, f := range flows {
				f.ctx, f.cancel = context.WithCancel(ctx)
				defer f.cancel()
				for s := range senders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(uint64(fi), uint64(s)))
						buf := make([]byte, 1200)
						for seq := range perSender {
							m := buf[:header+r.IntN(len(buf)-header)]
							fill(m, uint32(s), uint32(seq), r)
							if _, err := f.from.WriteMsgContext(ctx, m, nil, f.to.LocalAddrPort(), 0); err != nil {
								report(fmt.Errorf("sender %d seq %d: %w", s, seq, err))
								return
							}
						}
					}()
				}
				for range receivers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var last [senders]int
						for i := range last {
							last[i] = -1
						}
						buf := make([]byte, 2048)
						for f.got.Load() < senders*perSender {
							n, _, rflags, from, err := f.to.ReadMsgContext(f.ctx, buf, nil, 0)
							if err != nil {
								if f.got.Load() < senders*perSender {
									report(fmt.Errorf("receive on %v after %d messages (%d bytes from %v, flags %#x): %w", f.to.LocalAddrPort(), f.got.Load(), n, from, rflags, err))
								}
								return
							}
							if from != f.from.LocalAddrPort() || n < header {
								report(fmt.Errorf("%d bytes from %v", n, from))
								return
							}
							m := buf[:n]
							s, seq := binary.BigEndian.Uint32(m), int(binary.BigEndian.Uint32(m[4:]))
							if s >= senders || seq >= perSender || binary.BigEndian.Uint32(m[8:]) != crc32.ChecksumIEEE(m[header:]) {
								f.corrupt.Add(1)
								report(fmt.Errorf("corrupt message: sender %d seq %d", s, seq))
								return
							}
							if seq <= last[s] {
								f.disorder.Add(1)
								report(fmt.Errorf("sender %d: seq %d after %d in one receiver", s, seq, last[s]))
							}
							last[s] = seq
							f.seen[s][seq].Add(1)
							if f.got.Add(1) == senders*perSender {
								f.cancel() // wake this flow's other receivers
							}
						}
					}()
				}
			}
			// Options and info tables read concurrently with the traffic.
			stop := make(chan struct{})
			var side sync.WaitGroup
			for _, c := range []*rdssock.Conn{a, b} {
				side.Add(1)
				go func() {
					defer side.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := c.Counters(); err != nil {
							report(fmt.Errorf("Counters: %w", err))
						}
						if _, err := c.Transport(); err != nil {
							report(fmt.Errorf("Transport: %w", err))
						}
						if _, err := c.ReadBuffer(); err != nil {
							report(fmt.Errorf("ReadBuffer: %w", err))
						}
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			close(stop)
			side.Wait()
			close(errs)
			nerrs := 0
			for err := range errs {
				nerrs++
				t.Error(err)
			}
			for fi, f := range flows {
				var lost, dup int
				for s := range senders {
					for seq := range perSender {
						switch n := f.seen[s][seq].Load(); {
						case n == 0:
							lost++
						case n > 1:
							dup++
						}
					}
				}
				if lost != 0 || dup != 0 {
					t.Errorf("flow %d: %d of %d messages lost, %d duplicated", fi, lost, senders*perSender, dup)
				}
				outcome := "ok"
				if lost+dup != 0 || f.disorder.Load()+f.corrupt.Load() != 0 || nerrs != 0 {
					outcome = "FAILED"
				}
				t.Logf("RELIABILITY|concurrent-%s-flow%d|kernel=%s|sent=%d|accepted=%d|received=%d|dup=%d|reordered=%d|corrupt=%d|lost=%d|outcome=%s (%d sending and %d receiving goroutines on two shared sockets, race detector on)",
					tc.name, fi, vmtest.KernelRelease(), senders*perSender, senders*perSender, f.got.Load(), dup, f.disorder.Load(), f.corrupt.Load(), lost, outcome, senders, receivers)
				if outcome == "ok" {
					t.Logf("flow %d (%v -> %v): %d messages from %d goroutines to %d, none lost, duplicated, reordered or corrupt",
						fi, f.from.LocalAddrPort(), f.to.LocalAddrPort(), f.got.Load(), senders, receivers)
				}
			}
		})
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settle waits until the goroutine count drops to at most want.
func settle(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(3 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// TestCloseWhileBusy closes sockets while goroutines wait in ReadMsg,
// ReadMsgContext, ReadBatch, and in WriteMsg and WriteBatch on a congested
// port: every call returns net.ErrClosed at once, and no goroutine or
// descriptor is left behind.
func TestCloseWhileBusy(t *testing.T) {
	vmtest.Require(t)
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	var waits, errClosed, slow int
	for round := range 20 {
		func() {
			rd := listen(t, vmtest.TCPLocal4, false, rdssock.Config{})
			wr := listen(t, vmtest.TCPLocal4, false, rdssock.Config{WaitCongested: true})
			sink := listen(t, vmtest.TCPPeer4, true, rdssock.Config{ReceiveBuffer: 4096})
			warm(t, wr, sink)
			// Congest the sink: it never reads again.
			payload := make([]byte, 1024)
			wr.SetWriteDeadline(time.Now().Add(time.Second))
			for {
				if _, err := wr.WriteMsg(payload, nil, sink.LocalAddrPort()); err != nil {
					if !errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatalf("filling the sink: %v", err)
					}
					break
				}
			}
			wr.SetWriteDeadline(time.Time{})

			type call struct {
				name string
				run  func() error
			}
			calls := []call{
				{"ReadMsg", func() error { _, _, _, _, err := rd.ReadMsg(make([]byte, 64), nil); return err }},
				{"ReadMsgContext", func() error {
					_, _, _, _, err := rd.ReadMsgContext(context.Background(), make([]byte, 64), nil, 0)
					return err
				}},
				{"ReadBatch", func() error {
					_, err := rd.ReadBatch(context.Background(), make([]rdssock.Message, 4), 0)
					return err
				}},
				{"WriteMsg", func() error { _, err := wr.WriteMsg(payload, nil, sink.LocalAddrPort()); return err }},
				{"WriteBatch", func() error {
					ms := []rdssock.Message{{Buffer: payload, Addr: sink.LocalAddrPort()}, {Buffer: payload, Addr: sink.LocalAddrPort()}}
					_, err := wr.WriteBatch(context.Background(), ms, 0)
					return err
				}},
			}
			done := make(chan struct {
				name string
				err  error
				at   time.Time
			}, len(calls))
			for _, c := range calls {
				go func() {
					err := c.run()
					done <- struct {
						name string
						err  error
						at   time.Time
					}{c.name, err, time.Now()}
				}()
			}
			time.Sleep(50 * time.Millisecond) // let them all wait
			select {
			case r := <-done:
				t.Fatalf("round %d: %s returned before Close: %v", round, r.name, r.err)
			default:
			}
			closed := time.Now()
			rd.Close()
			wr.Close()
			for range calls {
				select {
				case r := <-done:
					waits++
					if errors.Is(r.err, net.ErrClosed) {
						errClosed++
					}
					if r.at.Sub(closed) > 500*time.Millisecond {
						slow++
					}
					if !errors.Is(r.err, net.ErrClosed) {
						t.Errorf("round %d: %s after Close: %v; want net.ErrClosed", round, r.name, r.err)
					}
					if d := r.at.Sub(closed); d > 500*time.Millisecond {
						t.Errorf("round %d: %s took %v to return after Close", round, r.name, d)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("round %d: a call still waits 5 s after Close", round)
				}
			}
			sink.Close()
		}()
	}
	g := settle(goroutines)
	if g > goroutines {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after 20 rounds:\n%s", goroutines, g, buf[:runtime.Stack(buf, true)])
	}
	n := openFDs(t)
	if n != fds {
		t.Errorf("%d descriptors open before, %d after 20 rounds of 3 sockets", fds, n)
	}
	outcome := "ok"
	if t.Failed() {
		outcome = "FAILED"
	}
	t.Logf("RELIABILITY|close-while-busy|kernel=%s|calls=%d|err_closed=%d|slower_than_500ms=%d|goroutines=%d->%d|fds=%d->%d|outcome=%s (ReadMsg, ReadMsgContext, ReadBatch, and WriteMsg/WriteBatch waiting on a congested port)",
		vmtest.KernelRelease(), waits, errClosed, slow, goroutines, g, fds, n, outcome)
}
