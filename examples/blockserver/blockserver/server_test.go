//go:build linux

package blockserver

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
)

// fakeRDMA stands in for an *rdmaops.Conn: Do begins the operation in the
// tracker and, when fail is set, completes it as NotSent before returning,
// as rdmaops does for a sendmsg error.
type fakeRDMA struct {
	tr   *barrier.Tracker
	fail bool

	mu  sync.Mutex
	ops []barrier.Token
	tos []netip.AddrPort
}

func (f *fakeRDMA) Do(ctx context.Context, to netip.AddrPort, op *rdmaops.Op) (barrier.Token, error) {
	tok := f.tr.Begin(barrier.Entry{Deadline: op.Deadline, Keep: op.Keep})
	if f.fail {
		f.tr.Complete(tok, barrier.NotSent)
		return tok, errors.New("fake: congested")
	}
	f.mu.Lock()
	f.ops = append(f.ops, tok)
	f.tos = append(f.tos, to)
	f.mu.Unlock()
	return tok, nil
}

func (f *fakeRDMA) HandleControl(oob []byte) (cmsg.Cookie, bool, int, error) {
	n, err := f.tr.Process(oob)
	return 0, false, n, err
}
func (f *fakeRDMA) Tracker() *barrier.Tracker { return f.tr }
func (f *fakeRDMA) Close() error {
	f.tr.CompleteAll(barrier.Canceled)
	return nil
}

func (f *fakeRDMA) issued() []barrier.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]barrier.Token(nil), f.ops...)
}

type sent struct {
	to netip.AddrPort
	m  msg
}

// sink records the server's replies.
type sink struct {
	mu   sync.Mutex
	msgs []sent
}

func (k *sink) send(_ context.Context, b []byte, to netip.AddrPort, _ bool) error {
	var m msg
	if err := m.decode(b); err != nil {
		return err
	}
	k.mu.Lock()
	k.msgs = append(k.msgs, sent{to, m})
	k.mu.Unlock()
	return nil
}

func (k *sink) all() []sent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]sent(nil), k.msgs...)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

const testBS = 4096

// testServer returns a server over a fake transport, exporting a file of
// nblocks blocks, and the recorder of its replies.
func testServer(t *testing.T, cfg ServerConfig, fail bool) (*Server, *fakeRDMA, *sink) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blocks.img")
	if err := os.WriteFile(path, Content(1, 16*testBS), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg.BlockSize = testBS
	s, err := newServer(f, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRDMA{tr: barrier.New(&barrier.Config{OnComplete: s.completed, OnRelease: s.released}), fail: fail}
	k := &sink{}
	s.c, s.send = fr, k.send
	return s, fr, k
}

// announce registers buffer 0 of from under cookie ck.
func announce(t *testing.T, s *Server, from netip.AddrPort, ck uint64) {
	t.Helper()
	var b [headerLen]byte
	s.handle(context.Background(), (&msg{Op: opAnnounce}).encode(b[:]), false, from, cmsg.Cookie(ck), true)
}

func request(s *Server, from netip.AddrPort, m msg) {
	var b [headerLen]byte
	s.handle(context.Background(), m.encode(b[:]), false, from, 0, false)
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 4000)
}

// TestServerBacklogBounds: requests beyond the per-client and the global
// backlog, and checksum requests beyond the queue, are refused at once
// with errLimit replies naming the limit, and counted as Busy.
func TestServerBacklogBounds(t *testing.T) {
	s, _, k := testServer(t, ServerConfig{Slots: 2, Backlog: 10, ClientBacklog: 4}, false)
	// No workers run: every accepted request stays queued.
	for i := range 4 {
		announce(t, s, addr(i), 0x100+uint64(i))
	}
	for id := range 7 {
		request(s, addr(0), msg{Op: opRead, ID: uint32(100 + id), Block: 1, Cookie: 0x100})
	}
	for c := 1; c < 4; c++ {
		for id := range 4 {
			request(s, addr(c), msg{Op: opWrite, ID: uint32(200 + 10*c + id), Block: 2, Cookie: 0x100 + uint64(c)})
		}
	}
	// Sums: one per client, four in all.
	for c := range 6 {
		request(s, addr(c), msg{Op: opSum, ID: uint32(300 + c)})
		request(s, addr(c), msg{Op: opSum, ID: uint32(310 + c)})
	}
	var client, server, sums int
	for _, r := range k.all() {
		if r.m.Op != opError || r.m.Status != errLimit {
			t.Fatalf("unexpected reply %+v", r.m)
		}
		switch r.m.Aux {
		case limClient:
			client++
			if r.to != addr(0) || r.m.ID < 104 || r.m.ID > 106 {
				t.Errorf("client limit for %v ID %d", r.to, r.m.ID)
			}
		case limServer:
			server++
		case limSums:
			sums++
		}
	}
	// addr(0): 4 queued, 3 refused; then 6 more fit the backlog of 10.
	if client != 3 || server != 6 || sums != 8 {
		t.Errorf("refusals: %d client backlog, %d server backlog, %d sums; want 3, 6, 8", client, server, sums)
	}
	st := s.Stats()
	if st.Busy != 17 || st.Errors != 17 || s.backlog.n != 10 || s.sums.n != 4 {
		t.Errorf("stats %+v, backlog %d, sums %d", st, s.backlog.n, s.sums.n)
	}
}

