//go:build integration

package rdmafaults

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
)

// Signaling every Nth operation (rdmaops.Options.SignalEvery): the server
// issues READs and WRITEs against the client's registration, notifying
// only every nthEvery-th one. The instrument is a poison witness: every
// operation has a local slice of its own, and the moment the tracker
// releases an operation (OnRelease) its slice is overwritten with poison.
// A WRITE whose source the adapter reads after the release carries poison
// into the client's memory; a READ that lands after the release overwrites
// the poison. A released READ that completed Success or Covered must have
// its data in place at the release (the fence on the notified operation).

const (
	nthEvery = 8
	nthSlice = 512  // bytes per operation
	poison   = 0xEE // never a source pattern
	readSrc  = 0x3C // the client's READ source area
)

type nthOp struct {
	read, signaled bool
	slot           int // WRITE target slot in the client's write area
	first          barrier.Status
	completions    int
	amended        []barrier.Status
	released       int
	relStatus      barrier.Status
}

type nthRun struct {
	t       *testing.T
	p       *pair
	tr      *barrier.Tracker
	local   *rdmaops.Region // the server's slices, one per op
	mem     *rdmaops.Region // the client's registration: write slots, then the read source
	ck      cmsg.Cookie
	slots   int
	maxOps  int
	since   int  // ops handed to Do unsignaled since the last notified one, as rdmaops counts them
	writes  bool // WRITEs only
	strict  bool // no fault: a Covered READ must have its data at its release
	mu      sync.Mutex
	ops     []nthOp // by token
	marks   []barrier.Token
	errs    []string
	covered int
	opBuf   rdmaops.Op
	spanBuf [1]rdmaops.Span
}

