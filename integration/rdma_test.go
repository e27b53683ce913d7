//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// rdmaNextPort hands out RDS ports for the RDMA tests, apart from the
// ranges other test files use.
var rdmaNextPort atomic.Uint32

func rdmaPort() uint16 { return uint16(31000 + rdmaNextPort.Add(1)) }

// rmsg is one received message with data or a cookie.
type rmsg struct {
	data    []byte
	dest    cmsg.Cookie
	hasDest bool
	from    netip.AddrPort
	at      time.Time
}

// rdmaEnd is an RDS/IB socket with an rdmaops.Conn and a receive loop that
// feeds every control buffer to the tracker and queues the messages.
type rdmaEnd struct {
	sock     *rdssock.Conn
	c        *rdmaops.Conn
	msgs     chan rmsg
	readErrs atomic.Int64
	done     chan struct{}
}

func newRDMAEnd(t *testing.T, addr netip.Addr, cfg *rdssock.Config, tcfg *barrier.Config, opts *rdmaops.Options) *rdmaEnd {
	t.Helper()
	sock, err := rdssock.Listen(netip.AddrPortFrom(addr, rdmaPort()), cfg)
	if err != nil {
		t.Fatalf("Listen on %v: %v", addr, err)
	}
	if tr, err := sock.Transport(); err != nil || tr != rdssock.TransportIB {
		sock.Close()
		t.Fatalf("transport of %v = %v, %v; want IB", sock.LocalAddrPort(), tr, err)
	}
	e := &rdmaEnd{sock: sock, c: rdmaops.New(sock, barrier.New(tcfg), opts), msgs: make(chan rmsg, 8192), done: make(chan struct{})}
	go e.loop(t)
	t.Cleanup(func() {
		sock.Close()
		<-e.done
		e.c.Tracker().Close()
		if k := e.readErrs.Load(); k != 0 {
			t.Errorf("%v: %d receive errors", e.addr(), k)
		}
	})
	return e
}

func (e *rdmaEnd) loop(t *testing.T) {
	defer close(e.done)
	buf := make([]byte, 1<<16)
	for {
		m, err := e.c.ReadMsg(context.Background(), buf, nil)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// No test here provokes a receive error: each one fails
			// the test (a persistent one ends the loop).
			if k := e.readErrs.Add(1); k <= 10 {
				t.Errorf("%v: ReadMsg error %d: %v", e.sock.LocalAddrPort(), k, err)
				continue
			}
			t.Errorf("%v: more than 10 ReadMsg errors; receive loop stopped", e.sock.LocalAddrPort())
			return
		}
		if m.N > 0 || m.HasDest {
			e.msgs <- rmsg{data: bytes.Clone(buf[:m.N]), dest: m.Dest, hasDest: m.HasDest, from: m.From, at: time.Now()}
		}
	}
}

func (e *rdmaEnd) addr() netip.AddrPort { return e.sock.LocalAddrPort() }

func (e *rdmaEnd) recv(t *testing.T, what string) rmsg {
	t.Helper()
	select {
	case m := <-e.msgs:
		return m
	case <-time.After(recvWait):
		t.Fatalf("%v: no message (%s) within %v", e.addr(), what, recvWait)
	}
	return rmsg{}
}

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32()) | 1 // never 0: zero memory means "not written"
	}
}

const (
	rdmaOpSize = 16 << 10 // per operation, modest for rxe
	rdmaMRSize = 64 << 10 // per registration
	rdmaTotal  = 1 << 20  // per direction
)

// localSpans returns the server-side spans of operation i: one 16 KiB span
// for even i, four 4 KiB spans in reverse order for odd i (scatter/gather).
func localSpans(r *rdmaops.Region, i int) []rdmaops.Span {
	base := i * rdmaOpSize
	if i%2 == 0 {
		return []rdmaops.Span{r.Span(base, rdmaOpSize)}
	}
	q := rdmaOpSize / 4
	return []rdmaops.Span{r.Span(base+3*q, q), r.Span(base+2*q, q), r.Span(base+q, q), r.Span(base, q)}
}