// TestServerRefusalBudget: a client flooding the server with messages it
// refuses (here unknown opcodes) gets refusalsPerSecond replies a second
// and no more, each further one counted in Unanswered; another client's
// refusals are not affected, and the budget comes back the next second.
func TestServerRefusalBudget(t *testing.T) {
	s, _, k := testServer(t, ServerConfig{Slots: 2, Backlog: 10, ClientBacklog: 4}, false)
	const flood = refusalsPerSecond + 36
	for id := range flood {
		request(s, addr(1), msg{Op: 0x7e, ID: uint32(id)})
	}
	request(s, addr(2), msg{Op: 0x7e, ID: 1000})
	replies := map[netip.AddrPort]int{}
	for _, r := range k.all() {
		replies[r.to]++
	}
	st := s.Stats()
	if replies[addr(1)] != refusalsPerSecond || replies[addr(2)] != 1 || st.Unanswered != flood-refusalsPerSecond || st.UnknownOps != flood+1 {
		t.Errorf("replies %v, stats %+v; want %d to the flooder, 1 to the other, %d unanswered", replies, st, refusalsPerSecond, flood-refusalsPerSecond)
	}

	// The budget itself: per second, per address and port.
	var b refusalBudget
	t0 := time.Now()
	for i := range refusalsPerSecond {
		if !b.allow(addr(1), t0.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("refusal %d of the first second not allowed", i)
		}
	}
	if b.allow(addr(1), t0.Add(999*time.Millisecond)) {
		t.Error("a refusal beyond the budget was allowed within the second")
	}
	if !b.allow(netip.AddrPortFrom(addr(1).Addr(), 4001), t0.Add(999*time.Millisecond)) {
		t.Error("another port of the same host shares the flooder's budget")
	}
	if !b.allow(addr(1), t0.Add(time.Second)) {
		t.Error("the budget did not come back the next second")
	}
}