func (r *nthRun) errorf(format string, args ...any) {
	r.mu.Lock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

func (r *nthRun) slice(tok barrier.Token) []byte {
	i := int(tok) - 1
	return r.local.Bytes()[i*nthSlice : (i+1)*nthSlice]
}

func writeByte(tok barrier.Token) byte { return byte(int(tok)%200 + 1) }

// newNthRun makes a pair whose server signals every nthEvery-th op, and
// registers the client's memory.
func newNthRun(t *testing.T, ctx context.Context, maxOps int) *nthRun {
	r := &nthRun{t: t, maxOps: maxOps, slots: 64, ops: make([]nthOp, maxOps+1), marks: make([]barrier.Token, 0, maxOps+16)}
	cfg := &barrier.Config{Capacity: 1024, Timeout: 20 * time.Second, OnComplete: r.onComplete, OnRelease: r.onRelease}
	r.p = newPairWith(t, ctx, cfg, &rdmaops.Options{SignalEvery: nthEvery})
	r.tr = r.p.server.c.Tracker()
	r.local = newRegion(t, maxOps*nthSlice)
	r.mem = newRegion(t, 2*r.slots*nthSlice)
	fillByte(r.mem.Bytes()[:r.slots*nthSlice], 0)
	fillByte(r.mem.Bytes()[r.slots*nthSlice:], readSrc)
	_, r.ck = r.p.register(t, ctx, r.mem.Span(0, r.mem.Len()), cmsg.FlagReadWrite)
	return r
}

func (r *nthRun) op(tok barrier.Token) *nthOp {
	if tok == 0 || int(tok) > r.maxOps {
		return nil
	}
	return &r.ops[tok]
}

func (r *nthRun) onComplete(c barrier.Completion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.op(c.Token)
	if o == nil {
		r.errs = append(r.errs, fmt.Sprintf("completion for unknown token %d", c.Token))
		return
	}
	if c.Amended {
		o.amended = append(o.amended, c.Status)
		return
	}
	o.completions++
	o.first = c.Status
}

// onRelease checks and poisons the op's slice. It runs outside the
// tracker's lock, so it may ask the tracker.
func (r *nthRun) onRelease(c barrier.Completion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mark := r.tr.HighWater() // under r.mu: the samples are in order
	o := r.op(c.Token)
	if o == nil {
		return
	}
	o.released++
	o.relStatus = c.Status
	if n := len(r.marks); n > 0 && mark < r.marks[n-1] {
		r.errs = append(r.errs, fmt.Sprintf("mark went down: %d after %d", mark, r.marks[n-1]))
	}
	r.marks = append(r.marks, mark)
	b := r.slice(c.Token)
	if o.read && (c.Status == barrier.Success || r.strict && c.Status == barrier.Covered) && !allByte(b, readSrc) {
		r.errs = append(r.errs, fmt.Sprintf("READ %d released %v without its data", c.Token, c.Status))
	}
	if c.Status == barrier.Covered {
		r.covered++
		if o.signaled {
			r.errs = append(r.errs, fmt.Sprintf("notified op %d released as Covered", c.Token))
		}
	}
	fillByte(b, poison)
}

// issue sends op number tok (its token must be tr.Last()+1): every
// fourth a READ, force makes it the notified one.
func (r *nthRun) issue(ctx context.Context, force bool, deadline time.Time) (barrier.Token, error) {
	tok := r.tr.Last() + 1
	o := r.op(tok)
	if o == nil {
		return 0, fmt.Errorf("out of op slices at token %d", tok)
	}
	r.mu.Lock()
	o.read = tok%4 == 0 && !r.writes
	o.signaled = force || r.since+1 >= nthEvery
	if o.signaled {
		r.since = 0
	} else {
		r.since++
	}
	o.slot = int(tok) % r.slots
	r.mu.Unlock()
	b := r.slice(tok)
	r.spanBuf[0] = r.local.Span(int(tok-1)*nthSlice, nthSlice)
	op := &r.opBuf // Do keeps no reference to it
	*op = rdmaops.Op{Write: !o.read, Remote: r.ck, Local: r.spanBuf[:], Signal: force, Deadline: deadline}
	if o.read {
		fillByte(b, 0)
		op.RemoteOffset = uint64(r.slots*nthSlice + o.slot*nthSlice)
	} else {
		fillByte(b, writeByte(tok))
		op.RemoteOffset = uint64(o.slot * nthSlice)
	}
	got, err := r.p.server.c.Do(ctx, r.p.client.addr(), op)
	if got != 0 && got != tok {
		return got, fmt.Errorf("token %d, expected %d", got, tok)
	}
	return got, err
}

// pipeline issues ops with at most depth pending until stop is closed or
// n were issued; the last one is forced notified. It returns the last
// token.
func (r *nthRun) pipeline(ctx context.Context, n, depth int, stop <-chan struct{}) (barrier.Token, int) {
	sendErrs := 0
	for i := 0; i < n; i++ {
		last := i == n-1
		if !last {
			select {
			case <-stop:
				last = true
			default:
			}
		}
		for r.tr.Outstanding() >= depth && ctx.Err() == nil {
			time.Sleep(200 * time.Microsecond)
		}
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := r.issue(octx, last, time.Time{})
		cancel()
		if err != nil {
			sendErrs++
			if last && sendErrs < 20 && ctx.Err() == nil {
				// The notified op must go out, or nothing covers
				// the ones before it.
				i--
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		if last {
			break
		}
	}
	return r.tr.Last(), sendErrs
}

// check runs the final assertions once every op is released (after the
// server closed): one first completion each, amendments only Dropped and
// only for unsignaled ops, the poison intact in every READ slice and
// absent from the client's memory.
func (r *nthRun) check(t *testing.T, last barrier.Token) (hist map[barrier.Status]int, amended int) {
	t.Helper()
	time.Sleep(time.Second) // a late transfer would land by now
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
	hist = map[barrier.Status]int{}
	for tok := barrier.Token(1); tok <= last; tok++ {
		o := &r.ops[tok]
		hist[o.first]++
		if o.completions != 1 || o.released != 1 {
			t.Errorf("op %d: %d completions, %d releases", tok, o.completions, o.released)
		}
		for _, s := range o.amended {
			amended++
			if s != barrier.Dropped || o.signaled || o.first != barrier.Covered {
				t.Errorf("op %d (notified %v, first %v) amended to %v", tok, o.signaled, o.first, s)
			}
		}
		if o.first == barrier.Covered && o.signaled {
			t.Errorf("notified op %d completed Covered", tok)
		}
		if o.read && !allByte(r.slice(tok), poison) {
			t.Errorf("READ %d wrote into its slice after its release (%v)", tok, o.relStatus)
		}
	}
	for i, x := range r.mem.Bytes()[:r.slots*nthSlice] {
		if x == poison {
			t.Errorf("poison at byte %d of the client's write area: a WRITE read its source after the release", i)
			break
		}
	}
	if st := r.tr.Stats(); st.Quarantined != 0 || r.tr.Outstanding() != 0 {
		t.Errorf("after close: %d outstanding, %d quarantined", r.tr.Outstanding(), st.Quarantined)
	}
	return hist, amended
}

// TestNthSignalPipeline: no fault. 400 ops, at most 32 pending, every 8th
// notified. Every op resolves, the mark rises during the run and reaches
// the last token, only the notified ops get a kernel status (Success),
// the others complete Covered, and no amendment comes.
func TestNthSignalPipeline(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n, rounds = 400, 50
	r := newNthRun(t, ctx, n+rounds*nthEvery)
	r.strict = true
	start := time.Now()
	last, sendErrs := r.pipeline(ctx, n, 32, nil)
	markAtLast := r.tr.HighWater()
	if sendErrs != 0 {
		t.Fatalf("%d send errors", sendErrs)
	}
	if err := r.p.server.c.WaitAll(ctx, last); err != nil {
		t.Fatalf("WaitAll(%d): %v (mark %d)", last, err, r.tr.HighWater())
	}
	took := time.Since(start)

	// Steady state: 8 ops (the 8th notified), then spin until the mark
	// reaches it, while the end's loop processes the status. No
	// allocation per op, in this goroutine or the reading one.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range rounds {
		var tok barrier.Token
		for range nthEvery {
			var err error
			if tok, err = r.issue(context.Background(), false, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		for r.tr.HighWater() < tok {
			runtime.Gosched()
		}
	}
	runtime.ReadMemStats(&m1)
	perOp := float64(m1.Mallocs-m0.Mallocs) / float64(rounds*nthEvery)
	t.Logf("steady state: %d allocations in %d ops (%.3f per op; race detector on, not judged: %v)", m1.Mallocs-m0.Mallocs, rounds*nthEvery, perOp, raceEnabled)
	if perOp >= 0.05 && !raceEnabled {
		t.Errorf("%.3f allocations per op in steady state", perOp)
	}
	last = r.tr.Last()
	st := r.tr.Stats()
	signaled := 0
	for tok := barrier.Token(1); tok <= last; tok++ {
		if r.ops[tok].signaled {
			signaled++
		}
	}
	r.p.server.close()
	hist, amended := r.check(t, last)
	t.Logf("pipeline of %d ops in %v (mark %d when its last op was issued); %d ops in all, %d notified; statuses %v; %d unmatched, %d late",
		n, took.Round(time.Millisecond), markAtLast, last, signaled, hist, st.Unmatched, st.Late)
	if hist[barrier.Success] != signaled || hist[barrier.Covered] != int(last)-signaled || amended != 0 || st.Unmatched != 0 {
		t.Errorf("want %d Success and %d Covered, no amendment, no unmatched status", signaled, int(last)-signaled)
	}
	if markAtLast == 0 {
		t.Error("the mark did not rise while ops were issued")
	}
	var c tally
	for s, k := range hist {
		for range k {
			c.add(s)
		}
	}
	reliability(t, "nth-signal/no-fault", c, fmt.Sprintf("every %dth notified; %d covered; mark rose during the run", nthEvery, hist[barrier.Covered]))
}

// TestNthSignalBogusCookie: unsignaled good WRITEs A1-A3, an unsignaled
// WRITE X with a bogus cookie, unsignaled good A5-A7, then a notified B,
// back to back. X fails at the client's adapter; the kernel gives it no
// status from the completion path (it has no NOTIFY_ME), the ops after
// it are flushed, and the connection goes down. Asserted: nothing after
// A1 is released before B has a status or an op its own kernel status; X
// is never reported RemoteError; the client's memory holds A1-A3 and no
// poison; once the client's socket is closed (which lets the connection
// come back on 6.1) every op resolves within 40 s.
func TestNthSignalBogusCookie(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r := newNthRun(t, ctx, 64)
	r.writes = true
	good := r.ck
	var toks []barrier.Token
	for i := range 8 {
		r.ck = good
		if i == 3 {
			r.ck = cmsg.MakeCookie(good.RKey()^0x5a5a00, 0)
		}
		tok, err := r.issue(ctx, i == 7, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		toks = append(toks, tok)
	}
	r.ck = good
	a1, x, b := toks[0], toks[3], toks[7]
	if !r.ops[b].signaled || r.ops[x].signaled {
		t.Fatalf("plan: B notified %v, X notified %v", r.ops[b].signaled, r.ops[x].signaled)
	}
	// Watch the first 5 s: no release of A1..B unless B or the op itself
	// has a kernel status.
	var bAt time.Duration
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		if s := r.tr.Status(b); s != barrier.Pending && bAt == 0 {
			bAt = time.Since(start)
		}
		if hw := r.tr.HighWater(); hw >= a1 && r.tr.Status(b) == barrier.Pending && r.tr.Status(a1) == barrier.Covered {
			t.Errorf("mark %d passed A1 (%d) with B pending", hw, a1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := make([]barrier.Status, len(toks))
	for i, tok := range toks {
		before[i] = r.tr.Status(tok)
	}
	t.Logf("after 5 s: statuses %v (B's status after %v; 0: none)", before, bAt)
	// A1..A3 landed before X failed.
	memA := append([]byte(nil), r.mem.Bytes()[:r.slots*nthSlice]...)
	r.p.fault()
	r.p.client.close()
	recoverStart := time.Now()
	// Traffic to the client's address makes the kernel reconnect.
	wctx, wcancel := context.WithTimeout(ctx, 40*time.Second)
	for r.tr.HighWater() < b && wctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(wctx, time.Second)
		r.p.server.sock.WriteMsgContext(pctx, []byte("ping"), nil, r.p.client.addr(), 0)
		if r.p.server.c.WaitAll(pctx, b) != nil {
			<-pctx.Done()
		}
		pcancel()
	}
	wcancel()
	resolved := r.tr.HighWater() >= b
	recovered := time.Since(recoverStart)
	after := make([]barrier.Status, len(toks))
	for i, tok := range toks {
		after[i] = r.tr.Status(tok)
	}
	r.p.server.close()
	hist, amended := r.check(t, b)
	t.Logf("after the client closed: statuses %v, resolved %v in %v; %d amendments; stats %+v", after, resolved, recovered.Round(time.Millisecond), amended, r.tr.Stats())
	if !resolved {
		t.Errorf("the ops did not resolve within 40 s of closing the client (mark %d, B %d)", r.tr.HighWater(), b)
	}
	if before[3] == barrier.RemoteError || after[3] == barrier.RemoteError {
		t.Errorf("X, sent without NOTIFY_ME, was reported RemoteError: the kernel differs from the reading in the package doc")
	}
	for i := range 3 {
		tok := toks[i]
		if r.ops[tok].read {
			continue
		}
		sl := memA[r.ops[tok].slot*nthSlice : (r.ops[tok].slot+1)*nthSlice]
		if !allByte(sl, writeByte(tok)) {
			t.Errorf("A%d's data is not in the client's memory", i+1)
		}
	}
	var c tally
	for s, k := range hist {
		for range k {
			c.add(s)
		}
	}
	reliability(t, "nth-signal/bogus-cookie", c, fmt.Sprintf("before close %v; after %v; %d amendments", before, after, amended))
}

// TestNthSignalBogusCookieNotified: seven unsignaled good WRITEs, then the
// notified 8th with a bogus cookie. The completion path reports the 8th
// RemoteError (net/rds/ib_send.c maps a remote access error of a notified
// op), and that status covers the seven, whose data is in the client's
// memory by then: RC executes work requests in order.
func TestNthSignalBogusCookieNotified(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newNthRun(t, ctx, 16)
	r.writes = true
	good := r.ck
	var toks []barrier.Token
	for i := range nthEvery {
		r.ck = good
		if i == nthEvery-1 {
			r.ck = cmsg.MakeCookie(good.RKey()^0x5a5a00, 0)
		}
		tok, err := r.issue(ctx, false, time.Now().Add(20*time.Second))
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		toks = append(toks, tok)
	}
	r.ck = good
	x := toks[nthEvery-1]
	if !r.ops[x].signaled {
		t.Fatal("the 8th op was not the notified one")
	}
	st, err := r.p.server.c.Wait(ctx, x)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	r.p.fault()
	statuses := make([]barrier.Status, len(toks))
	for i, tok := range toks {
		statuses[i] = r.tr.Status(tok)
	}
	mark := r.tr.HighWater()
	mem := append([]byte(nil), r.mem.Bytes()[:r.slots*nthSlice]...)
	r.p.client.close()
	r.p.server.close()
	hist, amended := r.check(t, x)
	t.Logf("statuses %v; mark %d of %d; %d amendments", statuses, mark, x, amended)
	if st != barrier.RemoteError {
		t.Errorf("the notified op with a bogus cookie ended %v, want remote error", st)
	}
	for i, tok := range toks[:nthEvery-1] {
		if statuses[i] != barrier.Covered {
			t.Errorf("op %d: %v at the notified op's status, want covered", i+1, statuses[i])
		}
		sl := mem[r.ops[tok].slot*nthSlice : (r.ops[tok].slot+1)*nthSlice]
		if !allByte(sl, writeByte(tok)) {
			t.Errorf("op %d's data is not in the client's memory", i+1)
		}
	}
	if mark != x {
		t.Errorf("mark %d, want %d", mark, x)
	}
	var c tally
	for s, k := range hist {
		for range k {
			c.add(s)
		}
	}
	reliability(t, "nth-signal/bogus-cookie-notified", c, fmt.Sprintf("statuses %v", statuses))
}