func concat(spans []rdmaops.Span) []byte {
	var out []byte
	for _, s := range spans {
		out = append(out, s.Bytes()...)
	}
	return out
}

// registerClientMRs registers the client's region in rdmaMRSize pieces and
// returns the cookies as the server received them.
func registerClientMRs(t *testing.T, ctx context.Context, client, server *rdmaEnd, region *rdmaops.Region) ([]*rdmaops.MR, []cmsg.Cookie) {
	t.Helper()
	n := region.Len() / rdmaMRSize
	mrs := make([]*rdmaops.MR, n)
	cookies := make([]cmsg.Cookie, n)
	start := time.Now()
	for i := range n {
		mr, err := client.c.Register(ctx, region.Span(i*rdmaMRSize, rdmaMRSize), cmsg.FlagReadWrite, server.addr(), []byte(fmt.Sprintf("mr %d", i)))
		if err != nil {
			t.Fatalf("Register %d: %v", i, err)
		}
		mrs[i] = mr
	}
	for range n {
		m := server.recv(t, "registration")
		var i int
		if _, err := fmt.Sscanf(string(m.data), "mr %d", &i); err != nil || !m.hasDest || i < 0 || i >= n {
			t.Fatalf("registration message %q (cookie %v, %v)", m.data, m.dest, m.hasDest)
		}
		if m.dest != mrs[i].Cookie() {
			t.Fatalf("server got cookie %v for MR %d, client has %v", m.dest, i, mrs[i].Cookie())
		}
		cookies[i] = m.dest
	}
	t.Logf("%d registrations of %d KiB with %v in %v", n, rdmaMRSize>>10, client.c.RegMode(), time.Since(start))
	return mrs, cookies
}

