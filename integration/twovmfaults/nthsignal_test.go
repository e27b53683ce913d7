//go:build integration

package twovmfaults

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdmaops"
)

const (
	nthPort  = 4302
	nthEvery = 8
	nthSlice = 512
	nthOps   = 6000
	poison   = 0xEE
)

// TestNthSignalRxeRemove: rdmaops.Options.SignalEvery 8 while the main
// VM's Soft-RoCE device is deleted and added again 1 s later. The main VM
// streams WRITEs (into the first half of the owner's 16 pages) and READs
// (from the second half, which nothing writes: zeros), at most 32
// pending, each with immediate data and a local slice of its own. The
// moment the tracker releases an op (OnRelease) its slice is poisoned.
// Asserted: every op completes once and is released once; only covered
// ops are amended, and only to Dropped; a released READ that succeeded
// holds its data; the mark never goes down; after recovery a READ of the
// owner's write half (same memory, re-registered by the owner) finds no
// poison, and no READ slice was written after its release; every op
// resolves before Close.
func TestNthSignalRxeRemove(t *testing.T) {
	vmtest.Require(t)
	if !vmtest.TwoVMs() {
		t.Fatal("this package must run in two VMs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	remote := netip.AddrPortFrom(vmtest.RemoteAddr4(), nthPort)
	if vmtest.Role() == vmtest.RolePeer {
		owner(t, ctx, remote, nthPort, rxeOwnerSilence)
		return
	}
	nthInitiator(t, ctx, remote)
}

type nthOp struct {
	read, signaled bool
	first          barrier.Status
	completions    int
	amended        []barrier.Status
	released       int
}

func nthInitiator(t *testing.T, ctx context.Context, peer netip.AddrPort) {
	ps := os.Getpagesize()
	half := 8 * ps
	slots := half / nthSlice
	local, err := rdmaops.NewRegion(nthOps * nthSlice)
	if err != nil {
		t.Fatal(err)
	}
	slice := func(tok barrier.Token) []byte {
		i := int(tok) - 1
		return local.Bytes()[i*nthSlice : (i+1)*nthSlice]
	}
	var mu sync.Mutex
	ops := make([]nthOp, nthOps+1)
	var errs []string
	var lastMark barrier.Token
	var tr *barrier.Tracker
	fail := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	tr = barrier.New(&barrier.Config{Capacity: 8192, Timeout: rxeOpDeadline,
		OnComplete: func(c barrier.Completion) {
			mu.Lock()
			defer mu.Unlock()
			if c.Token == 0 || int(c.Token) > nthOps {
				return
			}
			o := &ops[c.Token]
			if c.Amended {
				o.amended = append(o.amended, c.Status)
				return
			}
			o.completions++
			o.first = c.Status
		},
		OnRelease: func(c barrier.Completion) {
			mu.Lock()
			defer mu.Unlock()
			m := tr.HighWater()
			if m < lastMark {
				fail("mark went down: %d after %d", m, lastMark)
			}
			lastMark = m
			if c.Token == 0 || int(c.Token) > nthOps {
				return
			}
			o := &ops[c.Token]
			o.released++
			b := slice(c.Token)
			if o.read && c.Status == barrier.Success {
				for _, x := range b {
					if x != 0 {
						fail("READ %d released Success without its data", c.Token)
						break
					}
				}
			}
			if c.Status == barrier.Covered && o.signaled {
				fail("notified op %d released Covered", c.Token)
			}
			for i := range b {
				b[i] = poison
			}
		}})
	defer tr.Close()
	e := newEndOpts(t, tr, nthPort, &rdmaops.Options{SignalEvery: nthEvery})
	closed := false
	defer func() {
		if !closed {
			e.closeWithin(rxeCloseLimit)
		}
	}()
	dead := map[cmsg.Cookie]bool{}
	key := func(limit time.Duration) (cmsg.Cookie, bool) { return e.askKey(ctx, peer, dead, limit) }
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	e.sock.WriteMsgContext(hctx, []byte("hello"), nil, peer, 0)
	hcancel()
	ck, ok := key(60 * time.Second)
	if !ok {
		t.Fatal("no key from the peer VM within 60 s")
	}

	since := 0 // mirrors rdmaops' count of unsignaled ops to the peer
	issue := func(force bool) error {
		tok := tr.Last() + 1
		if int(tok) > nthOps {
			return fmt.Errorf("out of slices")
		}
		mu.Lock()
		o := &ops[tok]
		o.read = tok%4 == 0
		o.signaled = force || since+1 >= nthEvery
		if o.signaled {
			since = 0
		} else {
			since++
		}
		mu.Unlock()
		b := slice(tok)
		slot := int(tok) % slots
		op := &rdmaops.Op{Write: !o.read, Remote: ck, Local: []rdmaops.Span{local.Span(int(tok-1)*nthSlice, nthSlice)}, Payload: []byte("op"), Signal: force}
		if o.read {
			for i := range b {
				b[i] = 0x11
			}
			op.RemoteOffset = uint64(half + slot*nthSlice)
		} else {
			for i := range b {
				b[i] = byte(int(tok)%200 + 1)
			}
			op.RemoteOffset = uint64(slot * nthSlice)
		}
		octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := e.c.Do(octx, peer, op)
		ocancel()
		if err == nil && got != tok {
			return fmt.Errorf("token %d, expected %d", got, tok)
		}
		return err
	}

	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	nh, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()

	stop := make(chan struct{})
	type result struct{ sendErrs int }
	streamDone := make(chan result, 1)
	go func() {
		n := 0
		for {
			last := int(tr.Last())+1 >= nthOps-1
			select {
			case <-stop:
				last = true
			default:
			}
			for !last && tr.Outstanding() >= 32 {
				select {
				case <-stop:
					last = true
				case <-time.After(time.Millisecond):
				}
			}
			if err := issue(last); err != nil {
				n++
				if last && n < 40 && ctx.Err() == nil {
					time.Sleep(250 * time.Millisecond)
					continue // the notified one must go out
				}
				if !last {
					time.Sleep(50 * time.Millisecond)
				}
			}
			if last {
				streamDone <- result{n}
				return
			}
		}
	}()
	time.Sleep(time.Second)
	before := tr.Last()
	delTook, hung, err := deleteRxeChild(vmtest.RxeDevice, rxeDeleteLimit)
	if err != nil {
		close(stop)
		<-streamDone
		if hung {
			t.Fatalf("deleting %s: %v; blocked tasks: %s", vmtest.RxeDevice, err, strings.Join(dumpBlocked(), " / "))
		}
		t.Fatalf("deleting %s: %v", vmtest.RxeDevice, err)
	}
	pendingAcross := tr.Outstanding()
	time.Sleep(rxeGone)
	addAt := time.Now()
	if err := netlinkcfg.SetupRxe(nh, vmtest.RxeDevice, vmtest.TwoVMLink, 15*time.Second); err != nil {
		close(stop)
		<-streamDone
		t.Fatalf("adding %s again: %v", vmtest.RxeDevice, err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	res := <-streamDone
	last := tr.Last()
	t.Logf("%d ops before the deletion, %d pending when it returned (took %v); %d ops in all, %d send errors",
		before, pendingAcross, delTook.Round(time.Millisecond), last, res.sendErrs)
	if pendingAcross == 0 {
		t.Error("no op was pending across the deletion: the fault was not exercised")
	}

	// Resolution: asking for a key drives the reconnect; the owner
	// reopens its socket after 3 s of silence.
	wctx, wcancel := context.WithTimeout(ctx, rxeOpDeadline+30*time.Second)
	for tr.HighWater() < last && wctx.Err() == nil {
		sctx, scancel := context.WithTimeout(wctx, time.Second)
		e.sock.WriteMsgContext(sctx, []byte("key?"), nil, peer, 0)
		if e.c.WaitAll(sctx, last) != nil {
			<-sctx.Done()
		}
		scancel()
	}
	wcancel()
	resolved := tr.HighWater() >= last
	settled := time.Since(addAt)
	stUnresolved := tr.Stats()

	// Recovery: a fresh key for the same memory, and a READ of the write
	// half: no poison may have reached it.
	dead[ck] = true
	check, err := rdmaops.NewRegion(half)
	if err != nil {
		t.Fatal(err)
	}
	var readBack barrier.Status
	for time.Since(addAt) < rxeRecoverLimit+rxeOpDeadline {
		k, ok := key(3 * time.Second)
		if !ok {
			continue
		}
		ck = k
		octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
		tok, err := e.c.Do(octx, peer, &rdmaops.Op{Remote: ck, Local: []rdmaops.Span{check.Span(0, half)}, Flags: cmsg.FlagFence, Signal: true, Deadline: time.Now().Add(5 * time.Second)})
		ocancel()
		if err != nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		readBack, _ = e.c.Wait(ctx, tok)
		if readBack == barrier.Success {
			break
		}
		if readBack == barrier.RemoteError {
			dead[ck] = true
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			e.sock.WriteMsgContext(sctx, []byte("rekey"), nil, peer, 0)
			scancel()
		}
	}
	if readBack != barrier.Success {
		t.Errorf("no READ of the owner's memory succeeded after the re-add (last %v)", readBack)
	} else {
		for i, x := range check.Bytes() {
			if x == poison {
				t.Errorf("poison at byte %d of the owner's write half: a WRITE read its source after its release", i)
				break
			}
		}
	}

	for range 3 {
		bctx, bcancel := context.WithTimeout(ctx, time.Second)
		e.sock.WriteMsgContext(bctx, []byte("bye"), nil, peer, 0)
		bcancel()
		time.Sleep(200 * time.Millisecond)
	}
	closed = true
	if _, ok := e.closeWithin(rxeCloseLimit); !ok {
		t.Fatalf("closing the socket did not finish within %v", rxeCloseLimit)
	}
	time.Sleep(time.Second) // a late READ would land by now
	mu.Lock()
	defer mu.Unlock()
	for _, s := range errs {
		t.Error(s)
	}
	hist := map[barrier.Status]int{}
	amended, covered := 0, 0
	for tok := barrier.Token(1); tok <= last; tok++ {
		o := &ops[tok]
		hist[o.first]++
		if o.first == barrier.Covered {
			covered++
		}
		if o.completions != 1 || o.released != 1 {
			t.Errorf("op %d: %d completions, %d releases", tok, o.completions, o.released)
		}
		for _, s := range o.amended {
			amended++
			if s != barrier.Dropped || o.signaled || o.first != barrier.Covered {
				t.Errorf("op %d (notified %v, first %v) amended to %v", tok, o.signaled, o.first, s)
			}
		}
		if o.read {
			for _, x := range slice(tok) {
				if x != poison {
					t.Errorf("READ %d wrote into its slice after its release", tok)
					break
				}
			}
		}
	}
	if n := tr.Outstanding(); n != 0 || tr.Stats().Quarantined != 0 {
		t.Errorf("after close: %d outstanding, %d quarantined", n, tr.Stats().Quarantined)
	}
	t.Logf("statuses %v; %d covered, %d amendments; resolved before close %v (%v after the re-add); late %d %v, unmatched %d, quarantined then %d; read-back %v",
		hist, covered, amended, resolved, settled.Round(time.Millisecond), stUnresolved.Late, stUnresolved.LateStatus, stUnresolved.Unmatched, stUnresolved.Quarantined, readBack)
	if !resolved {
		t.Errorf("not every op resolved within %v before Close (mark %d of %d)", rxeOpDeadline+30*time.Second, tr.HighWater(), last)
	}
	reliability(t, "nth-signal/rxe-remove-1s", hist, int(last), fmt.Sprintf("every %dth notified; %d pending across the deletion; %d covered; %d amendments; resolved %v", nthEvery, pendingAcross, covered, amended, resolved))
	local.Close()
	check.Close()
}
