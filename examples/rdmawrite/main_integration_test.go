//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
	"golang.org/x/sys/unix"
)

var nextPort = 4700

func ports() (passive, active netip.AddrPort) {
	nextPort += 2
	return netip.AddrPortFrom(vmtest.IBAddr1, uint16(nextPort)), netip.AddrPortFrom(vmtest.IBAddr2, uint16(nextPort+1))
}

// runBoth runs the program's two roles over Soft-RoCE, both with the
// flags extra, and returns their RESULT lines.
func runBoth(t testing.TB, op string, depth, ops int, extra ...string) (passiveOut, activeOut string) {
	t.Helper()
	p, a := ports()
	common := append([]string{"-op", op, "-depth", strconv.Itoa(depth), "-size", "4096", "-ops", strconv.Itoa(ops), "-timeout", "3m"}, extra...)
	var pout, aout bytes.Buffer
	var perr, aerr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		perr = run(context.Background(), append([]string{"-role", "passive", "-local", p.String(), "-peer", a.String()}, common...), &pout)
	}()
	aerr = run(context.Background(), append([]string{"-role", "active", "-local", a.String(), "-peer", p.String()}, common...), &aout)
	wg.Wait()
	if perr != nil || aerr != nil {
		t.Fatalf("%s depth %d: passive: %v (%q), active: %v (%q)", op, depth, perr, pout.String(), aerr, aout.String())
	}
	return strings.TrimSpace(pout.String()), strings.TrimSpace(aout.String())
}