// TestIntegrationRDMAWriteRead moves 1 MiB each way with RDMA WRITE and
// READ over Soft-RoCE, in 16 KiB operations with immediate data, half of
// them scatter/gather, and checks every byte, the order of data and
// immediate data, and every completion token.
func TestIntegrationRDMAWriteRead(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tcfg := &barrier.Config{Completions: 1024, Timeout: time.Minute}
	server := newRDMAEnd(t, vmtest.IBAddr1, nil, tcfg, nil)
	client := newRDMAEnd(t, vmtest.IBAddr2, nil, nil, nil)

	// The probe must settle on RDMA_MAP: RDS_GET_MR is EOPNOTSUPP on rxe.
	creg, err := rdmaops.NewRegion(rdmaTotal)
	if err != nil {
		t.Fatal(err)
	}
	mrs, cookies := registerClientMRs(t, ctx, client, server, creg)
	if client.c.RegMode() != rdmaops.RegMap {
		t.Errorf("registration mode %v, want RDMA_MAP on rxe", client.c.RegMode())
	}
	if client.c.Registrations() != uint64(len(mrs)) {
		t.Fatalf("Registrations() = %d, want %d", client.c.Registrations(), len(mrs))
	}
	sreg, err := rdmaops.NewRegion(rdmaTotal)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	nops := rdmaTotal / rdmaOpSize
	perMR := rdmaMRSize / rdmaOpSize

	for _, write := range []bool{true, false} {
		name := map[bool]string{true: "WRITE", false: "READ"}[write]
		if write {
			fill(rng, sreg.Bytes())
			clear(creg.Bytes())
		} else {
			fill(rng, creg.Bytes())
			clear(sreg.Bytes())
		}
		tr := server.c.Tracker()
		first := tr.Last() + 1
		issued := map[barrier.Token]int{}
		start := time.Now()
		for i := range nops {
			op := &rdmaops.Op{
				Write:        write,
				Remote:       cookies[i/perMR],
				RemoteOffset: uint64(i%perMR) * rdmaOpSize,
				Local:        localSpans(sreg, i),
				Keep:         i,
			}
			if write {
				op.Payload = []byte(fmt.Sprintf("w %d %08x", i, crc32.ChecksumIEEE(concat(op.Local))))
			} else {
				op.Payload = []byte(fmt.Sprintf("r %d", i))
				op.Flags = cmsg.FlagFence
			}
			tok, err := server.c.Do(ctx, client.addr(), op)
			if err != nil {
				t.Fatalf("%s %d: %v", name, i, err)
			}
			issued[tok] = i
		}
		last := tr.Last()
		if err := tr.WaitAll(ctx, last); err != nil {
			t.Fatalf("%s: barrier: %v (mark %d, want %d)", name, err, tr.HighWater(), last)
		}
		elapsed := time.Since(start)
		if hw := tr.HighWater(); hw < last {
			t.Fatalf("%s: mark %d after WaitAll(%d)", name, hw, last)
		}
		// Every issued token completes exactly once, successfully, with
		// the Keep it was begun with.
		for range nops {
			c := <-tr.Completions()
			i, ok := issued[c.Token]
			if !ok {
				t.Fatalf("%s: completion for token %d never issued here (first %d)", name, c.Token, first)
			}
			delete(issued, c.Token)
			if c.Status != barrier.Success || c.Keep != i {
				t.Fatalf("%s %d: completion %+v", name, i, c)
			}
		}
		if len(issued) != 0 {
			t.Fatalf("%s: %d tokens without a completion", name, len(issued))
		}
		// Immediate data: one message per op, in order, each after its data.
		for i := range nops {
			m := client.recv(t, name+" immediate data")
			cspan := creg.Bytes()[i*rdmaOpSize : (i+1)*rdmaOpSize]
			if write {
				want := concat(localSpans(sreg, i))
				var j int
				var crc uint32
				if _, err := fmt.Sscanf(string(m.data), "w %d %08x", &j, &crc); err != nil || j != i {
					t.Fatalf("immediate data %q, want op %d", m.data, i)
				}
				if !bytes.Equal(cspan, want) || crc32.ChecksumIEEE(cspan) != crc {
					t.Fatalf("WRITE %d: client memory differs from the server's data when the immediate data arrived", i)
				}
			} else if string(m.data) != fmt.Sprintf("r %d", i) {
				t.Fatalf("READ immediate data %q, want op %d", m.data, i)
			}
			if m.from != server.addr() {
				t.Fatalf("immediate data from %v", m.from)
			}
		}
		if !write {
			for i := range nops {
				if got := concat(localSpans(sreg, i)); !bytes.Equal(got, creg.Bytes()[i*rdmaOpSize:(i+1)*rdmaOpSize]) {
					t.Fatalf("READ %d: server memory differs from the client's", i)
				}
			}
		}
		st := tr.Stats()
		t.Logf("%s: %d ops, %d KiB, all tokens matched with status success, %v (%.0f ops/s, %.1f MiB/s); tracker %d begun, %d late, %d unmatched",
			name, nops, rdmaTotal>>10, elapsed, float64(nops)/elapsed.Seconds(), float64(rdmaTotal)/(1<<20)/elapsed.Seconds(), st.Begun, st.Late, st.Unmatched)
	}
	if sreg.Users() != 0 {
		t.Fatalf("server region still has %d users after every op completed", sreg.Users())
	}
	if err := sreg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := creg.Close(); !errors.Is(err, rdmaops.ErrBusy) {
		t.Fatalf("Close of a registered region: %v, want ErrBusy", err)
	}
	for _, mr := range mrs {
		if err := mr.Free(); err != nil {
			t.Fatalf("Free: %v", err)
		}
	}
	if err := mrs[0].Free(); !errors.Is(err, rdmaops.ErrFreed) {
		t.Fatalf("second Free: %v", err)
	}
	if err := creg.Close(); err != nil {
		t.Fatal(err)
	}
}