// TestServerFailingJobsIterative: a backlog of jobs whose RDMA fails to
// send (a congested client) is worked through in a loop: the stack depth
// where jobs start stays the same. Before, the slot's completion started
// the next job, whose failure completed it again, one level of recursion
// per job. Every job is answered.
func TestServerFailingJobsIterative(t *testing.T) {
	const jobs = 5000
	s, _, k := testServer(t, ServerConfig{Slots: 1, Backlog: jobs, ClientBacklog: jobs}, true)
	from := addr(1)
	announce(t, s, from, 0x77)
	for i := range jobs {
		request(s, from, msg{Op: opRead + uint8(i%2)*2, ID: uint32(i + 1), Block: uint64(i % 16), Cookie: 0x77})
	}
	var mu sync.Mutex
	minDepth, maxDepth, starts := 1<<30, 0, 0
	pcs := make([]uintptr, 1<<16)
	s.testDepth = func() {
		d := runtime.Callers(1, pcs)
		mu.Lock()
		minDepth, maxDepth = min(minDepth, d), max(maxDepth, d)
		starts++
		mu.Unlock()
	}
	_, stop, err := s.startWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitFor(t, "every job answered", func() bool { return s.Stats().Errors == jobs })
	for i, r := range k.all() {
		if r.m.Op != opError || r.m.Status != errTransfer || r.m.Aux != uint16(barrier.NotSent) || r.m.ID != uint32(i+1) {
			t.Fatalf("reply %d: %+v, want errTransfer (not sent) for ID %d", i, r.m, i+1)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d jobs started, stack depth at start %d to %d frames", starts, minDepth, maxDepth)
	if starts != jobs || maxDepth != minDepth {
		t.Errorf("%d starts, depth %d..%d: the completion path recurses", starts, minDepth, maxDepth)
	}
	if st := s.Stats(); st.RDMAFailures != jobs || len(s.free) != 1 {
		t.Errorf("stats %+v, %d free slots", st, len(s.free))
	}
}

// TestServerHeldSlot: a transfer that times out is answered at its
// deadline with errHeld, but its slot is not reused until the kernel's
// late status arrives; then the release message goes out and the next
// request gets the slot.
func TestServerHeldSlot(t *testing.T) {
	s, fr, k := testServer(t, ServerConfig{Slots: 1, Timeout: 20 * time.Millisecond}, false)
	slow, good := addr(1), addr(2)
	announce(t, s, slow, 0x10)
	announce(t, s, good, 0x20)
	_, stop, err := s.startWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	request(s, slow, msg{Op: opWrite, ID: 1, Block: 3, Cookie: 0x10})
	waitFor(t, "the held reply", func() bool { return len(k.all()) == 1 })
	if r := k.all()[0]; r.to != slow || r.m.Op != opError || r.m.Status != errHeld || r.m.ID != 1 || r.m.Aux != uint16(barrier.TimedOut) {
		t.Fatalf("reply %+v, want errHeld for ID 1", r)
	}
	request(s, good, msg{Op: opRead, ID: 2, Block: 4, Cookie: 0x20})
	time.Sleep(100 * time.Millisecond)
	if ops := fr.issued(); len(ops) != 1 {
		t.Fatalf("%d transfers issued while the only slot is held; want 1", len(ops))
	}
	// The kernel's late status for the first transfer.
	oob, _ := func() ([]byte, error) {
		b := cmsg.NewBuilder(make([]byte, 0, cmsg.RDMAStatusSpace))
		b.RDMAStatus(cmsg.Notify{UserToken: uint64(fr.issued()[0]), Status: cmsg.StatusSuccess})
		return b.Finish()
	}()
	s.c.HandleControl(oob)
	waitFor(t, "the second transfer", func() bool { return len(fr.issued()) == 2 })
	rs := k.all()
	if len(rs) != 2 || rs[1].to != slow || rs[1].m.Op != opRelease || rs[1].m.ID != 1 || rs[1].m.Block != 3 {
		t.Fatalf("replies %+v, want the release of ID 1", rs)
	}
	st := s.Stats()
	if st.TimedOut != 1 || st.LateFreed != 1 || st.Releases != 1 || st.RDMAFailures != 1 {
		t.Errorf("stats %+v", st)
	}
	// The second transfer completes; the slot is free again.
	fr.tr.Complete(fr.issued()[1], barrier.Success)
	waitFor(t, "the read counted", func() bool { return s.Stats().Reads == 1 })
}

// TestServerClose: Close completes the transfers in flight and frees a
// held slot, so the server's memory is unmapped; Serve's workers end.
func TestServerClose(t *testing.T) {
	s, fr, k := testServer(t, ServerConfig{Slots: 2, Timeout: 30 * time.Millisecond}, false)
	from := addr(1)
	announce(t, s, from, 0x10)
	_, stop, err := s.startWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	request(s, from, msg{Op: opRead, ID: 1, Block: 1, Cookie: 0x10})
	waitFor(t, "a held slot", func() bool { return s.Stats().TimedOut == 1 })
	s.c.Tracker().Close() // no more deadlines: the next transfer stays pending
	request(s, from, msg{Op: opRead, ID: 2, Block: 2, Cookie: 0x10})
	waitFor(t, "the second transfer", func() bool { return len(fr.issued()) == 2 })
	go func() { time.Sleep(50 * time.Millisecond); stop() }() // Serve returning on the closed socket
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := s.c.Tracker().Outstanding(); n != 0 {
		t.Errorf("%d operations pending after Close", n)
	}
	if s.held.Load() != 0 {
		t.Errorf("%d slots held after Close", s.held.Load())
	}
	if _, _, err := s.startWorkers(context.Background()); err == nil {
		t.Error("Serve after Close started")
	}
	// Before Serve's workers ended: errHeld for 1, the cancellation of 2
	// as an ordinary transfer failure, the release of 1.
	got := map[[3]uint32]bool{}
	for _, r := range k.all() {
		got[[3]uint32{uint32(r.m.Op), uint32(r.m.Status), r.m.ID}] = true
	}
	for _, w := range [][3]uint32{{opError, errHeld, 1}, {opError, errTransfer, 2}, {opRelease, 0, 1}} {
		if !got[w] {
			t.Errorf("no reply kind %d status %d for ID %d among %+v", w[0], w[1], w[2], k.all())
		}
	}
}

// TestServerFairPick: with every slot taken by a flooding client, the
// request of another client is the next to start, ahead of the flood's
// older ones.
func TestServerFairPick(t *testing.T) {
	s, fr, _ := testServer(t, ServerConfig{Slots: 2, Backlog: 16, ClientBacklog: 8}, false)
	flood, other := addr(1), addr(2)
	announce(t, s, flood, 0x10)
	announce(t, s, other, 0x20)
	for i := range 8 {
		request(s, flood, msg{Op: opRead, ID: uint32(i + 1), Block: 1, Cookie: 0x10})
	}
	_, stop, err := s.startWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitFor(t, "both slots busy", func() bool { return len(fr.issued()) == 2 })
	request(s, other, msg{Op: opRead, ID: 100, Block: 2, Cookie: 0x20})
	fr.tr.Complete(fr.issued()[0], barrier.Success)
	waitFor(t, "the next start", func() bool { return len(fr.issued()) == 3 })
	fr.mu.Lock()
	next := fr.tos[2]
	fr.mu.Unlock()
	if next != other {
		t.Fatalf("the freed slot went to %v, want the other client %v", next, other)
	}
}
