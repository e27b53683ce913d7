//go:build integration

package rdmafaults

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
)

// vma is a mapping from /proc/self/smaps.
type vma struct {
	start, end uintptr
	flags      string
}

// vmaOf returns the mapping that contains addr.
func vmaOf(t *testing.T, addr uintptr) vma {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur vma
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			if found {
				break
			}
			lo, hi, _ := strings.Cut(r, "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			cur = vma{start: uintptr(s), end: uintptr(e)}
			found = addr >= cur.start && addr < cur.end
			continue
		}
		if found && strings.HasPrefix(line, "VmFlags:") {
			cur.flags = strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return cur
}

// TestRegistrationExposure registers 100 bytes of a two-page region and
// shows what a peer can reach with the cookie: the registration exposes
// the whole first page (RDS registers whole pages; measured), never the
// second page, and the region's pages are its own: a mapping of their own
// outside the Go heap (MADV_DONTFORK shows as "dc" in VmFlags, which the
// Go runtime never sets). READs beyond the registered pages fail with a
// remote access error and return no bytes. Whether a key registered
// without RDS_RDMA_READWRITE refuses a WRITE is measured and logged.
func TestRegistrationExposure(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()

	creg := newRegion(t, 2*ps)
	t.Cleanup(func() { creg.Close() })
	fillByte(creg.Bytes()[:100], 'R')   // the registered span
	fillByte(creg.Bytes()[100:ps], 'P') // the rest of its page
	fillByte(creg.Bytes()[ps:], 'S')    // the next page: never exposed
	base := uintptr(unsafe.Pointer(&creg.Bytes()[0]))
	if base%uintptr(ps) != 0 || creg.Len()%ps != 0 {
		t.Fatalf("region at %#x, %d bytes: not whole pages", base, creg.Len())
	}
	m := vmaOf(t, base)
	heap := new([64]byte)
	hp := uintptr(unsafe.Pointer(heap))
	if m.start > base || m.end < base+uintptr(creg.Len()) || !strings.Contains(" "+m.flags+" ", " dc ") || (hp >= m.start && hp < m.end) {
		t.Fatalf("region [%#x, %#x) lies in mapping [%#x, %#x) flags %q; a heap object is at %#x", base, base+uintptr(creg.Len()), m.start, m.end, m.flags, hp)
	}
	t.Logf("region [%#x, %#x): mapping [%#x, %#x), VmFlags %q (dc: excluded from fork, never Go heap)", base, base+uintptr(creg.Len()), m.start, m.end, m.flags)

	var c tally
	p := newPair(t, ctx)
	// After a remote access error the kernel's shutdown of the connection
	// hangs while the owner's socket holds registrations made over it,
	// and holds the RDS work queue meanwhile, so no RDS/IB connection
	// comes up (measured in TestBogusAndStaleCookies): close the owner's
	// socket after each error before the next connection.
	mr, ck := p.register(t, ctx, creg.Span(0, 100), 0) // read-only for the peer
	sreg := newRegion(t, 2*ps)
	defer sreg.Close()
	local := sreg.Span(0, 2*ps)
	read := func(p *pair, ck cmsg.Cookie, off, n int) (barrier.Status, []byte) {
		fillByte(sreg.Bytes(), 0x5A)
		st := p.read(t, ctx, ck, uint64(off), local.Slice(0, n), 10*time.Second)
		c.add(st)
		return st, sreg.Bytes()[:n]
	}
	if st, got := read(p, ck, 0, 100); st != barrier.Success || !allByte(got, 'R') {
		t.Fatalf("READ of the registered 100 bytes: %v", st)
	}
	st, got := read(p, ck, 0, ps)
	wholePage := st == barrier.Success && allByte(got[:100], 'R') && allByte(got[100:], 'P')
	t.Logf("READ of the whole first page through a 100-byte registration: %v (whole page exposed: %v)", st, wholePage)
	if st != barrier.Success {
		mr.Free()
		p.client.close()
		p = newPair(t, ctx)
		mr, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	}
	for _, o := range []struct {
		name   string
		off, n int
	}{
		{"READ across into the next page", 0, 2 * ps},
		{"READ of the next page", ps, 64},
		{"READ at an offset past the registration's end", 2 * ps, 64},
	} {
		st, got := read(p, ck, o.off, o.n)
		if st != barrier.RemoteError || !allByte(got, 0x5A) {
			t.Errorf("%s: %v; local buffer untouched: %v", o.name, st, allByte(got, 0x5A))
		}
		if strings.Contains(string(got), "SSSS") {
			t.Errorf("%s: bytes of the unregistered page reached the peer", o.name)
		}
		mr.Free()
		p.client.close()
		p = newPair(t, ctx) // the access error tore the connection down
		mr, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	}
	// A WRITE into a registration made without RDS_RDMA_READWRITE.
	// Measured: it succeeds, because the kernel's FRWR registration always
	// grants remote write access (the flag only marks pages dirty). Only
	// the page boundary protects memory; logged, not asserted.
	fillByte(sreg.Bytes(), 'W')
	st = p.write(t, ctx, ck, 0, sreg.Span(0, 100), "w", 10*time.Second)
	c.add(st)
	roWritten := allByte(creg.Bytes()[:100], 'W')
	if (st == barrier.Success) != roWritten || !allByte(creg.Bytes()[100:ps], 'P') || !allByte(creg.Bytes()[ps:], 'S') {
		t.Errorf("WRITE into a read-only key: %v, but memory landed: %v (or bytes past the 100 changed)", st, roWritten)
	}
	t.Logf("WRITE into a key registered without RDS_RDMA_READWRITE: %v (memory written: %v)", st, roWritten)
	fillByte(creg.Bytes()[:100], 'R')
	if st == barrier.Success {
		p.client.drain(100 * time.Millisecond)
	} else {
		mr.Free()
		p.client.close()
		p = newPair(t, ctx)
		mr, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	}
	// The process keeps serving: a fresh connection works.
	mr.Free()
	p.client.close()
	p = newPair(t, ctx)
	mr, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	defer mr.Free()
	if st, got := read(p, ck, 0, 100); st != barrier.Success || !allByte(got, 'R') {
		t.Fatalf("READ on a fresh connection after the faults: %v", st)
	}
	page := "only the registered page"
	if wholePage {
		page = "the whole first page (RDS registers whole pages)"
	}
	ro := "a write into a read-only key was refused"
	if roWritten {
		ro = "a write into a key registered without READWRITE landed (FRWR grants remote write)"
	}
	reliability(t, "exposure/out-of-range-and-permissions", c, "peer reached "+page+"; beyond it refused, no bytes moved; "+ro)
}

// TestBogusAndStaleCookies: RDMA with a cookie the owner never issued, and
// with a freed key after the owner's peer acknowledged the registration,
// fail with a remote access error. The error tears the RDS/IB connection
// down. Measured on Linux 6.1: the kernel's shutdown of that connection
// then hangs (rds_ib_conn_path_shutdown, in the single RDS work queue, so
// no RDS/IB connection of any TOS comes up meanwhile) until the socket
// that registered memory over it is closed; freeing and flushing the key
// is not enough. The test measures each step.
//
// Linux 7.2 sometimes never reports the bogus write (the shutdown stuck in
// rds_ib_conn_path_shutdown): accepted only as far as the C reference's
// bogus writes in the same VM run show it (judgeBogusWrites).
func TestBogusAndStaleCookies(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()
	creg := newRegion(t, ps)
	t.Cleanup(func() { creg.Close() })
	fillByte(creg.Bytes(), 'K')
	sreg := newRegion(t, ps)
	defer sreg.Close()
	local := sreg.Span(0, 64)
	var c tally

	// Stale: freed, acknowledged (any message from the peer carries the
	// acknowledgement of the registration message), a second later.
	p := newPair(t, ctx)
	mr, stale := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite|cmsg.FlagInvalidate)
	mr.Free()
	p.server.sock.WriteMsgContext(ctx, []byte("ack"), nil, p.client.addr(), 0)
	p.client.recv(t, "ack", 10*time.Second)
	time.Sleep(time.Second)
	fillByte(sreg.Bytes(), 'X')
	st := p.write(t, ctx, stale, 0, local, "stale", 10*time.Second)
	c.add(st)
	st0 := st
	switch {
	case st == barrier.Success:
		// The kernel's deferred flush had not run yet: judged against
		// the C reference's late writes. The memory is the owner's
		// again for the bogus write below.
		judgeDeadKeyLanded(t, "a freed key a second after the acknowledgement", 1, 1)
		fillByte(creg.Bytes(), 'K')
	case (st == barrier.Dropped || st == barrier.TimedOut) && allByte(creg.Bytes(), 'K'):
		// Linux 7.2 sometimes reports a write into a dead key as
		// dropped, or not at all (seen here in CI, 1 in about 40 runs):
		// judged as judgeDeadKeyWrites judges those of TestUseOnceKey,
		// against the C reference's late writes in this VM run.
		var one tally
		one.add(st)
		judgeDeadKeyWrites(t, "a freed key a second after the acknowledgement", one, 0)
	case st != barrier.RemoteError || !allByte(creg.Bytes(), 'K'):
		t.Errorf("write with a stale cookie: %v; memory unchanged: %v", st, allByte(creg.Bytes(), 'K'))
	}

	// Bogus: a key never issued, while a good key is registered.
	p = newPair(t, ctx)
	mr, good := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite)
	bogus := cmsg.MakeCookie(good.RKey()^0x5a5a00, 0)
	start := time.Now()
	st = p.write(t, ctx, bogus, 0, local, "bogus", 10*time.Second)
	c.add(st)
	t.Logf("bogus cookie: %v after %v", st, time.Since(start))
	switch {
	case !allByte(creg.Bytes(), 'K'):
		t.Errorf("write with a bogus cookie: %v; memory changed", st)
	case st == barrier.Dropped || st == barrier.TimedOut:
		// Linux 7.2 sometimes never reports it (seen in CI twice in
		// about 50 runs): judged against the C reference's bogus writes
		// in this VM run.
		var one tally
		one.add(st)
		judgeBogusWrites(t, "a bogus cookie", one)
	case st != barrier.RemoteError:
		t.Errorf("write with a bogus cookie: %v, want remote error", st)
	}
	staleOut := "refused with remote error"
	switch {
	case st0 == barrier.Success:
		staleOut = "landed (kernel flush not yet run; judged against C)"
	case st0 != barrier.RemoteError:
		staleOut = st0.String() + " (judged against C), memory unchanged"
	}
	bogusOut := "refused with remote error"
	if st != barrier.RemoteError {
		bogusOut = st.String() + " (judged against C)"
	}
	outcome := "both refused with remote error, memory unchanged"
	if st0 != barrier.RemoteError || st != barrier.RemoteError {
		outcome = "the stale write " + staleOut + "; the bogus one " + bogusOut
	}
	reliability(t, "cookies/bogus-and-stale", c, outcome)

	// Recovery of the torn-down connection, same TOS, same sockets.
	var rc tally
	ping := func(limit time.Duration) time.Duration {
		start := time.Now()
		for n := 0; time.Since(start) < limit; n++ {
			p.client.sock.WriteMsgContext(ctx, []byte(fmt.Sprintf("ping %d", n)), nil, p.server.addr(), 0)
			if m, ok := p.server.tryRecv(500 * time.Millisecond); ok && strings.HasPrefix(string(m.data), "ping") {
				return time.Since(start)
			}
		}
		return 0
	}
	rows := func() []string {
		conns, _ := p.server.sock.Connections()
		var state []string
		for _, cn := range conns {
			if cn.TOS == p.tos {
				state = append(state, fmt.Sprintf("%v->%v connected %t", cn.Local, cn.Remote, cn.Connected))
			}
		}
		return state
	}
	held := ping(5 * time.Second)
	heldRows := rows()
	var blocked []string
	if held == 0 {
		blocked = vmtest.DumpBlocked(40, "rds", "task:", "rxe")
		t.Logf("key still registered: no message through in 5 s; connection rows %v; blocked tasks:\n%s", heldRows, strings.Join(blocked, "\n"))
	}
	start = time.Now()
	mr.Free()
	if err := p.client.c.Flush(); err != nil {
		t.Errorf("Flush: %v", err)
	}
	freed := ping(3 * time.Second)
	// Closing the owner's socket is what lets the shutdown finish.
	start = time.Now()
	p.client.close()
	p.client = newEnd(t, vmtest.IBAddr2, p.tos, &barrier.Config{Timeout: 30 * time.Second})
	after := ping(20 * time.Second)
	if after != 0 {
		after = time.Since(start)
	}
	var rdmaAfter time.Duration
	if after != 0 {
		mr2, good2 := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite)
		fillByte(sreg.Bytes(), 'Y')
		st := p.write(t, ctx, good2, 0, local, "again", 10*time.Second)
		rc.add(st)
		if st != barrier.Success || !allByte(creg.Bytes()[:64], 'Y') {
			t.Errorf("write on the recovered connection: %v", st)
		}
		rdmaAfter = time.Since(start)
		mr2.Free()
	}
	out := fmt.Sprintf("same TOS: key registered: message through after %v (0 = not in 5s); key freed and flushed: after %v (0 = not in 3s); owner socket closed and reopened: message after %v, new key and RDMA after %v", held, freed, after, rdmaAfter)
	t.Log(out)
	reliability(t, "cookies/recovery-same-connection", rc, out)
	if after == 0 {
		t.Errorf("connection did not recover within 20 s of closing the owner's socket; rows %v", rows())
	}

	// A fresh connection works at once.
	p = newPair(t, ctx)
	mr3, good3 := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite)
	defer mr3.Free()
	fillByte(sreg.Bytes(), 'Z')
	var fc tally
	st = p.write(t, ctx, good3, 0, local, "fresh", 10*time.Second)
	fc.add(st)
	if st != barrier.Success || !allByte(creg.Bytes()[:64], 'Z') {
		t.Fatalf("write on a fresh connection: %v", st)
	}
	reliability(t, "cookies/fresh-connection", fc, fmt.Sprintf("valid write on a new TOS succeeded; connection up in %v", p.upIn))
}