// statusHistogram counts the statuses of tokens [from, to].
func statusHistogram(tr *barrier.Tracker, from, to barrier.Token) map[barrier.Status]int {
	h := map[barrier.Status]int{}
	for tok := from; tok <= to; tok++ {
		h[tr.Status(tok)]++
	}
	return h
}

// TestIntegrationBarrierMark drives the high-water mark through success,
// a remote access error (a bogus cookie), operations caught in the
// connection bounce that error causes, and a deadline for an operation
// whose status never comes. The sockets use their own TOS so that the
// bounce stays on a connection of their own.
func TestIntegrationBarrierMark(t *testing.T) {
	vmtest.Require(t)
	// Room for the C reference, should the kernel deviate.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cfg := &rdssock.Config{TOS: 3}
	server := newRDMAEnd(t, vmtest.IBAddr1, cfg, &barrier.Config{Timeout: time.Minute}, nil)
	client := newRDMAEnd(t, vmtest.IBAddr2, cfg, nil, nil)
	tr := server.c.Tracker()
	// Bring the TOS 3 connection up with a plain message first: on Linux
	// 6.12 an RDMA_MAP as the first message on a connection of a nonzero
	// TOS failed with EINVAL.
	if _, err := client.sock.WriteMsgContext(ctx, []byte("hi"), nil, server.addr(), 0); err != nil {
		t.Fatal(err)
	}
	if m := server.recv(t, "hello"); string(m.data) != "hi" {
		t.Fatalf("got %q", m.data)
	}

	creg, err := rdmaops.NewRegion(rdmaMRSize)
	if err != nil {
		t.Fatal(err)
	}
	_, cookies := registerClientMRs(t, ctx, client, server, creg)
	good := cookies[0]
	bogus := cmsg.MakeCookie(good.RKey()^0x5a5a00, 0)
	sreg, err := rdmaops.NewRegion(rdmaOpSize)
	if err != nil {
		t.Fatal(err)
	}
	fill(rand.New(rand.NewPCG(3, 4)), sreg.Bytes())
	local := sreg.Span(0, 4096)

	write := func(ck cmsg.Cookie, payload string) barrier.Token {
		t.Helper()
		tok, err := server.c.Write(ctx, client.addr(), ck, 0, local, []byte(payload))
		if err != nil {
			t.Fatalf("Write %q: %v", payload, err)
		}
		return tok
	}
	wait := func(tok barrier.Token) barrier.Status {
		t.Helper()
		st, err := tr.Wait(ctx, tok)
		if err != nil {
			t.Fatalf("Wait(%d): %v", tok, err)
		}
		return st
	}

	// Success raises the mark.
	a := write(good, "a")
	if st := wait(a); st != barrier.Success {
		t.Fatalf("valid write: %v", st)
	}
	if hw := tr.HighWater(); hw != a {
		t.Fatalf("mark %d after success of %d", hw, a)
	}
	if m := client.recv(t, "immediate data of a"); string(m.data) != "a" {
		t.Fatalf("got %q", m.data)
	}

	// An op whose status never comes: the peer does not exist, so the
	// connection never comes up. The deadline completes it.
	nowhere := netip.AddrPortFrom(netip.MustParseAddr("10.22.0.99"), 4000)
	start := time.Now()
	d, err := server.c.Do(ctx, nowhere, &rdmaops.Op{Write: true, Remote: good, Local: []rdmaops.Span{local}, Deadline: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatalf("op to a missing peer: %v", err)
	}
	if _, err := tr.Wait(ctx, d); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if st := tr.Status(d); st != barrier.TimedOut || el < time.Second {
		t.Fatalf("op to a missing peer: %v after %v, want timed out after 1s", st, el)
	}
	// Reported, but quarantined: the kernel still holds the operation, so
	// its memory is not handed back and the mark stays below it.
	if hw := tr.HighWater(); hw != d-1 {
		t.Fatalf("mark %d after the timeout of %d, want %d", hw, d, d-1)
	}
	if sreg.Users() != 1 || tr.Stats().Quarantined != 1 {
		t.Fatalf("timed-out op: region users %d, stats %+v; want it quarantined", sreg.Users(), tr.Stats())
	}
	// Canceling the destination makes the kernel report it: late, and
	// that releases it.
	if err := server.c.Cancel(nowhere); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	err = tr.WaitAll(wctx, d)
	wcancel()
	st := tr.Stats()
	t.Logf("deadline fired after %v; after Cancel: %d late statuses %v; completed by status %v; quarantined %d, region users %d", el, st.Late, st.LateStatus, st.Completed, st.Quarantined, sreg.Users())
	if err != nil || st.Late != 1 || st.LateStatus[barrier.Canceled] != 1 || st.Quarantined != 0 || sreg.Users() != 0 {
		t.Fatalf("after Cancel: barrier %v, stats %+v, region users %d; want the late canceled status to release the op", err, st, sreg.Users())
	}
	if st.Completed[barrier.TimedOut] != 1 {
		t.Fatalf("TimedOut count %d", st.Completed[barrier.TimedOut])
	}
	// A bogus cookie: the peer refuses the access. The mark rises anyway.
	// The deadline is the C reference's (judgeBogusWrite).
	start = time.Now()
	b, err := server.c.Do(ctx, client.addr(), &rdmaops.Op{Write: true, Remote: bogus, Local: []rdmaops.Span{local}, Payload: []byte("bogus"), Deadline: time.Now().Add(10 * time.Second)})
	if err != nil {
		t.Fatalf("Write bogus: %v", err)
	}
	stB := wait(b)
	bogusUnreported := false // the deviation judgeBogusWrite accepted
	switch stB {
	case barrier.RemoteError:
		if hw := tr.HighWater(); hw != b {
			t.Fatalf("mark %d after the failure of %d", hw, b)
		}
	case barrier.TimedOut, barrier.Dropped:
		// Linux 7.2 now and then (CI: twice in about 50 runs), judged
		// against C. A timed-out op is the kernel's still: quarantined,
		// the mark stays below it (the bounce below releases it).
		judgeBogusWrite(t, stB)
		bogusUnreported = stB == barrier.TimedOut
		if hw := tr.HighWater(); stB == barrier.TimedOut && hw >= b || stB == barrier.Dropped && hw != b {
			t.Fatalf("mark %d after the bogus write %d %v", hw, b, stB)
		}
	default:
		t.Fatalf("write with a bogus cookie: %v, want remote error", stB)
	}
	t.Logf("bogus cookie %v: status %v after %v; mark %d", bogus, stB, time.Since(start), tr.HighWater())

	// The error tore the connection down. Operations issued around the
	// bounce complete with some status; the barrier still passes them.
	first := tr.Last() + 1
	burst := func(ck cmsg.Cookie, payload string) {
		t.Helper()
		if _, err := server.c.Do(ctx, client.addr(), &rdmaops.Op{Write: true, Remote: ck, Local: []rdmaops.Span{local}, Payload: []byte(payload), Deadline: time.Now().Add(5 * time.Second)}); err != nil {
			t.Fatalf("burst %q: %v", payload, err)
		}
	}
	for i := range 10 {
		burst(good, fmt.Sprintf("burst %d", i))
	}
	burst(bogus, "bogus 2")
	for i := 10; i < 20; i++ {
		burst(good, fmt.Sprintf("burst %d", i))
	}
	last := tr.Last()
	start = time.Now()
	for tok := first; tok <= last; tok++ {
		wait(tok)
	}
	h := statusHistogram(tr, first, last)
	quarantined := tr.Stats().Quarantined
	t.Logf("21 ops around a bogus cookie: all reported after %v; statuses %v; %d quarantined (timed out, no kernel status yet), mark %d of %d", time.Since(start), h, quarantined, tr.HighWater(), last)
	if h[barrier.Pending] != 0 || h[barrier.Unknown] != 0 || h[barrier.Success] == 21 {
		t.Fatalf("statuses %v: want all final and not all successful", h)
	}
	if quarantined == 0 {
		if err := tr.WaitAll(ctx, last); err != nil {
			t.Fatalf("barrier over a bounce: %v", err)
		}
	} else if tr.HighWater() >= last {
		t.Fatalf("mark %d passed %d quarantined ops (last %d)", tr.HighWater(), quarantined, last)
	}

	// Does the connection come back? Recorded, not required. On 6.1, 6.12
	// and 7.2 under TCG it never came back within 30 s (10 s of writes
	// here, then 20 s of waiting for late statuses, in every CI run up to
	// November 2026), so both waits are short: the test's point is that
	// the mark holds, and that the quarantined ops are released either way.
	start = time.Now()
	var attempts []barrier.Status
	for time.Since(start) < 4*time.Second {
		tok, err := server.c.Do(ctx, client.addr(), &rdmaops.Op{Write: true, Remote: good, Local: []rdmaops.Span{local}, Payload: []byte("after bounce"), Deadline: time.Now().Add(2 * time.Second)})
		if err != nil {
			t.Fatalf("write after the bounce: %v", err)
		}
		st := wait(tok)
		attempts = append(attempts, st)
		if st == barrier.Success {
			break
		}
	}
	t.Logf("writes after the bounce over %v: %v", time.Since(start), attempts)
	if quarantined > 0 {
		// The timed-out ops are still the kernel's: their late statuses
		// (dropped once the connection is back, or canceled) release
		// them, and only then does the barrier pass.
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		err := tr.WaitAll(wctx, last)
		wcancel()
		how := "late statuses"
		if err != nil {
			how = "Cancel"
			cerr := make(chan error, 1)
			go func() { cerr <- server.c.Cancel(client.addr()) }()
			select {
			case err := <-cerr:
				if err != nil {
					t.Fatalf("Cancel: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Cancel of %v blocked for 20 s", client.addr())
			}
			wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
			err = tr.WaitAll(wctx, last)
			wcancel()
		}
		st := tr.Stats()
		t.Logf("the %d quarantined ops released by %s: barrier %v, late statuses %v, quarantined now %d, mark %d", quarantined, how, err, st.LateStatus, st.Quarantined, tr.HighWater())
		if err != nil && bogusUnreported && st.Quarantined == 1 && tr.Status(b) == barrier.TimedOut && tr.HighWater() == b-1 {
			// The kernel has still not reported the bogus write (the
			// deviation judged above): the mark rightly stays below
			// it; everything after it must be released.
			for tok := b + 1; tok <= last; tok++ {
				if s := tr.Status(tok); s == barrier.Pending || s == barrier.Unknown {
					t.Fatalf("op %d after the unreported bogus write: %v", tok, s)
				}
			}
			t.Logf("the bogus write %d is still unreported, its memory still the kernel's: the mark stays at %d", b, tr.HighWater())
			err = nil
		}
		if err != nil {
			t.Fatalf("barrier over a bounce: %v", err)
		}
	}
	logKernel(t, "RDS")
	// Drain what the client received; none of it is the bogus payloads.
	drainUntil := time.After(500 * time.Millisecond)
drain:
	for {
		select {
		case m := <-client.msgs:
			if strings.HasPrefix(string(m.data), "bogus") {
				t.Errorf("immediate data %q of a failed RDMA was delivered", m.data)
			}
		case <-drainUntil:
			break drain
		}
	}
}

// logKernel logs the kernel log lines that contain substr.
func logKernel(t *testing.T, substr string) {
	t.Helper()
	lines := vmtest.KernelLog(substr)
	if len(lines) > 30 {
		lines = append(lines[:10], append([]string{"..."}, lines[len(lines)-20:]...)...)
	}
	t.Logf("kernel log lines with %q:\n%s", substr, strings.Join(lines, "\n"))
}

// TestIntegrationPoolNoRegistrations pushes thousands of RDMA WRITEs
// through a pool of 8 pre-registered buffers and counts registrations:
// none after the warm-up.
func TestIntegrationPoolNoRegistrations(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	server := newRDMAEnd(t, vmtest.IBAddr1, nil, &barrier.Config{Timeout: time.Minute}, nil)
	client := newRDMAEnd(t, vmtest.IBAddr2, nil, nil, nil)
	const nbuf, size, ops = 8, 4096, 3000

	pool, err := rdmaops.NewPool(ctx, client.c.Registrar(server.addr(), []byte("pool")), nbuf, size, cmsg.FlagReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	warm := client.c.Registrations()
	if warm != nbuf {
		t.Fatalf("warm-up: %d registrations, want %d", warm, nbuf)
	}
	for range nbuf {
		if m := server.recv(t, "pool registration"); string(m.data) != "pool" || !m.hasDest {
			t.Fatalf("registration message %q", m.data)
		}
	}

	// The server answers "idx seq cookie" requests with an RDMA WRITE of a
	// pattern for seq and the immediate data "idx seq".
	sreg, err := rdmaops.NewRegion(nbuf * size)
	if err != nil {
		t.Fatal(err)
	}
	serr := make(chan error, 1)
	go func() {
		prev := make([]barrier.Token, nbuf)
		for range ops {
			var m rmsg
			select {
			case m = <-server.msgs:
			case <-ctx.Done():
				serr <- ctx.Err()
				return
			}
			var idx, seq int
			var ck uint64
			if _, err := fmt.Sscanf(string(m.data), "%d %d %x", &idx, &seq, &ck); err != nil {
				serr <- fmt.Errorf("request %q: %v", m.data, err)
				return
			}
			if prev[idx] != 0 { // the slot's previous transfer must be done
				if st, err := server.c.Tracker().Wait(ctx, prev[idx]); err != nil || st != barrier.Success {
					serr <- fmt.Errorf("op %d: %v %v", prev[idx], st, err)
					return
				}
			}
			local := sreg.Span(idx*size, size)
			pattern(local.Bytes(), seq)
			tok, err := server.c.Write(ctx, m.from, cmsg.Cookie(ck), 0, local, []byte(fmt.Sprintf("%d %d", idx, seq)))
			if err != nil {
				serr <- err
				return
			}
			prev[idx] = tok
		}
		serr <- server.c.Tracker().WaitAll(ctx, server.c.Tracker().Last())
	}()

	start := time.Now()
	sent, done := 0, 0
	want := make([]int, nbuf) // seq expected in each buffer
	for done < ops {
		for sent < ops {
			b := pool.TryGet()
			if b == nil {
				break
			}
			want[b.Index()] = sent
			req := fmt.Sprintf("%d %d %x", b.Index(), sent, uint64(b.Cookie()))
			if _, err := client.sock.WriteMsgContext(ctx, []byte(req), nil, server.addr(), 0); err != nil {
				t.Fatalf("request %d: %v", sent, err)
			}
			sent++
		}
		m := client.recv(t, "pool immediate data")
		var idx, seq int
		if _, err := fmt.Sscanf(string(m.data), "%d %d", &idx, &seq); err != nil {
			t.Fatalf("immediate data %q", m.data)
		}
		b := pool.Buffer(idx)
		if err := b.Landed(); err != nil {
			t.Fatal(err)
		}
		if seq != want[idx] || !checkPattern(b.Bytes(), seq) {
			t.Fatalf("buffer %d: immediate data for seq %d, want %d; contents match: %v", idx, seq, want[idx], checkPattern(b.Bytes(), seq))
		}
		if err := b.Release(); err != nil {
			t.Fatal(err)
		}
		done++
	}
	el := time.Since(start)
	if err := <-serr; err != nil {
		t.Fatalf("server: %v", err)
	}
	st := pool.Stats()
	if got := client.c.Registrations(); got != warm || st.Registrations != nbuf {
		t.Fatalf("registrations after warm-up: conn %d (warm %d), pool %d", got, warm, st.Registrations)
	}
	if st.Lent != ops || st.Returned != ops {
		t.Fatalf("pool stats %+v", st)
	}
	t.Logf("%d RDMA WRITEs of %d B through %d pooled buffers in %v (%.0f ops/s): %d registrations, all at warm-up; pool %+v",
		ops, size, nbuf, el, ops/el.Seconds(), client.c.Registrations(), st)
	if err := sreg.Close(); err != nil {
		t.Fatal(err)
	}
}

func pattern(b []byte, seq int) {
	for i := range b {
		b[i] = byte(seq*7 + i/64)
	}
}

func checkPattern(b []byte, seq int) bool {
	for i := range b {
		if b[i] != byte(seq*7+i/64) {
			return false
		}
	}
	return true
}

// TestIntegrationBlockServer runs the block server and client in one VM
// over one rxe device: 1,000 random block reads and writes, then the
// file's checksum on both sides.
func TestIntegrationBlockServer(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, stats := runBlockServer(t, ctx, vmtest.IBAddr1, vmtest.IBAddr2)
	t.Logf("block server: %d reads, %d writes (%d KiB) in %v; server %+v", res.Reads, res.Writes, res.Bytes>>10, res.Duration, stats)
}

func runBlockServer(t *testing.T, ctx context.Context, saddr, caddr netip.Addr) (blockserver.WorkloadResult, blockserver.ServerStats) {
	const seed, size = 7, 1 << 20
	path := t.TempDir() + "/blocks.img"
	if err := os.WriteFile(path, blockserver.Content(seed, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ssock, err := rdssock.Listen(netip.AddrPortFrom(saddr, rdmaPort()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ssock.Close()
	srv, err := blockserver.NewServer(ssock, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	type served struct {
		sum [32]byte
		err error
	}
	done := make(chan served, 1)
	go func() { s, err := srv.Serve(ctx); done <- served{s, err} }()

	csock, err := rdssock.Listen(netip.AddrPortFrom(caddr, rdmaPort()), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := blockserver.Dial(ctx, csock, ssock.LocalAddrPort(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	warm := cl.Conn().Registrations()
	model := blockserver.Content(seed, size)
	res, err := blockserver.Workload(ctx, cl, model, 1000, 4, seed)
	if err != nil {
		t.Fatalf("workload after %d reads and %d writes: %v", res.Reads, res.Writes, err)
	}
	if res.Reads+res.Writes != 1000 {
		t.Fatalf("%d reads + %d writes", res.Reads, res.Writes)
	}
	sum, err := cl.Sum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum != res.Sum {
		t.Fatalf("server's file SHA-256 %x, client's model %x", sum, res.Sum)
	}
	if got := cl.Conn().Registrations(); got != warm {
		t.Fatalf("%d registrations during the workload", got-warm)
	}
	if err := cl.Bye(ctx, res.Sum); err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil || s.sum != res.Sum {
		t.Fatalf("Serve: %v (sum %x)", s.err, s.sum)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(disk) != res.Sum {
		t.Fatal("file on disk differs from the client's model")
	}
	st := srv.Stats()
	if st.Reads != uint64(res.Reads) || st.Writes != uint64(res.Writes) || st.Syncs != uint64(res.Writes) || st.Errors != 0 {
		t.Fatalf("server stats %+v for %d reads and %d writes", st, res.Reads, res.Writes)
	}
	return res, st
}