func field(t testing.TB, line, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`\b` + name + `=([0-9.]+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", name, line)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestIntegrationExample runs the example program, both roles, over one
// rxe device: RDMA WRITE with immediate data and RDMA READ with notify, at
// depth 1 and 16. Every operation must succeed, its immediate data reach
// the passive side, and its data verify.
func TestIntegrationExample(t *testing.T) {
	vmtest.Require(t)
	for _, op := range []string{"write", "read"} {
		for _, depth := range []int{1, 16} {
			t.Run(fmt.Sprintf("%s/depth%d", op, depth), func(t *testing.T) {
				const ops = 500
				pl, al := runBoth(t, op, depth, ops)
				t.Log(al)
				t.Log(pl)
				if field(t, al, "ops") != ops || field(t, al, "failed") != 0 || field(t, al, "verified") != ops {
					t.Errorf("active side: %s; want %d operations, all verified", al, ops)
				}
				if field(t, pl, "immediate") != ops || field(t, pl, "bad") != 0 {
					t.Errorf("passive side: %s; want %d immediate data messages, none bad", pl, ops)
				}
				if op == "write" && field(t, pl, "verified") != ops {
					t.Errorf("passive side: %s; want every WRITE verified in place", pl)
				}
			})
		}
	}
}

// TestIntegrationExampleForATime runs both roles the way rdsbench does:
// for a time (-duration) instead of a count, and with -verify=false. The
// run must last about that long, and the passive side must have the
// immediate data of every operation the active side counted, with none
// checked.
func TestIntegrationExampleForATime(t *testing.T) {
	vmtest.Require(t)
	for _, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			const d = 1500 * time.Millisecond
			start := time.Now()
			pl, al := runBoth(t, op, 4, 1, "-duration", d.String(), "-verify=false")
			took := time.Since(start)
			t.Log(al)
			t.Log(pl)
			n := field(t, al, "ops")
			if n < 10 || field(t, al, "failed") != 0 || field(t, al, "verified") != 0 || field(t, al, "issued") != n {
				t.Errorf("active side: %s; want at least 10 operations, none failed or checked, each issued once", al)
			}
			if field(t, pl, "immediate") != n || field(t, pl, "ops") != n || field(t, pl, "verified") != 0 || field(t, pl, "bad") != 0 {
				t.Errorf("passive side: %s; want the immediate data of all %v operations, none checked", pl, n)
			}
			if secs := field(t, al, "secs"); secs < d.Seconds() || took < d {
				t.Errorf("the active side issued for %vs (the run took %v); want at least -duration %v", secs, took, d)
			}
		})
	}
}

// oldActive is the active side as the documentation taught it before
// Conn.Wait and Conn.ReadMsg: a goroutine reads the socket and hands the
// control data to HandleControl, the issuer retries Do on congestion and
// waits on the tracker. It returns operations per second.
func oldActive(t testing.TB, sock *rdssock.Conn, c *rdmaops.Conn, peer netip.AddrPort, cookie cmsg.Cookie, depth, size, ops int) float64 {
	t.Helper()
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf, oob := make([]byte, 4096), make([]byte, 64*cmsg.RDMAStatusSpace)
		for {
			_, oobn, _, _, err := sock.ReadMsg(buf, oob)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			c.HandleControl(oob[:oobn])
		}
	}()
	region, err := rdmaops.NewRegion(depth * size)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	toks := make([]barrier.Token, depth)
	opsv := make([]rdmaops.Op, depth)
	spans := make([]rdmaops.Span, depth)
	for i := range opsv {
		spans[i] = region.Span(i*size, size)
		opsv[i] = rdmaops.Op{Write: true, Remote: cookie, RemoteOffset: uint64(i * size), Local: spans[i : i+1], Payload: make([]byte, 16)}
	}
	start := time.Now()
	for seq := 0; seq < ops; seq++ {
		i := seq % depth
		if seq >= depth {
			if st, err := c.Tracker().Wait(ctx, toks[i]); err != nil || st != barrier.Success {
				t.Fatalf("old pattern: operation %d: %v %v", seq-depth, st, err)
			}
		}
		for {
			toks[i], err = c.Do(ctx, peer, &opsv[i])
			if err == nil {
				break
			}
			if !errors.Is(err, rdssock.ErrCongested) && !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("old pattern: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := c.Tracker().WaitAll(ctx, c.Tracker().Last()); err != nil {
		t.Fatal(err)
	}
	rate := float64(ops) / time.Since(start).Seconds()
	sock.Close()
	<-done
	return rate
}

// newPassiveTarget registers a buffer of n bytes at a passive end whose
// ReadMsg drains the immediate data until ctx ends.
func newPassiveTarget(t testing.TB, ctx context.Context, p, a netip.AddrPort, n int) {
	t.Helper()
	psock, err := rdssock.Listen(p, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	pc := rdmaops.New(psock, nil, nil)
	t.Cleanup(func() { pc.Close() })
	region, err := rdmaops.NewRegion(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Register(ctx, region.Span(0, n), cmsg.FlagReadWrite, a, []byte("buffer")); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 256)
		for {
			if _, err := pc.ReadMsg(ctx, buf, nil); err != nil && !errors.Is(err, rdssock.ErrTruncated) {
				return
			}
		}
	}()
}

// cookieAt waits for the passive end's announcement with ReadMsg.
func cookieAt(t testing.TB, c *rdmaops.Conn) cmsg.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	buf := make([]byte, 64)
	for {
		m, err := c.ReadMsg(ctx, buf, nil)
		if err != nil {
			t.Fatalf("waiting for the cookie: %v", err)
		}
		if m.HasDest {
			return m.Dest
		}
	}
}

// newActive is the same loop as oldActive written the way the
// documentation teaches now: Do needs no retry loop, and Conn.Wait reads
// the completion notices in the issuing goroutine.
func newActive(t testing.TB, sock *rdssock.Conn, c *rdmaops.Conn, peer netip.AddrPort, cookie cmsg.Cookie, depth, size, ops int) float64 {
	t.Helper()
	ctx := context.Background()
	region, err := rdmaops.NewRegion(depth * size)
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	toks := make([]barrier.Token, depth)
	opsv := make([]rdmaops.Op, depth)
	spans := make([]rdmaops.Span, depth)
	for i := range opsv {
		spans[i] = region.Span(i*size, size)
		opsv[i] = rdmaops.Op{Write: true, Remote: cookie, RemoteOffset: uint64(i * size), Local: spans[i : i+1], Payload: make([]byte, 16)}
	}
	start := time.Now()
	for seq := 0; seq < ops; seq++ {
		i := seq % depth
		if seq >= depth {
			if st, err := c.Wait(ctx, toks[i]); err != nil || st != barrier.Success {
				t.Fatalf("new pattern: operation %d: %v %v", seq-depth, st, err)
			}
		}
		if toks[i], err = c.Do(ctx, peer, &opsv[i]); err != nil {
			t.Fatalf("new pattern: %v", err)
		}
	}
	if err := c.WaitAll(ctx, c.Tracker().Last()); err != nil {
		t.Fatal(err)
	}
	rate := float64(ops) / time.Since(start).Seconds()
	sock.Close()
	return rate
}

// measure runs one active loop (oldActive or newActive) against a fresh
// passive end.
func measure(t testing.TB, loop func(testing.TB, *rdssock.Conn, *rdmaops.Conn, netip.AddrPort, cmsg.Cookie, int, int, int) float64, depth, size, ops int) float64 {
	t.Helper()
	p, a := ports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	asock, err := rdssock.Listen(a, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	ac := rdmaops.New(asock, nil, nil)
	defer ac.Close()
	newPassiveTarget(t, ctx, p, a, depth*size)
	cookie := cookieAt(t, ac)
	return loop(t, asock, ac, p, cookie, depth, size, ops)
}

// BenchmarkExampleVersusOldPattern measures, in one VM, the active loop
// written against the hand-written pattern the documentation used to teach
// (a reader goroutine feeding HandleControl, a retry loop around Do,
// Tracker().Wait) and against Conn.Wait, alternately, for RDMA WRITE of
// 4 KiB with 16 bytes of immediate data at depth 1 and 16, and reports
// both rates and their ratio. It is a measurement, not a test: run it with
//
//	go test -tags integration -exec rdsvm -run '^$' -bench ExampleVersusOldPattern ./examples/rdmawrite
func BenchmarkExampleVersusOldPattern(b *testing.B) {
	vmtest.Require(b)
	const size = 4096
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			ops := max(b.N, 100)
			var oldSum, newSum float64
			for range 2 {
				oldSum += measure(b, oldActive, depth, size, ops)
				newSum += measure(b, newActive, depth, size, ops)
			}
			b.ReportMetric(oldSum/2, "old-ops/s")
			b.ReportMetric(newSum/2, "wait-ops/s")
			b.ReportMetric(newSum/oldSum, "wait/old")
		})
	}
}

func TestIntegrationWaitReadMsgAllocs(t *testing.T) {
	vmtest.Require(t)
	const size = 4096
	p, a := ports()
	ctx := context.Background()
	psock, err := rdssock.Listen(p, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	pc := rdmaops.New(psock, nil, nil)
	defer pc.Close()
	asock, err := rdssock.Listen(a, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	ac := rdmaops.New(asock, nil, nil)
	defer ac.Close()
	pregion, _ := rdmaops.NewRegion(size)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := pc.Register(rctx, pregion.Span(0, size), cmsg.FlagReadWrite, a, nil); err != nil {
		t.Fatal(err)
	}
	cookie := cookieAt(t, ac)
	aregion, _ := rdmaops.NewRegion(size)
	spans := []rdmaops.Span{aregion.Span(0, size)}
	op := &rdmaops.Op{Write: true, Remote: cookie, Local: spans, Payload: []byte("imm")}
	buf := make([]byte, 64)
	oneOp := func() {
		tok, err := ac.Do(ctx, p, op)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := ac.Wait(ctx, tok); err != nil || st != barrier.Success {
			t.Fatalf("Wait: %v %v", st, err)
		}
		if m, err := pc.ReadMsg(ctx, buf, nil); err != nil || m.N != 3 {
			t.Fatalf("ReadMsg: %+v %v", m, err)
		}
	}
	for range 50 {
		oneOp() // warm up pools and the tracker
	}
	if allocs := testing.AllocsPerRun(300, oneOp); allocs != 0 {
		t.Errorf("Do + Conn.Wait + Conn.ReadMsg: %v allocations per operation, want 0", allocs)
	}
	// WaitAll over a window of operations.
	window := func() {
		for range 8 {
			if _, err := ac.Do(ctx, p, op); err != nil {
				t.Fatal(err)
			}
		}
		if err := ac.WaitAll(ctx, ac.Tracker().Last()); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			if _, err := pc.ReadMsg(ctx, buf, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	window()
	if allocs := testing.AllocsPerRun(50, window); allocs != 0 {
		t.Errorf("Do x8 + Conn.WaitAll + ReadMsg x8: %v allocations, want 0", allocs)
	}
	// The same with one context that can end, used call after call (as
	// the program's own, bounded by -timeout): the sockets watch it once.
	// (A context made for each call allocates each time; see
	// rdssock.Conn.ReadMsgContext.)
	ctx = rctx
	for range 50 {
		oneOp()
	}
	if allocs := testing.AllocsPerRun(300, oneOp); allocs != 0 {
		t.Errorf("Do + Conn.Wait + Conn.ReadMsg with a context that can end: %v allocations per operation, want 0", allocs)
	}
}

// pair sets up two Conns over rxe, the passive one with a 4 KiB
// registration announced to the active one.
func pair(t *testing.T) (pc, ac *rdmaops.Conn, p netip.AddrPort, cookie cmsg.Cookie) {
	t.Helper()
	p, a := ports()
	psock, err := rdssock.Listen(p, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	pc = rdmaops.New(psock, nil, nil)
	t.Cleanup(func() { pc.Close() })
	asock, err := rdssock.Listen(a, &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	ac = rdmaops.New(asock, nil, nil)
	t.Cleanup(func() { ac.Close() })
	region, _ := rdmaops.NewRegion(4096)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pc.Register(ctx, region.Span(0, 4096), cmsg.FlagReadWrite, a, nil); err != nil {
		t.Fatal(err)
	}
	return pc, ac, p, cookieAt(t, ac)
}

// TestIntegrationWaitKeepsMessages sends data messages to a socket whose
// only reader is Conn.Wait: they must all come out of ReadMsg afterwards,
// in order, and Wait must not lose or reorder them.
func TestIntegrationWaitKeepsMessages(t *testing.T) {
	vmtest.Require(t)
	pc, ac, p, cookie := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	region, _ := rdmaops.NewRegion(4096)
	op := &rdmaops.Op{Write: true, Remote: cookie, Local: []rdmaops.Span{region.Span(0, 4096)}}
	const n = 10 // fewer than rdmaops.Backlog
	for i := range n {
		if _, err := pc.Socket().WriteMsgContext(ctx, fmt.Appendf(nil, "msg %d", i), nil, ac.Socket().LocalAddrPort(), 0); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // let them arrive before the notices
	for range 20 {
		tok, err := ac.Do(ctx, p, op)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := ac.Wait(ctx, tok); err != nil || st != barrier.Success {
			t.Fatalf("Wait: %v %v", st, err)
		}
	}
	buf := make([]byte, 64)
	for i := range n {
		m, err := ac.ReadMsg(ctx, buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("msg %d", i); string(buf[:m.N]) != want || m.From != p {
			t.Fatalf("message %d: %q from %v, want %q from %v", i, buf[:m.N], m.From, want, p)
		}
	}
}

// TestIntegrationWaitBesideReadMsg waits for operations while another
// goroutine sits in ReadMsg on the same Conn and receives data: the
// reader processes the notices, the waiter is woken by the tracker, and
// every data message reaches the reader.
func TestIntegrationWaitBesideReadMsg(t *testing.T) {
	vmtest.Require(t)
	pc, ac, p, cookie := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 200
	got := make(chan string, n)
	go func() {
		buf := make([]byte, 64)
		for {
			m, err := ac.ReadMsg(ctx, buf, nil)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:m.N])
		}
	}()
	go func() {
		for i := range n {
			if _, err := pc.Socket().WriteMsgContext(ctx, fmt.Appendf(nil, "msg %d", i), nil, ac.Socket().LocalAddrPort(), 0); err != nil {
				return
			}
		}
	}()
	region, _ := rdmaops.NewRegion(4096)
	op := &rdmaops.Op{Write: true, Remote: cookie, Local: []rdmaops.Span{region.Span(0, 4096)}}
	for range 300 {
		tok, err := ac.Do(ctx, p, op)
		if err != nil {
			t.Fatal(err)
		}
		if st, err := ac.Wait(ctx, tok); err != nil || st != barrier.Success {
			t.Fatalf("Wait: %v %v", st, err)
		}
	}
	for i := range n {
		select {
		case s := <-got:
			if want := fmt.Sprintf("msg %d", i); s != want {
				t.Fatalf("message %d: %q, want %q", i, s, want)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages reached ReadMsg", i, n)
		}
	}
}
